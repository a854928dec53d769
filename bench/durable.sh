#!/usr/bin/env bash
# What durability costs: throughput of kura in memory against kura with
# --data-dir under --fsync no, everysec and always, same load, side by side.
# The four servers run at once on free ports (-t THREADS each); every round
# loads each in turn (A B C D A B C D ...) and the medians are compared as
# ratios to in-memory.
#
#   bench/durable.sh
#
# Loads (LOADS, space-separated GETS:SETS/VALUE_BYTES, default
# "0:1/100 9:1/100 0:1/50000"): sets only, load (1) of BENCHMARKS.md (90/10
# gets/sets, keys prefilled), and sets of 50 KB values (where the log's
# back-pressure, --log-max-lag, decides). kura bench, KEYS keys, CONNS
# connections, no pipelining (every request waits for its reply, so under
# `always` a set waits for the fsync that group commit shares among the
# connections).
#
# Knobs (environment): ROUNDS=3, DURATION=5 (s per run), THREADS=2,
# CONNS=32, KEYS=100000, CLIENT_THREADS=2, DATA=(a new temporary directory:
# put it on the disk you mean to measure), OUT=(a new temporary directory).
#
# In-memory without any of this code (the "pays nothing" check): set
# BASELINE=path/to/an/older/kura to add it as a fifth server, and
# BASELINE_FSYNC="everysec no" to run that build with --data-dir too (what
# a change to the durable mode costs).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
THREADS=${THREADS:-2}
CONNS=${CONNS:-32}
KEYS=${KEYS:-100000}
CLIENT_THREADS=${CLIENT_THREADS:-2}
DATA=${DATA:-$(mktemp -d /tmp/kura-durable-data.XXXXXX)}
OUT=${OUT:-$(mktemp -d /tmp/kura-durable-bench.XXXXXX)}
mkdir -p "$OUT"
BASELINE=${BASELINE:-}
LOADS=${LOADS:-"0:1/100 9:1/100 0:1/50000"}

cargo build --release -q -p kura
KURA=target/release/kura

# shellcheck source=bench/lib.sh
. bench/lib.sh
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

declare -A PORT
names=(memory no everysec always)
start() { # name binary args...
  local name=$1 bin=$2
  shift 2
  local port
  port=$(free_port)
  "$bin" server -l 127.0.0.1 -p "$port" -t "$THREADS" -m 1024 "$@" 2>/dev/null &
  PIDS+=($!)
  PORT[$name]=$port
  wait_port "$port"
}
start memory "$KURA"
for f in no everysec always; do
  start "$f" "$KURA" --data-dir "$DATA/$f" --fsync "$f"
done
if [[ -n "$BASELINE" ]]; then
  names=(baseline "${names[@]}")
  start baseline "$BASELINE"
  # BASELINE_FSYNC="everysec no": the older build with --data-dir too.
  for f in ${BASELINE_FSYNC:-}; do
    names+=("base-$f")
    start "base-$f" "$BASELINE" --data-dir "$DATA/base-$f" --fsync "$f"
  done
fi

echo "kura $(git rev-parse --short HEAD): throughput by durability, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "servers -t $THREADS -m 1024; kura bench -c $CONNS -t $CLIENT_THREADS --keys $KEYS; $ROUNDS rounds of ${DURATION}s; data in $DATA ($(df -h "$DATA" | awk 'NR==2 {print $1}'))"
stat_of() { # port name
  python3 - "$1" "$2" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"stats\r\n")
b = b""
while not b.endswith(b"END\r\n"):
    b += s.recv(65536)
stats = dict(l.split(" ")[1:3] for l in b.decode().splitlines() if l.startswith("STAT"))
print(stats.get(sys.argv[2], "-"))
EOF
}
for load in $LOADS; do
  ratio=${load%/*}
  size=${load#*/}
  tag="${ratio/:/-}-$size"
  prefill=()
  [[ "$ratio" != 0:* ]] && prefill=(--prefill)
  echo
  echo "load: gets:sets $ratio, values of $size bytes"
  for round in $(seq "$ROUNDS"); do
    for name in "${names[@]}"; do
      f="$OUT/$tag-$name-$round.json"
      "$KURA" bench -s "127.0.0.1:${PORT[$name]}" -t "$CLIENT_THREADS" -c "$CONNS" --ratio "$ratio" \
        --value-size "$size" --keys "$KEYS" "${prefill[@]}" -d "$DURATION" --json >"$f" ||
        echo "warning: $name reported errors (see $f)" >&2
      printf '  round %s %-9s %s req/s\n' "$round" "$name" \
        "$(python3 -c "import json; print(round(json.load(open('$f'))['runs'][0]['throughput']))")"
    done
  done
  python3 - "$OUT" "$tag" "$ROUNDS" "${names[@]}" <<'EOF'
import json, statistics, sys
out, tag, rounds, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
med = {}
p999 = {}
for n in names:
    runs = [json.load(open(f"{out}/{tag}-{n}-{r}.json"))["runs"][0] for r in range(1, rounds + 1)]
    med[n] = statistics.median(r["throughput"] for r in runs)
    p999[n] = statistics.median(r["latency_us"]["p999"] for r in runs)
print(f"{'server':<10} {'req/s (median)':>16} {'vs memory':>10} {'p99.9 us':>10}")
for n in names:
    print(f"{n:<10} {med[n]:>16,.0f} {med[n] / med['memory']:>10.2f} {p999[n]:>10.0f}")
EOF
done
echo
for name in no everysec always; do
  echo "$name: log_write_waits $(stat_of "${PORT[$name]}" log_write_waits)"
done
