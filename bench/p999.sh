#!/usr/bin/env bash
# Tail latency at a fixed rate below saturation, kura against Debian's
# memcached 1.6, with more rounds than bench/compare.sh gives its load (5):
# a p99.9 is one request in a thousand, and on a shared machine single runs
# of it differ by 2x. Both servers run side by side (-t 2 -m 1024); each
# round runs `kura bench` in open loop (load (1): 32 connections, 90/10
# get/set, 100 B values, 100,000 keys prefilled) against memcached, then
# kura; medians over the rounds.
#
#   bench/p999.sh            # RATE=30000 ROUNDS=9 DURATION=5 [KURA_BIN=...]
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-30000}
ROUNDS=${ROUNDS:-9}
DURATION=${DURATION:-5}
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
start_pair
echo "load (1) at $RATE req/s, $ROUNDS rounds of ${DURATION}s, memcached then kura; $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
for r in $(seq "$ROUNDS"); do
  for server in memcached kura; do
    p=$mp
    [[ $server == kura ]] && p=$kp
    "$KURA" bench -s "127.0.0.1:$p" -t 2 -c 32 --keys 100000 --ratio 9:1 -d "$DURATION" --rate "$RATE" --json |
      python3 -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; l=r['latency_us']; print('$server', l['p999'], l['p99'], l['mean'])"
  done
done | python3 -c '
import statistics, sys
rows = [l.split() for l in sys.stdin]
med = {}
for name in ("memcached", "kura"):
    v = [[float(x) for x in r[1:]] for r in rows if r[0] == name]
    med[name] = [statistics.median(c) for c in zip(*v)]
    print(f"{name:10} p99.9 per round: {[round(x[0]) for x in v]}")
for i, what in enumerate(("p99.9", "p99", "mean")):
    m, k = med["memcached"][i], med["kura"][i]
    print(f"{what:6} median us: memcached {m:9.1f}  kura {k:9.1f}  kura/memcached {k / m:5.2f}")
'
