#!/usr/bin/env bash
# Issue 15: one connection's round trip (closed loop: each request waits for the last reply),
# kura against Debian's memcached (-t 2 -m 1024 each, 100,000 keys of 100 B prefilled), ROUNDS
# rounds alternating A B A B of DURATION s: requests per second, mean latency, and the server's
# user and system CPU per request (utime and stime from /proc/PID/stat); the medians and the
# kura/memcached ratios. With WAKEUPS=1 (needs perf and root), one more run of each records
# every sched_wakeup on the machine and counts them by the woken thread: how often each side of
# the round trip was asleep when its turn came.
#
#   ROUNDS=6 DURATION=4 [RATIO=9:1] [WAKEUPS=1] [KURA_BIN=...] bench/rtt.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-4}
RATIO=${RATIO:-9:1}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
start_pair
hz=$(getconf CLK_TCK)
out=$(mktemp)
echo "kura $(git rev-parse --short HEAD 2>/dev/null || echo '?') vs $(memcached -V), $(nproc) cores, $(date -u +%FT%RZ); one connection, --ratio $RATIO"
echo "system     req/s  mean_us  user_ns  sys_ns (a request)"
for _ in $(seq "$ROUNDS"); do
  for sys in memcached kura; do
    if [ "$sys" = memcached ]; then pid=$mpid port=$mp; else pid=$kpid port=$kp; fi
    read -r u0 s0 < <(awk '{ sub(/^.*\) /, ""); print $12, $13 }' "/proc/$pid/stat")
    read -r reqs rate mean < <("$KURA" bench -s "127.0.0.1:$port" -t 1 -c 1 --keys 100000 \
      --ratio "$RATIO" -d "$DURATION" --json |
      python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"][0]
print(int(r["requests"]), round(r["throughput"]), round(r["latency_us"]["mean"], 1))')
    read -r u1 s1 < <(awk '{ sub(/^.*\) /, ""); print $12, $13 }' "/proc/$pid/stat")
    echo "$sys $rate $mean $(((u1 - u0) * 1000000000 / hz / reqs)) $(((s1 - s0) * 1000000000 / hz / reqs))" |
      tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for s in ("memcached", "kura"):
    mine = [list(map(float, r[1:])) for r in rows if r[0] == s]
    med[s] = [st.median(c) for c in zip(*mine)]
    print("%-10s medians: %.0f req/s, mean %.1f us, user %.0f ns, system %.0f ns" % (s, *med[s]))
print("kura/memcached: rate %.3fx, mean %.3fx, user %.2fx, system %.2fx"
      % tuple(k / m for k, m in zip(med["kura"], med["memcached"])))
PY
if [ "${WAKEUPS:-0}" = 1 ]; then
  command -v perf >/dev/null || { echo "WAKEUPS=1 needs perf: apt-get install -y linux-perf" >&2; exit 1; }
  for sys in memcached kura; do
    if [ "$sys" = memcached ]; then port=$mp; else port=$kp; fi
    data=$(mktemp)
    perf record -q -a -e sched:sched_wakeup -o "$data" 2>/dev/null &
    perf_pid=$!
    sleep 0.5
    reqs=$("$KURA" bench -s "127.0.0.1:$port" -t 1 -c 1 --keys 100000 --ratio "$RATIO" \
      -d "$DURATION" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["requests"])')
    kill -INT "$perf_pid"
    wait "$perf_pid" 2>/dev/null || true
    echo "== $sys: $reqs requests; wake-ups by woken thread (name without its number) and CPU"
    perf script -i "$data" -F trace 2>/dev/null |
      sed -E 's/^comm=([^ ]*[^0-9 -])[-0-9]* pid=.*target_cpu=0*([0-9]+).*/\1 cpu\2/' |
      sort | uniq -c | sort -rn | head -6
    rm -f "$data"
  done
fi
