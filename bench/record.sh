#!/usr/bin/env bash
# kura-record: seed 000's login. A user with 1,000 items over two cache
# servers (each -t 2 -m 256), against kura servers and Debian's memcached,
# on MariaDB and PostgreSQL: cold fetch_by_index with the misses written
# back in one quiet multi-add per server, against the same with one add
# per key (identity_cache's way), against the database alone; then warm.
# Alternates A B C D for ROUNDS rounds (default 7), medians; counts
# database queries and cache round trips. Each run is done on loopback and
# through the example's delaying relay (DELAY_US each way, default 500),
# a network stand-in: loopback's ~30 us round trip caps the write-back
# ratio far below a network's. Then the value formats (postcard, bincode,
# JSON).
#
#   bench/record.sh      # results in bench/results/DATE-record.txt
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
DELAY_US=${DELAY_US:-500}
MYSQL=${KURA_RECORD_MYSQL:-mysql://root@127.0.0.1:3306/test}
POSTGRES=${KURA_RECORD_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p kura --bin kura
cargo build --release -q -p kura-record --example login --example formats
KURA=$TARGET/release/kura
LOGIN=$TARGET/release/examples/login
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/results/$(date +%F)-record.txt
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
{
  echo "# bench/record.sh, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), ROUNDS=$ROUNDS DELAY_US=$DELAY_US"
  echo "# $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out"
for kind in kura memcached; do
  if [[ $kind == memcached ]] && ! command -v memcached >/dev/null; then
    echo "memcached: not installed, skipped" >>"$out"
    continue
  fi
  start_cache "$kind"; a=$port
  start_cache "$kind"; b=$port
  for db in "$MYSQL" "$POSTGRES"; do
    name=${db%%:*}
    for delay in 0 "$DELAY_US"; do
      "$LOGIN" --db "$db" --servers "127.0.0.1:$a,127.0.0.1:$b" --rounds "$ROUNDS" \
        --delay-us "$delay" --label "$kind/$name/delay=$delay" >>"$out"
    done
  done
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
done
echo "# value formats, seed 000's row and an index entry of 1,000 ids" >>"$out"
"$TARGET/release/examples/formats" "$ROUNDS" >>"$out"
cat "$out"
