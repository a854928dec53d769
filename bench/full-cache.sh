#!/usr/bin/env bash
# Where a cache's memory goes, kura against Debian's memcached 1.6, each
# server in turn (-t 2), one run, both measurements side by side:
#
#   fill: FILL distinct 100-byte items into a cache large enough for all of
#         them (-m 1024): resident memory growth per item (VmRSS after minus
#         before, over FILL), as bench/compare.sh's memory test.
#   full: KEYS distinct 100-byte items, set once each, into -m MEM (more than
#         fit, so both evict): the items each holds (curr_items), its
#         evictions, and its resident memory growth, per item held and
#         against -m.
#   sizes: the same full cache with each value size of SIZES (default none):
#         a number of bytes, or lognormal:MEDIAN:SIGMA (bench/fill.py), each
#         with enough distinct keys to fill -m MEM three times over (10 B:
#         4,000,000; 1 KB: 300,000; 10 KB: 30,000; a log-normal mix:
#         1,000,000), set by bench/fill.py over 4 connections (`kura bench`
#         makes values of 16 bytes and more, of uniform sizes) for both
#         servers alike.
#
# Both with `kura bench --prefill` (keys "key:" and a zero-padded number,
# 10 bytes for 1,000,000 keys, 11 for 2,000,000; client flags set). Each line
# also gives the server's own `bytes` and `hash_bytes` (docs/memory.md reads
# them).
#
#   bench/full-cache.sh      # MEM=100 KEYS=2000000 FILL=1000000 EVICTION=s3fifo
#   FILL=0 bench/full-cache.sh      # the full cache only; KEYS=0: the fill only
#   FILL=0 KEYS=0 SIZES="10 1024 10240 lognormal:300:1" bench/full-cache.sh
#   KURA_BIN=path bench/full-cache.sh   # another kura binary (bench/lib.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
MEM=${MEM:-100}
KEYS=${KEYS:-2000000}
FILL=${FILL:-1000000}
EVICTION=${EVICTION:-s3fifo}
SIZES=${SIZES:-}
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
# curr_items evictions bytes hash_bytes of the server on port $1.
items() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"stats\r\n")
buf = b""
while not buf.endswith(b"END\r\n"):
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("the server closed the connection")
    buf += chunk
stats = dict(l.split()[1:3] for l in buf.decode().splitlines() if l.startswith("STAT "))
print(stats["curr_items"], stats["evictions"], stats["bytes"], stats.get("hash_bytes", 0))
PY
}

# keys_for SIZE: the distinct keys that fill -m 100 about three times over.
keys_for() {
  case $1 in
    10) echo 4000000 ;;
    1024) echo 300000 ;;
    10240) echo 30000 ;;
    lognormal:*) echo 1000000 ;;
    *) echo $((3 * 100 * 1048576 / $1)) ;;
  esac
}

# run SERVER MEM KEYS [SIZE]: starts SERVER with -m MEM, sets KEYS items of
# 100 bytes with kura bench (of SIZE with bench/fill.py), prints a line.
run() {
  local server=$1 mem=$2 keys=$3 size=${4:-} port pid base loaded held evicted bytes hash errors
  port=$(free_port)
  if [ "$server" = memcached ]; then
    memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$port" -t 2 -m "$mem" &
  else
    "$KURA" server -l 127.0.0.1 -p "$port" -t 2 -m "$mem" --eviction "$EVICTION" &
  fi
  pid=$!
  wait_port "$port" 100
  sleep 0.5
  base=$(rss_kb "$pid")
  # A full memcached may refuse a few sets (SERVER_ERROR out of memory storing object, when
  # the items at its LRU's tail are in use): kura bench then reports errors; they are
  # printed, and the items held are what `stats` says.
  if [ -z "$size" ]; then
    errors=$("$KURA" bench -s "127.0.0.1:$port" -t 2 -c 8 --pipeline 32 --keys "$keys" \
      --value-size 100 --prefill -n 0 2>&1 >/dev/null) || true
  else
    read -r _ errors < <(python3 bench/fill.py "$port" "$keys" "$size")
    if [ "$errors" = 0 ]; then errors=""; else errors="$errors error replies"; fi
  fi
  sleep 0.5
  loaded=$(rss_kb "$pid")
  read -r held evicted bytes hash < <(items "$port")
  python3 -c "
grown = ($loaded - $base) * 1024
print(f'  $server: {$held:,} items held, {$evicted:,} evicted; RSS grew {grown / 2**20:.1f} MiB,'
      f' {grown / $held:.1f} B an item held, {grown / ($mem * 2**20) * 100 - 100:+.1f}% against -m;'
      f' stats bytes {$bytes / $held:.1f} B an item, hash_bytes {$hash / $held:.1f} B an item')"
  if [ -n "$errors" ]; then echo "    ($server: $errors)"; fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

echo "kura $("$KURA" --version 2>/dev/null | head -1) vs $(memcached -V), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
if ((FILL > 0)); then
  echo "fill: -t 2 -m 1024, $FILL items of 100 bytes set once each; kura --eviction $EVICTION"
  for server in memcached kura; do run "$server" 1024 "$FILL"; done
fi
if ((KEYS > 0)); then
  echo "full cache: -t 2 -m $MEM, $KEYS items of 100 bytes set once each; kura --eviction $EVICTION"
  for server in memcached kura; do run "$server" "$MEM" "$KEYS"; done
fi
for size in $SIZES; do
  keys=$(keys_for "$size")
  echo "full cache: -t 2 -m $MEM, $keys items of $size bytes set once each (bench/fill.py); kura --eviction $EVICTION"
  for server in memcached kura; do run "$server" "$MEM" "$keys" "$size"; done
done
