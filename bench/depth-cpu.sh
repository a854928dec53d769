#!/usr/bin/env bash
# Issue 15: user and system CPU a request of kura and memcached (Debian's), -t 2 -m 1024 each,
# under load (1) in closed loop (32 connections, 90/10 get/set, 100-byte values, 100,000 keys
# prefilled) at each pipeline depth of DEPTHS, ROUNDS rounds alternating A B A B. With pipelining
# a read and a send serve many requests, so the per-syscall costs both servers pay alike fall
# away and the user part shows what the servers' own code costs.
#
#   DEPTHS="1 16" ROUNDS=5 DURATION=4 [KURA_BIN=...] bench/depth-cpu.sh
#
# Per round: depth, round, system, requests, user and system ns a request (utime and stime of
# /proc/PID/stat, in clock ticks, before and after the run); then per depth the medians and the
# ratios kura / memcached.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPTHS=${DEPTHS:-"1 16"}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-4}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
start_pair
out=$(mktemp)


echo "depth round system requests user_ns sys_ns"
for depth in $DEPTHS; do
  for r in $(seq "$ROUNDS"); do
    for s in memcached kura; do
      pair_member "$s"
      echo "$depth $r $s $(cpu_a_request "$pid" "$port" --pipeline "$depth" -d "$DURATION")" |
        tee -a "$out"
    done
  done
done
python3 - "$out" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for depth in dict.fromkeys(r[0] for r in rows):
    med = {}
    for s in ("memcached", "kura"):
        mine = [r for r in rows if r[0] == depth and r[2] == s]
        med[s] = [statistics.median(float(r[i]) for r in mine) for i in (3, 4, 5)]
    m, k = med["memcached"], med["kura"]
    print(f"depth {depth}: req/s {k[0] / m[0]:.2f}x, user {k[1]:.0f} against {m[1]:.0f} ns "
          f"({k[1] / m[1]:.2f}x), system {k[2]:.0f} against {m[2]:.0f} ns ({k[2] / m[2]:.2f}x), "
          f"total {(k[1] + k[2]) / (m[1] + m[2]):.2f}x")
EOF
rm -f "$out"
