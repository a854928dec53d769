#!/usr/bin/env bash
# Issue 15: would an io_uring worker loop cut the CPU a request? bench/loop-probe (a toy
# memcached-text server, not kura) serves load (1) (32 connections, 90/10 get/set, 100-byte
# values, 100,000 keys prefilled) in open loop at each rate of RATES from each loop of MODES,
# 2 threads each, side by side, ROUNDS rounds alternating A B A B: user and total CPU a request
# (utime and stime of /proc/PID/stat, before and after each run), per rate the medians and the
# ratios to the epoll loop (kura's design).
#
#   MODES="epoll multi uring" RATES="37000 62000" ROUNDS=7 DURATION=4 bench/loop-probe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
MODES=${MODES:-"epoll multi uring"}
RATES=${RATES:-"37000 62000"}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-4}
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
CARGO_TARGET_DIR=target/loop-probe cargo build --release -q --manifest-path bench/loop-probe/Cargo.toml
PROBE=target/loop-probe/release/loop-probe
declare -A P PID
for m in $MODES; do
  P[$m]=$(free_port)
  "$PROBE" "$m" "${P[$m]}" 2 &
  PID[$m]=$!
done
out=$(mktemp)
trap 'kill "${PID[@]}" 2>/dev/null || true; rm -f "$out"' EXIT
for m in $MODES; do
  wait_port "${P[$m]}"
  "$KURA" bench -s "127.0.0.1:${P[$m]}" -t 2 -c 32 --keys 100000 --prefill -n 0 >/dev/null
done

echo "rate round loop requests user_ns sys_ns"
for rate in $RATES; do
  for r in $(seq "$ROUNDS"); do
    for m in $MODES; do
      echo "$rate $r $m $(cpu_a_request "${PID[$m]}" "${P[$m]}" --rate "$rate" -d "$DURATION")" |
        tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics as st
import sys
rows = [l.split() for l in open(sys.argv[1])]
for rate in sorted({r[0] for r in rows}, key=int):
    med = {}
    for m in dict.fromkeys(r[2] for r in rows):
        rr = [r for r in rows if r[0] == rate and r[2] == m]
        med[m] = (st.median(int(r[4]) for r in rr), st.median(int(r[4]) + int(r[5]) for r in rr))
    base = med.get("epoll", next(iter(med.values())))
    for m, (u, t) in med.items():
        print(f"rate {rate}: {m:6} user {u:5.0f} total {t:6.0f} ns a request;"
              f" to epoll: user {u / base[0]:.2f}x total {t / base[1]:.2f}x")
PY
