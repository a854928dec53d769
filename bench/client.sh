#!/usr/bin/env bash
# kura-client: seed 000's write-back experiment and a multi-get, against
# kura servers and against Debian's memcached 1.6 (each -t 2 -m 256).
# Write back 1,000 and 10,000 keys (values of 100 B to 1 KB) over two
# servers, one `set` per key awaited in turn against one `set_multi`
# (one quiet batch per server); then 1,000 keys over three servers, one
# `get` per key against one `get_multi`. Then the client's cost per request
# (requests/s, client CPU per request) against the `memcache` crate on one
# server: REQUESTS (default 20,000) gets and sets one after another, and
# kura-client with 32 tasks. ROUNDS rounds (default 7), medians.
#
#   bench/client.sh      # results in bench/results/DATE-client.txt
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p kura --bin kura
cargo build --release -q -p kura-client --example writeback --example throughput
KURA=$TARGET/release/kura
WB=$TARGET/release/examples/writeback
TP=$TARGET/release/examples/throughput
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/results/$(date +%F)-client.txt
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
echo "# bench/client.sh, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), ROUNDS=$ROUNDS" >"$out"
echo "# $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average $(cut -d' ' -f1-3 /proc/loadavg): a shared, busy machine" >>"$out"
for kind in kura memcached; do
  if [[ $kind == memcached ]] && ! command -v memcached >/dev/null; then
    echo "memcached: not installed, skipped" >>"$out"
    continue
  fi
  start_cache "$kind"; a=$port
  start_cache "$kind"; b=$port
  start_cache "$kind"; c=$port
  "$WB" "127.0.0.1:$a,127.0.0.1:$b" "127.0.0.1:$a,127.0.0.1:$b,127.0.0.1:$c" "$ROUNDS" "$kind" >>"$out"
  # client cost per request against the memcache crate, on server a
  "$TP" "127.0.0.1:$a" "${REQUESTS:-20000}" "$ROUNDS" | sed "s/^/$kind\t/" >>"$out"
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
done
cat "$out"
