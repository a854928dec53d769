#!/usr/bin/env bash
# kura proxy against Debian's nutcracker (twemproxy) with the same pool and
# ring, and against no proxy, with `kura bench` as the load generator. Three
# kura servers (-t 1; or memcached, BACKEND=memcached) are the pool; nutcracker and kura proxy both place keys
# with twemproxy's ketama and fnv1a_64 over the same named servers. Each
# load runs against nutcracker, kura proxy and one backend directly, ROUNDS
# times (A B C A B C ...); medians are compared as kura proxy / nutcracker.
#
#   bench/proxy.sh
#
# Loads (32 connections, 100-byte values, KEYS keys prefilled through the proxy):
#   (1) 90/10 get/set, no pipelining      throughput, proxy CPU per request
#   (2) 10-key multi-gets                 throughput, proxy CPU per request
#   (3) load (1) at pipeline depth 16     throughput, proxy CPU per request
#   (4) load (1) at a fixed RATE          p99.9 (open loop)
# "direct" is one backend without a proxy (its CPU column is that server's).
#
# Knobs: ROUNDS=3 DURATION=5 KEYS=100000 CLIENT_THREADS=2 PROXY_THREADS=1
#   BACKEND=kura (or memcached: Debian's memcached -t 1 as the pool)
#   KURA_BIN= (a kura binary to use instead of building this checkout's)
#   LOADS="1 2 3 4" (which of the loads to run)
#   (nutcracker is single-threaded) RATE= [default: half nutcracker's median of load 1]
#   OUT= [default: a new temporary directory]
# Proxy CPU time is utime+stime of the proxy process from /proc/PID/stat,
# before and after each run, divided by the requests the run counted.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
KEYS=${KEYS:-100000}
CLIENT_THREADS=${CLIENT_THREADS:-2}
PROXY_THREADS=${PROXY_THREADS:-1}
RATE=${RATE:-}
LOADS=${LOADS:-1 2 3 4}
BACKEND=${BACKEND:-kura}
OUT=${OUT:-$(mktemp -d /tmp/kura-proxy-bench.XXXXXX)}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
: >"$RESULTS"

if [[ -n ${KURA_BIN:-} ]]; then
  cp "$KURA_BIN" "$OUT/kura"
else
  target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
  cargo build --release -q -p kura
  cp "$target_dir/release/kura" "$OUT/kura"
fi
KURA="$OUT/kura"
KURA_VERSION=$(git describe --always --dirty)
CLK_TCK=$(getconf CLK_TCK)

# shellcheck source=bench/lib.sh
. bench/lib.sh

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"; }
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); r=(d['runs'] or [d['prefill']])[0]; print($2)" "$1"; }

servers=()
for i in 1 2 3; do
  p=$(free_port)
  case $BACKEND in
    kura) "$KURA" server -p "$p" -t 1 -m 512 >/dev/null 2>&1 & ;;
    memcached) memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$p" -t 1 -m 512 >/dev/null 2>&1 & ;;
    *) echo "BACKEND is kura or memcached" >&2; exit 2 ;;
  esac
  PIDS+=("$!")
  wait_port "$p" 200
  servers+=("127.0.0.1:$p:1 node$i")
done
DIRECT_PORT=${servers[0]#127.0.0.1:}
DIRECT_PORT=${DIRECT_PORT%%:*}
DIRECT_PID=${PIDS[0]}

NUT_PORT=$(free_port)
{
  echo "pool:"
  echo "  listen: 127.0.0.1:$NUT_PORT"
  echo "  hash: fnv1a_64"
  echo "  distribution: ketama"
  echo "  auto_eject_hosts: false"
  echo "  server_connections: 1"
  echo "  servers:"
  for s in "${servers[@]}"; do echo "    - $s"; done
} >"$OUT/nutcracker.yml"
nutcracker -c "$OUT/nutcracker.yml" >/dev/null 2>&1 &
NUT_PID=$!
PIDS+=("$NUT_PID")
wait_port "$NUT_PORT" 200

PROXY_PORT=$(free_port)
{
  echo "[pools.main]"
  echo "ring = \"twemproxy\""
  echo "hash = \"fnv1a_64\""
  printf 'servers = ['
  sep=""
  for s in "${servers[@]}"; do printf '%s"%s"' "$sep" "$s"; sep=", "; done
  echo "]"
} >"$OUT/proxy.toml"
"$KURA" proxy -l "127.0.0.1:$PROXY_PORT" -t "$PROXY_THREADS" --config "$OUT/proxy.toml" >/dev/null 2>&1 &
PROXY_PID=$!
PIDS+=("$PROXY_PID")
wait_port "$PROXY_PORT" 200

echo "kura $KURA_VERSION: kura proxy (-t $PROXY_THREADS) vs $(nutcracker -V 2>&1 | head -1), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "pool ($BACKEND): ${servers[*]}; client: kura bench -t $CLIENT_THREADS; $ROUNDS rounds of ${DURATION}s; results in $OUT"
"$KURA" bench -s "127.0.0.1:$PROXY_PORT" -t "$CLIENT_THREADS" --keys "$KEYS" --prefill -n 0 >/dev/null
# The direct backend is asked every key of the run (all prefilled on it
# too): its figure is one server's capacity without a proxy in the way.
"$KURA" bench -s "127.0.0.1:$DIRECT_PORT" -t "$CLIENT_THREADS" --keys "$KEYS" --prefill -n 0 >/dev/null

bench() { # load name port pid args...
  local load=$1 name=$2 port=$3 pid=$4
  shift 4
  local f="$OUT/$(echo "$load" | tr -c 'a-z0-9\n' '_')-$name-$round.json"
  local before after
  before=$(cpu_ticks "$pid")
  "$KURA" bench -s "127.0.0.1:$port" -t "$CLIENT_THREADS" --json "$@" >"$f" ||
    echo "warning: $name reported errors in $load (see $f)" >&2
  after=$(cpu_ticks "$pid")
  local requests
  requests=$(json "$f" "r['requests']")
  record "$load" "$name" "req/s" "$(json "$f" "round(r['throughput'])")"
  record "$load" "$name" "p99.9 us" "$(json "$f" "r['latency_us']['p999']")"
  record "$load" "$name" "errors" "$(json "$f" "r['errors']")"
  record "$load" "$name" "CPU us/req" "$(python3 -c "print(round(($after - $before) / $CLK_TCK * 1e6 / max($requests, 1), 2))")"
  printf '  round %s %-11s %-30s %s req/s\n' "$round" "$name" "$load" "$(json "$f" "round(r['throughput'])")"
}

load() {
  local name=$1
  shift
  case " $LOADS " in *" ${name:1:1} "*) ;; *) return 0 ;; esac
  echo "$name"
  for round in $(seq "$ROUNDS"); do
    bench "$name" nutcracker "$NUT_PORT" "$NUT_PID" "$@"
    bench "$name" kura-proxy "$PROXY_PORT" "$PROXY_PID" "$@"
    bench "$name" direct "$DIRECT_PORT" "$DIRECT_PID" "$@"
  done
}

common=(-c 32 --keys "$KEYS" --value-size 100 -d "$DURATION")
load "(1) 90/10 get/set" "${common[@]}" --ratio 9:1
load "(2) 10-key multi-gets" "${common[@]}" --ratio 1:0 --multiget 10
load "(3) 90/10, pipeline 16" "${common[@]}" --ratio 9:1 --pipeline 16
if [[ -z "$RATE" && " $LOADS " == *" 4 "* ]]; then
  RATE=$(python3 - "$RESULTS" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1]), delimiter="\t")
        if r[0] == "(1) 90/10 get/set" and r[1] == "nutcracker" and r[2] == "req/s"]
if not rows:
    sys.exit("load (4) takes half of nutcracker's rate in load (1): add 1 to LOADS or set RATE")
print(max(1000, int(statistics.median(float(r[3]) for r in rows) * 0.5 // 1000 * 1000)))
PY
)
fi
load "(4) 90/10 at $RATE req/s" "${common[@]}" --ratio 9:1 --rate "$RATE"

echo
python3 - "$RESULTS" <<'PY'
import csv, statistics, sys
from collections import defaultdict
m = defaultdict(list)
for load, who, what, v in csv.reader(open(sys.argv[1]), delimiter="\t"):
    m[(load, who, what)].append(float(v))
loads = list(dict.fromkeys(k[0] for k in m))
print(f"{'load':32} {'figure':12} {'nutcracker':>11} {'kura proxy':>11} {'direct':>10} {'kura/nut':>9}")
for load in loads:
    for what in ("req/s", "CPU us/req", "p99.9 us", "errors"):
        med = {w: statistics.median(m[(load, w, what)]) for w in ("nutcracker", "kura-proxy", "direct") if m[(load, w, what)]}
        if len(med) < 3:
            continue
        ratio = med["kura-proxy"] / med["nutcracker"] if med["nutcracker"] else float("nan")
        print(f"{load:32} {what:12} {med['nutcracker']:11.2f} {med['kura-proxy']:11.2f} {med['direct']:10.2f} {ratio:8.2f}x")
PY
