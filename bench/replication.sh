#!/usr/bin/env bash
# Replication's cost, side by side with Redis 7's on the same machine
# (issue 16): the primary's set throughput and CPU per request with 0, 1
# and 2 replicas (ratios to 0, per system: the two systems' load generators
# differ, so only each one's own ratios are compared), the lag a client
# sees under load (1) with one replica (in closed loop, at a fixed rate, and
# the probe's own delay without a replica), and the time of a full resync
# of ITEMS items of 100 bytes.
#
#   bench/replication.sh
#
# kura: a primary (in memory by default, as Redis here; KURA_PRIMARY=durable
# for --data-dir --fsync everysec) and in-memory replicas
# (--replica-of), load from `kura bench -c 32 -t 1 --ratio 0:1 --value-size
# 100 --keys 100000`. The set load runs one
# client thread, as redis-benchmark does: with two, kura's load generator
# saturates the primary on a 2-vCPU machine and the replica's threads then
# take CPU from both, so the ratio measured the machine's scheduling (more
# wake-ups and task switches per set) more than the replica's work
# (CLIENT_THREADS=2 runs it that way). Redis: redis-server with
# neither RDB nor AOF (--save "" --appendonly no) and replicas
# (--replicaof), load from `redis-benchmark -c 32 -t set -d 100 -r 100000`.
# Load (1) for the lag (32 connections, 90/10 get/set, 100 bytes, 100,000
# keys, two client threads) comes from `kura bench` for both systems
# (`-P resp` for Redis). The probe (bench/repl_probe.py lag) writes a key
# on the primary every LAG_GAP_MS and reads the replica until it has it;
# its percentiles are given per round and over every round's probes. In
# closed loop on 2 vCPUs each server runs as fast as it can, so the one
# that serves more leaves less CPU to the probe and the replica: the fixed
# rate (LAG_RATE) compares the same offered load, and `lagself` measures
# what the probe alone sees under the closed loop.
# The full resync's items are the same for both: keys key:N with 100
# random hex digits each (bench/repl_probe.py fill).
# Each round runs both systems in turn (A B A B). Server CPU is the primary
# process's utime+stime over the run divided by the requests.
#
# The closed loop's sets/s change with the replicas' threads on a 2-vCPU
# machine (each system batches differently as it slows), which moves CPU
# per set by more than a replica costs. The `fixed` part takes that away:
# both primaries get the same open-loop load, `kura bench -P text` for kura
# and `kura bench -P resp` for Redis (the same 32 connections, one client
# thread, sets of 100 bytes over 100,000 keys, RATE sets/s on a
# timetable), so the same sets arrive at the same moments with 0, 1 and 2
# replicas; CPU is the primary's threads' run time (schedstat, ns) over
# the run, per set.
#
# Knobs: ROUNDS=3, DURATION=5, ITEMS=1000000, CLIENT_THREADS=1, RATE=30000, KURA (a kura binary to use
# instead of building this checkout's), OUT (a new temporary dir),
# LAG_RATE=80000, LAG_GAP_MS=2, REPLICA_THREADS=2,
# PARTS="sets fixed lag lagrate lagself resync" (which parts to run), KURA_PRIMARY=memory (as
# Redis without persistence: the primary's backlog is its only one) or
# durable (--data-dir, --fsync everysec).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
ITEMS=${ITEMS:-1000000}
CLIENT_THREADS=${CLIENT_THREADS:-1}
OUT=${OUT:-$(mktemp -d /tmp/kura-repl-bench.XXXXXX)}
export LAG_GAP_MS=${LAG_GAP_MS:-2}
RATE=${RATE:-30000}
LAG_RATE=${LAG_RATE:-80000}
PARTS=${PARTS:-"sets fixed lag lagrate lagself resync"}
KURA_PRIMARY=${KURA_PRIMARY:-memory}
part() { [[ " $PARTS " == *" $1 "* ]]; }
mkdir -p "$OUT"
if [[ -z "${KURA:-}" ]]; then
  cargo build --release -q -p kura
  KURA=target/release/kura
fi
PROBE="python3 bench/repl_probe.py"

# shellcheck source=bench/lib.sh
. bench/lib.sh
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; PIDS=(); }
trap cleanup EXIT
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
uticks() { awk '{print $14}' "/proc/$1/stat"; }
# run time of all of a process's threads, in ns
run_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }

# start_kura N: a primary and N replicas; sets P_PORT, P_PID, R_PORTS
start_kura() {
  local n=$1 dir
  dir=$(mktemp -d "$OUT/kura-data.XXXXXX")
  P_PORT=$(free_port)
  local durable=()
  if [ "$KURA_PRIMARY" = durable ]; then durable=(--data-dir "$dir" --snapshot-log-size 0); fi
  "$KURA" server -p "$P_PORT" -t 2 -m 1024 "${durable[@]}" 2>/dev/null &
  P_PID=$!; PIDS+=("$P_PID"); wait_port "$P_PORT"
  R_PORTS=()
  for _ in $(seq "$n"); do
    local rp; rp=$(free_port)
    "$KURA" server -p "$rp" -t "${REPLICA_THREADS:-2}" -m 1024 --replica-of "127.0.0.1:$P_PORT" 2>/dev/null &
    PIDS+=($!); wait_port "$rp"; R_PORTS+=("$rp")
    $PROBE synced memcached "$P_PORT" "$rp" 60 >/dev/null
  done
}

start_redis() {
  local n=$1
  P_PORT=$(free_port)
  # Redis 7 waits 5 s before a diskless full sync, for more replicas to
  # join it; kura starts at once, so neither waits here.
  redis-server --port "$P_PORT" --bind 127.0.0.1 --save "" --appendonly no --io-threads 1 \
    --repl-diskless-sync-delay 0 \
    --dir "$OUT" --dbfilename "p$P_PORT.rdb" --logfile "" --daemonize no >/dev/null &
  P_PID=$!; PIDS+=("$P_PID"); wait_port "$P_PORT"
  R_PORTS=()
  for _ in $(seq "$n"); do
    local rp; rp=$(free_port)
    redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no --replicaof 127.0.0.1 "$P_PORT" \
      --dir "$OUT" --dbfilename "r$rp.rdb" --daemonize no >/dev/null &
    PIDS+=($!); wait_port "$rp"; R_PORTS+=("$rp")
    $PROBE synced redis "$P_PORT" "$rp" 60 >/dev/null
  done
}

# sets SYSTEM: requests/s and primary CPU us/request
sets() {
  local sys=$1 t0 t1 u0 u1 n
  t0=$(ticks "$P_PID"); u0=$(uticks "$P_PID")
  if [[ $sys == kura ]]; then
    n=$("$KURA" bench -s "127.0.0.1:$P_PORT" -c 32 -t "$CLIENT_THREADS" --ratio 0:1 --value-size 100 --keys 100000 \
      -d "$DURATION" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["requests"])')
  else
    local count=$((DURATION * 60000))
    redis-benchmark -p "$P_PORT" -c 32 -t set -d 100 -r 100000 -n "$count" -q >/dev/null
    n=$count
  fi
  t1=$(ticks "$P_PID"); u1=$(uticks "$P_PID")
  echo "$n $((t1 - t0)) $((u1 - u0))"
}

echo "kura $(git describe --always --dirty) vs $(redis-server --version | cut -d' ' -f3), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
part sets && echo "set throughput and primary CPU by number of replicas; $ROUNDS rounds of ${DURATION}s (kura, $CLIENT_THREADS client thread(s)) / $((DURATION * 60000)) sets (redis)"
part sets && echo "columns: round replicas system sets cpu_ticks seconds user_ticks"
for round in $(seq "$ROUNDS"); do
  part sets || break
  for n in 0 1 2; do
    for sys in kura redis; do
      "start_$sys" "$n"
      start=$(date +%s.%N)
      read -r reqs ticks_used user_ticks < <(sets "$sys")
      secs=$(python3 -c "import time; print(time.time() - $start)")
      echo "$round $n $sys $reqs $ticks_used $secs $user_ticks" | tee -a "$OUT/sets.txt"
      cleanup
    done
  done
done

# fixed SYSTEM: sets at RATE/s, open loop; prints sets, primary ns, user ticks, p99 us
fixed() {
  local sys=$1 proto=text c0 c1 u0 u1 json
  [[ $sys == redis ]] && proto=resp
  c0=$(run_ns "$P_PID"); u0=$(uticks "$P_PID")
  json=$("$KURA" bench -s "127.0.0.1:$P_PORT" -P "$proto" -c 32 -t 1 --ratio 0:1 --value-size 100 \
    --keys 100000 --rate "$RATE" -d "$DURATION" --json)
  c1=$(run_ns "$P_PID"); u1=$(uticks "$P_PID")
  python3 -c 'import json,sys; r = json.loads(sys.argv[1])["runs"][0]; assert r["errors"] == 0, r; print(r["requests"], int(sys.argv[2]), int(sys.argv[3]), r["latency_us"]["p99"])' \
    "$json" "$((c1 - c0))" "$((u1 - u0))"
}

echo
part fixed && echo "primary CPU per set at a fixed rate of $RATE sets/s (open loop, kura bench -P text / -P resp), $ROUNDS rounds of ${DURATION}s"
part fixed && echo "columns: round replicas system sets primary_ns user_ticks p99_us"
for round in $(seq "$ROUNDS"); do
  part fixed || break
  for n in 0 1 2; do
    for sys in kura redis; do
      "start_$sys" "$n"
      echo "$round $n $sys $(fixed "$sys")" | tee -a "$OUT/fixed.txt"
      cleanup
    done
  done
done

# lag_round MODE ROUND: one round of the lag probe for both systems, under
# load (1) from the same load generator (kura bench, -P resp for Redis), so
# the probe and the replica compete with the same client threads. MODE:
#   lag      closed loop: each system as fast as it serves (kura serves more)
#   lagrate  open loop at LAG_RATE requests/s for both (the same offered load)
#   lagself  closed loop, no replica: the probe reads its write back from the
#            primary on its other connection, the probe's own delay under
#            that load (what is left of `lag` is the replication's)
lag_round() {
  local mode=$1 round=$2 sys proto probe rport rate
  for sys in kura redis; do
    if [[ $mode == lagself ]]; then "start_$sys" 0; rport=$P_PORT; else "start_$sys" 1; rport=${R_PORTS[0]}; fi
    proto=text; probe=memcached
    if [[ $sys == redis ]]; then proto=resp; probe=redis; fi
    rate=()
    if [[ $mode == lagrate ]]; then rate=(--rate "$LAG_RATE"); fi
    "$KURA" bench -s "127.0.0.1:$P_PORT" -P "$proto" -c 32 -t 2 --ratio 9:1 --value-size 100 --keys 100000 \
      --prefill -d "$((DURATION + 1))" "${rate[@]}" >/dev/null &
    load=($!)
    sleep 1
    echo "$round $sys $(LAG_SAMPLES="$OUT/$mode-samples.txt" $PROBE lag "$probe" "$P_PORT" "$rport" "$DURATION")" |
      tee -a "$OUT/$mode.txt"
    kill "${load[@]}" 2>/dev/null || true
    wait "${load[@]}" 2>/dev/null || true
    cleanup
  done
}

for mode in lag lagrate lagself; do
  part "$mode" || continue
  echo
  case $mode in
    lag) echo "lag a client sees under load (1) in closed loop, one replica, ${DURATION}s" ;;
    lagrate) echo "lag a client sees under load (1) at $LAG_RATE req/s, one replica, ${DURATION}s" ;;
    lagself) echo "the probe against the primary itself (no replica) under load (1) in closed loop, ${DURATION}s" ;;
  esac
  for round in $(seq "$ROUNDS"); do lag_round "$mode" "$round"; done
done

echo
part resync && echo "full resync of $ITEMS items of 100 bytes"
for round in $(seq "$ROUNDS"); do
  part resync || break
  for sys in kura redis; do
    "start_$sys" 0
    if [[ $sys == kura ]]; then
      $PROBE fill memcached "$P_PORT" - "$ITEMS" >/dev/null
      rp=$(free_port)
      t0=$(date +%s.%N)
      "$KURA" server -p "$rp" -t "${REPLICA_THREADS:-2}" -m 1024 --replica-of "127.0.0.1:$P_PORT" 2>/dev/null &
      PIDS+=($!)
      $PROBE synced memcached "$P_PORT" "$rp" 300 >/dev/null
      echo "$round $sys synced_s $(python3 -c "import time; print(round(time.time() - $t0, 3))")" | tee -a "$OUT/resync.txt"
    else
      $PROBE fill redis "$P_PORT" - "$ITEMS" >/dev/null
      rp=$(free_port)
      t0=$(date +%s.%N)
      redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no --replicaof 127.0.0.1 "$P_PORT" \
        --dir "$OUT" --dbfilename "r$rp.rdb" --daemonize no >/dev/null &
      PIDS+=($!)
      $PROBE synced redis "$P_PORT" "$rp" 300 >/dev/null
      echo "$round $sys synced_s $(python3 -c "import time; print(round(time.time() - $t0, 3))")" | tee -a "$OUT/resync.txt"
    fi
    cleanup
  done
done

python3 - "$OUT" <<'EOF'
import statistics, sys
out = sys.argv[1]
import os
rows = [l.split() for l in open(f"{out}/sets.txt")] if os.path.exists(f"{out}/sets.txt") else []
med = {}
for sys_ in ("kura", "redis") if rows else ():
    for n in ("0", "1", "2"):
        rs = [r for r in rows if r[1] == n and r[2] == sys_]
        tput = statistics.median(int(r[3]) / float(r[5]) for r in rs)
        cpu = statistics.median(int(r[4]) * 1e4 / int(r[3]) for r in rs)
        user = statistics.median(int(r[6]) * 1e4 / int(r[3]) for r in rs)
        med[sys_, n] = (tput, cpu, user)
print() if med else None
if med: print(f"{'system':<7} {'replicas':>8} {'sets/s':>10} {'vs 0':>6} {'CPU us/set':>11} {'vs 0':>6} {'user us/set':>12} {'vs 0':>6}")
for (sys_, n), (t, c, u) in med.items():
    t0, c0, u0 = med[sys_, "0"]
    print(f"{sys_:<7} {n:>8} {t:>10,.0f} {t / t0:>6.2f} {c:>11.2f} {c / c0:>6.2f} {u:>12.2f} {u / u0:>6.2f}")
if os.path.exists(f"{out}/fixed.txt"):
    rows = [l.split() for l in open(f"{out}/fixed.txt")]
    per = {(r[0], r[1], r[2]): int(r[4]) / int(r[3]) / 1000 for r in rows}
    print()
    print(f"at a fixed rate: {'system':<7} {'replicas':>8} {'CPU us/set':>11} {'vs 0 (median of rounds)':>24} {'p99 us':>8}")
    for sys_ in ("kura", "redis"):
        for n in ("0", "1", "2"):
            rounds = sorted({r[0] for r in rows if r[1] == n and r[2] == sys_})
            cpu = statistics.median(per[k, n, sys_] for k in rounds)
            ratio = statistics.median(per[k, n, sys_] / per[k, "0", sys_] for k in rounds if (k, "0", sys_) in per)
            p99 = statistics.median(float(r[6]) for r in rows if r[1] == n and r[2] == sys_)
            print(f"{'':16} {sys_:<7} {n:>8} {cpu:>11.3f} {ratio:>24.3f} {p99:>8.0f}")
for name in ("lag", "lagrate", "lagself", "resync"):
    if not os.path.exists(f"{out}/{name}.txt"):
        continue
    print()
    for sys_ in ("kura", "redis"):
        rs = [l.split() for l in open(f"{out}/{name}.txt") if l.split()[1] == sys_]
        if name.startswith("lag"):
            p99 = statistics.median(float(r[6]) for r in rs)
            p50 = statistics.median(float(r[4]) for r in rs)
            print(f"{sys_:<7} {name} p50 {p50:.3f} ms, p99 {p99:.3f} ms (median of rounds)")
            # Every round's probes together: a p99 of one round's few
            # thousand probes moves by a millisecond from round to round.
            probe = "memcached" if sys_ == "kura" else "redis"
            xs = sorted(float(l.split()[1]) for l in open(f"{out}/{name}-samples.txt") if l.split()[0] == probe)
            if xs:
                q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
                print(f"{'':7} all {len(xs)} probes: p50 {q(0.5):.3f} p90 {q(0.9):.3f} p99 {q(0.99):.3f} p99.9 {q(0.999):.3f} ms")
        else:
            s = statistics.median(float(r[3]) for r in rs)
            print(f"{sys_:<7} full resync {s:.2f} s (median of rounds)")
EOF
