#!/usr/bin/env bash
# A full cache, kura against Debian's memcached 1.6: each server in turn
# (-t 2 -m MEM) gets KEYS distinct 100-byte items, set once each (more than
# fit, so both evict), with `kura bench --prefill`. Prints the items each
# holds (curr_items), its evictions, and its resident memory growth, per
# item held and against -m.
#
#   bench/full-cache.sh      # MEM=100 KEYS=2000000 EVICTION=s3fifo
set -euo pipefail
cd "$(dirname "$0")/.."
MEM=${MEM:-100}
KEYS=${KEYS:-2000000}
EVICTION=${EVICTION:-s3fifo}
cargo build --release -q -p kura
KURA=target/release/kura
# shellcheck source=bench/lib.sh
. bench/lib.sh
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
# curr_items and evictions of the server on port $1.
items() {
  python3 - "$1" <<'EOF'
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
print(stats["curr_items"], stats["evictions"])
EOF
}

echo "full cache: -t 2 -m $MEM, $KEYS items of 100 bytes set once each; kura --eviction $EVICTION"
for server in memcached kura; do
  port=$(free_port)
  if [ "$server" = memcached ]; then
    memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$port" -t 2 -m "$MEM" &
  else
    "$KURA" server -l 127.0.0.1 -p "$port" -t 2 -m "$MEM" --eviction "$EVICTION" &
  fi
  pid=$!
  wait_port "$port" 100
  base=$(rss_kb "$pid")
  "$KURA" bench -s "127.0.0.1:$port" -t 2 -c 8 --pipeline 32 --keys "$KEYS" --value-size 100 \
    --prefill -n 0 >/dev/null
  sleep 0.5
  loaded=$(rss_kb "$pid")
  read -r held evicted < <(items "$port")
  python3 -c "
grown = ($loaded - $base) * 1024
print(f'  $server: {$held:,} items held, {$evicted:,} evicted; RSS grew {grown / 2**20:.1f} MiB,'
      f' {grown / $held:.1f} B an item held, {grown / ($MEM * 2**20) * 100 - 100:+.1f}% against -m')"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
