#!/usr/bin/env bash
# Side-by-side throughput with Debian's memcaslap (memaslap), a load
# generator kura did not write: memcached 1.6 and kura with the same -t and
# -m, alternating A B A B, median of each, quoted as a ratio.
#
#   bench/memaslap.sh [rounds] [seconds] [concurrency]
#
# Needs: memcached, memcaslap (Debian libmemcached-tools), a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-10}
CONC=${3:-32}
THREADS=${THREADS:-2}
MEM=${MEM:-256}
# KURA: the kura binary to run [default: a release build of this tree]
if [[ -z "${KURA:-}" ]]; then
  cargo build --release -q -p kura
  KURA=target/release/kura
fi
# shellcheck source=bench/lib.sh
. bench/lib.sh
MC_PORT=$(free_port); KURA_PORT=$(free_port)
memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$MC_PORT" -t "$THREADS" -m "$MEM" &
MC_PID=$!
"$KURA" server -l 127.0.0.1 -p "$KURA_PORT" -t "$THREADS" -m "$MEM" &
KURA_PID=$!
trap 'kill $MC_PID $KURA_PID 2>/dev/null || true' EXIT
sleep 1
run() { # port -> ops/s
  memcaslap -s "127.0.0.1:$1" -T "$THREADS" -c "$CONC" -t "${SECS}s" -F bench/memaslap.cnf 2>&1 \
    | awk '/^Run time/ {for (i=1;i<=NF;i++) if ($i=="TPS:") print $(i+1)}'
}
mc=(); ku=()
for r in $(seq "$ROUNDS"); do
  mc+=("$(run "$MC_PORT")"); ku+=("$(run "$KURA_PORT")")
  echo "round $r: memcached ${mc[-1]} ops/s, kura ${ku[-1]} ops/s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
M=$(median "${mc[@]}"); K=$(median "${ku[@]}")
echo "median: memcached $M ops/s, kura $K ops/s, ratio kura/memcached $(awk -v k="$K" -v m="$M" 'BEGIN {printf "%.2f", k/m}')"
