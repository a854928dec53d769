#!/usr/bin/env bash
# kura server against Debian's memcached 1.6, side by side, with `kura bench`
# as the load generator (and memcaslap at the end, a load generator kura did
# not write). Both servers run with the same -t and -m on free ports on
# 127.0.0.1; each load runs against memcached then kura, ROUNDS times
# (A B A B ...); the medians are compared as kura/memcached.
#
#   bench/compare.sh
#
# Loads (32 connections, 100-byte values, KEYS keys prefilled, unless said):
#   (1) 90/10 get/set, no pipelining      throughput, server CPU per request
#   (2) the same at pipeline depth 16     throughput, server CPU per request
#   (3) sets only                         throughput, server CPU per request
#   (4) 10-key multi-gets                 throughput, server CPU per request
#   (5) load (1) at a fixed RATE          p99.9 and mean latency (open loop)
#   (6) one connection, noreply sets vs acknowledged sets: the ratio per server
#   memory: resident memory per item after loading ITEMS 100-byte items into
#   fresh servers (VmRSS after minus before, divided by ITEMS)
#
# Knobs (environment):
#   ROUNDS=3          rounds of each load
#   DURATION=5        seconds per run
#   THREADS=2         server threads (-t), both servers
#   MEM=1024          server memory limit in MB (-m), both servers
#   CLIENT_THREADS=2  kura bench threads
#   KEYS=100000       key space of loads 1-6
#   RATE=             requests/s of load 5 [default: half the lower median throughput of load 1]
#   ITEMS=1000000     items of the memory test (0 skips it)
#   MEMASLAP_SECS=5   seconds per memcaslap run (0 skips memcaslap)
#   SWEEP=auto        rates of the latency-vs-load sweep of load (1), "R1,R2,..." [auto: 10% to
#                     110% of the lower median throughput of load 1]; 0 skips the sweep
#   SWEEP_SECS=2      seconds per rate of the sweep
#   PLOT=bench/plots/latency-vs-load.svg   where the sweep's plot goes (its JSON reports
#                     go beside it, PLOT without .svg + .memcached.json and .kura.json)
#   OUT=              directory for the JSON reports [default: a new temporary one]
#
# Server CPU time is utime+stime of the server process from /proc/PID/stat,
# before and after each run, divided by the requests the run counted.
# Needs: memcached (Debian's), python3; memcaslap (libmemcached-tools) for the last part.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
THREADS=${THREADS:-2}
MEM=${MEM:-1024}
CLIENT_THREADS=${CLIENT_THREADS:-2}
KEYS=${KEYS:-100000}
RATE=${RATE:-}
ITEMS=${ITEMS:-1000000}
MEMASLAP_SECS=${MEMASLAP_SECS:-5}
SWEEP=${SWEEP:-auto}
SWEEP_SECS=${SWEEP_SECS:-2}
PLOT=${PLOT:-bench/plots/latency-vs-load.svg}
OUT=${OUT:-$(mktemp -d /tmp/kura-compare.XXXXXX)}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
: >"$RESULTS"

cargo build --release -q -p kura
# A copy of the binary, so that every part of the run (memcaslap's too)
# measures the same build even if the tree is rebuilt meanwhile.
KURA="$OUT/kura"
cp "${CARGO_TARGET_DIR:-target}/release/kura" "$KURA"
KURA_VERSION=$(git describe --always --dirty)
CLK_TCK=$(getconf CLK_TCK)

# shellcheck source=bench/lib.sh
. bench/lib.sh

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_memcached() { # port -> pid in $STARTED
  memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$1" -t "$THREADS" -m "$MEM" &
  STARTED=$!
  PIDS+=("$STARTED")
  wait_port "$1" 200
}

start_kura() { # port -> pid in $STARTED
  "$KURA" server -l 127.0.0.1 -p "$1" -t "$THREADS" -m "$MEM" &
  STARTED=$!
  PIDS+=("$STARTED")
  wait_port "$1" 200
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# CPU ticks of a process, all (utime + stime) and the kernel's (stime), from
# one read; fields after the ")" of the name.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13, $13 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"; }

# json FILE EXPR: a value from a kura bench JSON report (r = the first run)
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); r=(d['runs'] or [d['prefill']])[0]; print($2)" "$1"; }

# bench LOAD SERVER PORT PID ARGS...: one run; records throughput, latency,
# errors and server CPU per request (all, and the kernel's part of it).
bench() {
  local load=$1 server=$2 port=$3 pid=$4
  shift 4
  local f="$OUT/$(echo "$load" | tr -c 'a-z0-9\n' '_')-$server-$round.json"
  local before after sys_before sys_after
  read -r before sys_before < <(cpu_ticks "$pid")
  "$KURA" bench -s "127.0.0.1:$port" -t "$CLIENT_THREADS" --json "$@" >"$f" ||
    echo "warning: $server reported errors in $load (see $f)" >&2
  read -r after sys_after < <(cpu_ticks "$pid")
  local requests
  requests=$(json "$f" "r['requests']")
  record "$load" "$server" "req/s" "$(json "$f" "round(r['throughput'])")"
  record "$load" "$server" "p99.9 us" "$(json "$f" "r['latency_us']['p999']")"
  record "$load" "$server" "mean us" "$(json "$f" "round(r['latency_us']['mean'], 1)")"
  record "$load" "$server" "errors" "$(json "$f" "r['errors']")"
  record "$load" "$server" "server CPU us/req" \
    "$(python3 -c "print(round(($after - $before) / $CLK_TCK * 1e6 / max($requests, 1), 2))")"
  record "$load" "$server" "kernel CPU us/req" \
    "$(python3 -c "print(round(($sys_after - $sys_before) / $CLK_TCK * 1e6 / max($requests, 1), 2))")"
  printf '  round %s %-10s %-34s %s req/s\n' "$round" "$server" "$load" "$(json "$f" "round(r['throughput'])")"
}

echo "kura $KURA_VERSION vs $(memcached -V), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "servers: -t $THREADS -m $MEM; client: kura bench -t $CLIENT_THREADS; $ROUNDS rounds of ${DURATION}s; results in $OUT"

# --- memory per item, on fresh servers -----------------------------------
if ((ITEMS > 0)); then
  echo "memory: $ITEMS items of 100 bytes"
  round=1
  for server in memcached kura; do
    port=$(free_port)
    "start_$server" "$port"
    pid=$STARTED
    sleep 0.5
    base=$(rss_kb "$pid")
    "$KURA" bench -s "127.0.0.1:$port" -t "$CLIENT_THREADS" -c 8 --pipeline 32 --keys "$ITEMS" \
      --value-size 100 --prefill -n 0 --json >"$OUT/memory-$server.json"
    sleep 0.5
    loaded=$(rss_kb "$pid")
    per_item=$(python3 -c "print(round(($loaded - $base) * 1024 / $ITEMS, 1))")
    record "memory, $ITEMS x 100 B" "$server" "RSS B/item" "$per_item"
    echo "  $server: VmRSS $base kB -> $loaded kB, $per_item B/item"
    stop "$pid"
  done
fi

# --- loads 1-6 --------------------------------------------------------------
MC_PORT=$(free_port)
start_memcached "$MC_PORT"
MC_PID=$STARTED
KURA_PORT=$(free_port)
start_kura "$KURA_PORT"
KURA_PID=$STARTED
for target in "$MC_PORT" "$KURA_PORT"; do
  "$KURA" bench -s "127.0.0.1:$target" -t "$CLIENT_THREADS" --keys "$KEYS" --prefill -n 0 >/dev/null
done

# each load: memcached then kura, ROUNDS times
load() { # name, kura bench arguments...
  local name=$1
  shift
  echo "$name"
  for round in $(seq "$ROUNDS"); do
    bench "$name" memcached "$MC_PORT" "$MC_PID" "$@"
    bench "$name" kura "$KURA_PORT" "$KURA_PID" "$@"
  done
}

common=(-c 32 --keys "$KEYS" --value-size 100 -d "$DURATION")
load "(1) 90/10 get/set" "${common[@]}" --ratio 9:1
load "(2) 90/10, pipeline 16" "${common[@]}" --ratio 9:1 --pipeline 16
load "(3) sets only" "${common[@]}" --ratio 0:1
load "(4) 10-key multi-gets" "${common[@]}" --ratio 1:0 --multiget 10
# the lower of the two servers' median throughput on load 1, times each of $1
saturation_times() {
  python3 - "$RESULTS" "$1" <<'EOF'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1]), delimiter="\t")
        if r[0] == "(1) 90/10 get/set" and r[2] == "req/s"]
med = [statistics.median(float(r[3]) for r in rows if r[1] == s) for s in ("memcached", "kura")]
print(",".join(str(max(1000, int(min(med) * float(f) // 1000 * 1000))) for f in sys.argv[2].split(",")))
EOF
}
if [[ -z "$RATE" ]]; then
  RATE=$(saturation_times 0.5)
fi
load "(5) 90/10 at $RATE req/s" "${common[@]}" --ratio 9:1 --rate "$RATE"
load "(6a) acknowledged sets, 1 conn" -c 1 --keys "$KEYS" -d "$DURATION" --ratio 0:1
load "(6b) noreply sets, 1 conn" -c 1 --keys "$KEYS" -d "$DURATION" --ratio 0:1 --noreply

# --- latency against offered load (load 1, open loop), one sweep each ---------
if [[ "$SWEEP" != 0 ]]; then
  if [[ "$SWEEP" == auto ]]; then
    SWEEP=$(saturation_times 0.1,0.2,0.4,0.6,0.8,0.9,1.0,1.1)
  fi
  echo "sweep of load (1) at $SWEEP req/s, ${SWEEP_SECS}s each -> $PLOT"
  mkdir -p "$(dirname "$PLOT")"
  sweep=(-t "$CLIENT_THREADS" -c 32 --keys "$KEYS" --ratio 9:1 -d "$SWEEP_SECS" --sweep "$SWEEP")
  MC_SWEEP=${PLOT%.svg}.memcached.json
  KURA_SWEEP=${PLOT%.svg}.kura.json
  "$KURA" bench -s "127.0.0.1:$MC_PORT" "${sweep[@]}" --label "memcached $(memcached -V | cut -d' ' -f2)" \
    --json >"$MC_SWEEP" || echo "warning: errors in the memcached sweep" >&2
  "$KURA" bench -s "127.0.0.1:$KURA_PORT" "${sweep[@]}" --label "kura $KURA_VERSION" \
    --json >"$KURA_SWEEP" || echo "warning: errors in the kura sweep" >&2
  "$KURA" bench -n 0 --plot "$PLOT" --overlay "$MC_SWEEP" --overlay "$KURA_SWEEP" >/dev/null
  python3 - "$MC_SWEEP" "$KURA_SWEEP" <<'EOF'
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    print(f"  {d['label']}")
    for r in d["runs"]:
        l = r["latency_us"]
        print(f"    {r['offered_rate']:>9.0f} req/s offered, {r['throughput']:>9.0f} achieved:"
              f" mean {l['mean']:>9.1f} us, p99.9 {l['p999']:>9.1f} us")
EOF
fi
stop "$MC_PID"
stop "$KURA_PID"

# --- memcaslap ---------------------------------------------------------------
if ((MEMASLAP_SECS > 0)); then
  echo "memcaslap (bench/memaslap.sh $ROUNDS $MEMASLAP_SECS 32)"
  KURA=$KURA THREADS=$THREADS MEM=$MEM bench/memaslap.sh "$ROUNDS" "$MEMASLAP_SECS" 32 | tee "$OUT/memaslap.txt"
  awk '/^round/ { gsub(",", ""); print "memcaslap 90/10\tmemcached\tops/s\t" $4; print "memcaslap 90/10\tkura\tops/s\t" $7 }' \
    "$OUT/memaslap.txt" >>"$RESULTS"
fi

# --- medians and ratios -------------------------------------------------------
python3 - "$RESULTS" <<'EOF'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1]), delimiter="\t"))
order, vals = [], {}
for load, server, metric, value in rows:
    if (load, metric) not in order:
        order.append((load, metric))
    vals.setdefault((load, metric, server), []).append(float(value))
med = {k: statistics.median(v) for k, v in vals.items()}
shown = {"req/s", "ops/s", "server CPU us/req", "kernel CPU us/req", "RSS B/item", "errors"}
print()
print(f"{'load':<34} {'metric':<18} {'memcached':>11} {'kura':>11} {'kura/memcached':>15}")
def line(load, metric, m, k):
    ratio = f"{k / m:.2f}" if m else "-"
    print(f"{load:<34} {metric:<18} {m:>11.6g} {k:>11.6g} {ratio:>15}")
for load, metric in order:
    m, k = med.get((load, metric, "memcached")), med.get((load, metric, "kura"))
    if m is None or k is None:
        continue
    if metric in shown or load.startswith("(5)"):
        if metric == "errors" and m == 0 and k == 0:
            continue
        line(load, metric, m, k)
ack = "(6a) acknowledged sets, 1 conn"
quiet = "(6b) noreply sets, 1 conn"
if (ack, "req/s", "kura") in med:
    m = med[(quiet, "req/s", "memcached")] / med[(ack, "req/s", "memcached")]
    k = med[(quiet, "req/s", "kura")] / med[(ack, "req/s", "kura")]
    line("(6) noreply / acknowledged", "speed-up", m, k)
print("medians of each server's rounds; latency in microseconds")
EOF
