#!/usr/bin/env bash
# flush_all with a full cache, kura against Debian's memcached 1.6: each
# server in turn (-t 2 -m MEM; kura also with --data-dir) is filled with
# KEYS distinct 100-byte items (`kura bench --prefill`), then one client
# times the round trip of `flush_all` (and of a `version` before it, the
# floor, and of a `get` after it, which meets the flushed shard first).
# ROUNDS fills and flushes per server; prints median and worst per server.
# Also prints curr_items right after the flush and how long the server
# takes to report 0 (the flushed items are reclaimed in the background).
#
#   bench/flush.sh      # MEM=1024 KEYS=500000 ROUNDS=5
set -euo pipefail
cd "$(dirname "$0")/.."
MEM=${MEM:-1024}
KEYS=${KEYS:-500000}
ROUNDS=${ROUNDS:-5}
cargo build --release -q -p kura
KURA=target/release/kura
# shellcheck source=bench/lib.sh
. bench/lib.sh
# One round on the server at port $1: prints version, flush and get round
# trips in microseconds, curr_items just after, and seconds until 0.
round() {
  python3 - "$1" "$KEYS" <<'EOF'
import socket, sys, time
key = b"key:%0*d" % (len(str(int(sys.argv[2]) - 1)), 1)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def ask(req, end):
    t = time.perf_counter()
    s.sendall(req)
    buf = b""
    while not buf.endswith(end):
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("the server closed the connection")
        buf += chunk
    return (time.perf_counter() - t) * 1e6, buf
def items():
    _, buf = ask(b"stats\r\n", b"END\r\n")
    stats = dict(l.split()[1:3] for l in buf.decode().splitlines() if l.startswith("STAT "))
    return int(stats["curr_items"])
_, present = ask(b"get " + key + b"\r\n", b"END\r\n")
assert present.startswith(b"VALUE "), present
before = items()
version, _ = ask(b"version\r\n", b"\r\n")
flush, _ = ask(b"flush_all\r\n", b"OK\r\n")
get, reply = ask(b"get " + key + b"\r\n", b"END\r\n")
assert reply == b"END\r\n", reply
flushed = time.perf_counter()
after = items()
left = after
for _ in range(600):
    if left == 0:
        break
    time.sleep(0.01)
    left = items()
print(f"{version:.0f} {flush:.0f} {get:.0f} {before} {after} {time.perf_counter() - flushed:.2f}")
EOF
}

echo "flush_all: -t 2 -m $MEM, $KEYS items of 100 bytes, $ROUNDS rounds per server"
datadir=$(mktemp -d)
trap 'rm -rf "$datadir"' EXIT
for server in memcached kura kura-durable; do
  port=$(free_port)
  case $server in
    memcached) memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$port" -t 2 -m "$MEM" & ;;
    kura) "$KURA" server -l 127.0.0.1 -p "$port" -t 2 -m "$MEM" & ;;
    kura-durable) "$KURA" server -l 127.0.0.1 -p "$port" -t 2 -m "$MEM" \
      --data-dir "$datadir" --fsync everysec 2>/dev/null & ;;
  esac
  pid=$!
  wait_port "$port" 100
  rows=()
  for _ in $(seq "$ROUNDS"); do
    "$KURA" bench -s "127.0.0.1:$port" -t 2 -c 8 --pipeline 32 --keys "$KEYS" --value-size 100 \
      --prefill -n 0 >/dev/null
    sleep 0.5
    rows+=("$(round "$port")")
  done
  printf '%s\n' "${rows[@]}" | python3 -c "
import sys, statistics
rows = [list(map(float, l.split())) for l in sys.stdin]
def col(i): return [r[i] for r in rows]
def show(name, i):
    c = col(i)
    return f'{name} median {statistics.median(c):,.0f} us, worst {max(c):,.0f}'
print(f'  $server: ' + '; '.join([show('flush_all', 1), show('get after', 2), show('version', 0)]))
print(f'    curr_items {col(3)[0]:,.0f} before, {col(4)[0]:,.0f} just after; 0 after {statistics.median(col(5)):.2f} s (median)')
print('    raw (version flush get us, items before, after, s to 0):', '; '.join(' '.join(f'{x:g}' for x in r) for r in rows))
"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
