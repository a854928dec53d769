#!/usr/bin/env bash
# Issue 15: server CPU per request, and latency, on load (1) (32 connections, 90/10 get/set, 100-byte values,
# 100,000 keys prefilled) at fixed rates in open loop: user-space and total (utime, stime from
# /proc/PID/stat before and after each run, divided by the requests the run counted), for
# memcached (Debian's) and kura side by side, -t 2 -m 1024 each, ROUNDS rounds alternating A B A B
# (A B C ... when KURA_B_ARGS or KURA_B_BIN adds a second kura: started with those extra flags, or
# from that binary, an earlier build say); per rate the medians over the rounds and the ratios to
# memcached.
#
# RATIO=0:1 runs sets only instead (get:set, as `kura bench --ratio`).
#
#   RATES="30000 60000" ROUNDS=5 DURATION=5 [RATIO=9:1] [KURA_BIN=...] [KURA_B_ARGS="-o worker_loop=tasks"] \
#     [KURA_B_BIN=/tmp/kura-before] bench/cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-"30000 60000"}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
RATIO=${RATIO:-9:1}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
start_pair
systems=(memcached kura)
ports=("$mp" "$kp")
pidl=("$mpid" "$kpid")
if [ -n "${KURA_B_ARGS:-}${KURA_B_BIN:-}" ]; then
  bp=$(free_port)
  # shellcheck disable=SC2086
  "${KURA_B_BIN:-$KURA}" server -l 127.0.0.1 -p "$bp" -t 2 -m 1024 ${KURA_B_ARGS:-} &
  bpid=$!
  trap 'kill $mpid $kpid $bpid 2>/dev/null || true' EXIT
  wait_port "$bp"
  "$KURA" bench -s "127.0.0.1:$bp" -t 2 -c 32 --keys 100000 --prefill -n 0 >/dev/null
  systems+=("kura ${KURA_B_BIN:+$KURA_B_BIN }${KURA_B_ARGS:-}")
  ports+=("$bp")
  pidl+=("$bpid")
fi
ticks() { awk '{ sub(/^.*\) /, ""); print $12, $13 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
echo "kura $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs $(memcached -V), $(nproc) cores, $(date -u +%FT%RZ); -t 2 -m 1024 each; CPU in ns a request"
out=$(mktemp)
for rate in $RATES; do
  for round in $(seq "$ROUNDS"); do
    for i in "${!systems[@]}"; do
      read -r u0 s0 < <(ticks "${pidl[$i]}")
      read -r reqs lat < <("$KURA" bench -s "127.0.0.1:${ports[$i]}" -t 2 -c 32 --keys 100000 \
        --ratio "$RATIO" -d "$DURATION" --rate "$rate" --json |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"][0]; l=r["latency_us"]
print(int(r["requests"]), "%.1f\t%.1f\t%.1f" % (l["mean"], l["p99"], l["p999"]))')
      read -r u1 s1 < <(ticks "${pidl[$i]}")
      echo "$rate	$round	$i	$(( (u1 - u0) * 1000000000 / hz / reqs ))	$(( (u1 - u0 + s1 - s0) * 1000000000 / hz / reqs ))	$lat" | tee -a "$out"
    done
  done
done
python3 - "$out" "${systems[@]}" <<'PY'
import sys, statistics as st
rows = [l.split('\t') for l in open(sys.argv[1]).read().split('\n') if l]
names = sys.argv[2:]
for rate in sorted({int(r[0]) for r in rows}):
    med = {}
    for i in range(len(names)):
        sel = [r for r in rows if int(r[0]) == rate and int(r[2]) == i]
        med[i] = [st.median(float(r[k]) for r in sel) for k in range(3, 8)]
    for i, n in enumerate(names):
        m, b = med[i], med[0]
        print(f"rate {rate}: {n:<34} user {m[0]:5.0f} ns ({m[0] / b[0]:.2f}x) total {m[1]:5.0f} ns ({m[1] / b[1]:.2f}x)"
              f"  mean {m[2]:6.0f} us ({m[2] / b[2]:.2f}x) p99 {m[3]:6.0f} ({m[3] / b[3]:.2f}x) p99.9 {m[4]:6.0f} ({m[4] / b[4]:.2f}x)")
PY
