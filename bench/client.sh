#!/usr/bin/env bash
# kura-client: seed 000's write-back experiment and a multi-get, against
# kura servers and against Debian's memcached 1.6 (each -t 2 -m 256).
# Write back 1,000 and 10,000 keys (values of 100 B to 1 KB) over two
# servers, one `set` per key awaited in turn against one `set_multi`
# (one quiet batch per server); then 1,000 keys over three servers, one
# `get` per key against one `get_multi`. Each is run on loopback and then
# through kura_bench::relay (DELAY_US each way, default 500: a network
# stand-in, this kernel has no netem), side by side, after the round trip
# the relay adds as measured. Then the client's cost per request
# (requests/s, client CPU per request) on one server: REQUESTS (default
# 20,000) gets and then sets, one at a time on one connection, over 1,024
# keys of 16 bytes with 100-byte values, by kura-client, the `memcache`
# crate, pylibmc (libmemcached under CPython) and memcaslap (libmemcached's
# C load generator), alternating A B C D each round (bench/libmemcached.py
# says what each one's CPU includes); and kura-client with 32 tasks.
# ROUNDS rounds (default 7), medians; the load average before each part.
#
# PARTS (default "writeback cpu") picks the parts: `PARTS=cpu` runs only
# the cost per request.
#
#   bench/client.sh      # results in bench/results/DATE-client.txt
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
DELAY_US=${DELAY_US:-500}
REQUESTS=${REQUESTS:-20000}
PARTS=${PARTS:-writeback cpu}
TARGET=${CARGO_TARGET_DIR:-target}
# KURA_BIN: a built kura binary to serve with (default: build this one)
if [[ -n ${KURA_BIN:-} ]]; then
  KURA=$KURA_BIN
else
  cargo build --release -q -p kura --bin kura
  KURA=$TARGET/release/kura
fi
cargo build --release -q -p kura-client --example writeback --example throughput
WB=$TARGET/release/examples/writeback
TP=$TARGET/release/examples/throughput
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/results/$(date +%F)-client.txt
raw=$(mktemp)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "$raw"' EXIT
load() { echo "# load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"; }
echo "# bench/client.sh, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), ROUNDS=$ROUNDS DELAY_US=$DELAY_US REQUESTS=$REQUESTS PARTS=\"$PARTS\" KURA_BIN=${KURA_BIN:-}" >"$out"
echo "# $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs): a shared machine" >>"$out"
python3 -c 'import pylibmc' 2>/dev/null && pylibmc=1 || pylibmc=0
for kind in kura memcached; do
  if [[ $kind == memcached ]] && ! command -v memcached >/dev/null; then
    echo "memcached: not installed, skipped" >>"$out"
    continue
  fi
  start_cache "$kind"; a=$port
  start_cache "$kind"; b=$port
  start_cache "$kind"; c=$port
  if [[ $PARTS == *writeback* ]]; then
    load
    "$WB" "127.0.0.1:$a,127.0.0.1:$b" "127.0.0.1:$a,127.0.0.1:$b,127.0.0.1:$c" "$ROUNDS" "$kind" "$DELAY_US" >>"$out"
  fi
  # client cost per request on server a, the clients in turn each round
  load
  : >"$raw"
  [[ $PARTS == *cpu* ]] && cpu_rounds=$ROUNDS || cpu_rounds=0
  for _ in $(seq "$cpu_rounds"); do
    "$TP" "127.0.0.1:$a" "$REQUESTS" 1 | sed "s/^/$kind\t/" >>"$raw"
    if ((pylibmc)); then
      python3 bench/libmemcached.py pylibmc "127.0.0.1:$a" "$REQUESTS" | sed "s/^/$kind\t/" >>"$raw"
    fi
    if command -v memcaslap >/dev/null; then
      python3 bench/libmemcached.py memcaslap "127.0.0.1:$a" "$REQUESTS" | sed "s/^/$kind\t/" >>"$raw"
    fi
  done
  [[ -s $raw ]] && python3 bench/libmemcached.py median <"$raw" >>"$out"
  load
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
done
((pylibmc)) || echo "pylibmc: not installed (pip install pylibmc==1.6.3), skipped" >>"$out"
command -v memcaslap >/dev/null || echo "memcaslap: not installed (Debian libmemcached-tools), skipped" >>"$out"
cat "$out"
