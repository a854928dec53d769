#!/usr/bin/env bash
# Issue 15: how often each server is in the better of the two scheduling modes seen under a
# sets-only open-loop load at a mid rate on 2 vCPUs (p90 ~200-400 us against ~800-1000 us, the
# four busy threads of server and generator sharing two CPUs one way or the other). Three servers
# side by side: Debian's memcached, kura, and a kura started with B_ARGS, each -t 2 -m 1024 and
# prefilled with 100,000 keys of 100 B; STEPS steps of 2 s each, A B C A B C; per server the steps
# whose p90 is under 500 us, and the medians of mean, p90 and p99.
#
#   RATE=47000 STEPS=15 [RATIO=0:1] B_ARGS="-o worker_loop=tasks" [KURA_BIN=...] bench/modes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-47000}
STEPS=${STEPS:-15}
RATIO=${RATIO:-0:1}
B_ARGS=${B_ARGS:-"-o worker_loop=tasks"}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
bp=$(free_port)
# shellcheck disable=SC2086
"$KURA" server -l 127.0.0.1 -p "$bp" -t 2 -m 1024 $B_ARGS &
bpid=$!
start_pair >/dev/null
out=$(mktemp)
trap 'kill $mpid $kpid $bpid 2>/dev/null || true; rm -f "$out"' EXIT
wait_port "$bp"
"$KURA" bench -s "127.0.0.1:$bp" -t 2 -c 32 --keys 100000 --prefill -n 0 >/dev/null

echo "step server mean_us p90_us p99_us"
for i in $(seq "$STEPS"); do
  for s in memcached kura B; do
    if [ "$s" = B ]; then port=$bp; else pair_member "$s"; fi
    "$KURA" bench -s "127.0.0.1:$port" -t 2 -c 32 --keys 100000 --ratio "$RATIO" --rate "$RATE" \
      -d 2 --json | python3 -c 'import json,sys; l=json.load(sys.stdin)["runs"][0]["latency_us"]
print("%.1f %.1f %.1f" % (l["mean"], l["p90"], l["p99"]))' | sed "s/^/$i $s /" | tee -a "$out"
  done
done
python3 - "$out" "$B_ARGS" <<'PY'
import statistics as st
import sys
rows = [l.split() for l in open(sys.argv[1])]
for s, label in (("memcached", "memcached"), ("kura", "kura"), ("B", "kura " + sys.argv[2])):
    r = [tuple(map(float, x[2:5])) for x in rows if x[1] == s]
    good = sum(1 for x in r if x[1] < 500)
    print(f"{label:28} better mode (p90 < 500 us) in {good} of {len(r)} steps; medians: mean "
          f"{st.median(x[0] for x in r):.0f} us, p90 {st.median(x[1] for x in r):.0f}, "
          f"p99 {st.median(x[2] for x in r):.0f}")
PY
