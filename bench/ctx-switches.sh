#!/usr/bin/env bash
# Issue 15: context switches a request of kura and memcached (Debian's), -t 2 -m 1024 each, under
# load (1) (32 connections, 90/10 get/set, 100-byte values, 100,000 keys prefilled) in open loop
# at each rate of RATES, ROUNDS rounds alternating A B A B: the voluntary ones (a thread went to
# sleep: a worker that found nothing more to do) and the involuntary ones (a thread was
# preempted), summed over all of the server's threads from /proc/PID/task/*/status.
#
#   RATES="12000 37000 62000" ROUNDS=3 DURATION=4 [KURA_BIN=...] bench/ctx-switches.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-"12000 37000 62000"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
start_pair

# switches PID: voluntary and involuntary context switches of all its threads.
switches() {
  cat "/proc/$1"/task/*/status |
    awk '/^voluntary_ctxt/ {v += $2} /^nonvoluntary_ctxt/ {n += $2} END {print v, n}'
}

echo "rate round system requests voluntary/req involuntary/req"
for rate in $RATES; do
  for r in $(seq "$ROUNDS"); do
    for s in memcached kura; do
      pair_member "$s"
      read -r v0 n0 < <(switches "$pid")
      n=$(load1_requests "$port" --rate "$rate" -d "$DURATION")
      read -r v1 n1 < <(switches "$pid")
      python3 -c "print('$rate $r $s $n %.3f %.3f' % (($v1 - $v0) / $n, ($n1 - $n0) / $n))"
    done
  done
done
