#!/usr/bin/env bash
# Items held by a flash tier: kura (--ext-path) against Debian's memcached 1.6 (-o ext_path),
# both -m 64 with 1 GiB of flash in the same directory (same file system), values of 1 KB and
# 8 KB. Each server gets 2 GiB of distinct sets (twice its flash), then every key is read back
# once: the hits are the items it held; every hit's bytes are checked. Also RAM alone (-m 64, no
# flash) and each server's RSS after the fill.
#
#   bench/flash.sh                 # builds kura's release binary
#   KURA_BIN=target/debug/kura bench/flash.sh   # items held do not depend on the build
#   FLASH_DIR=/mnt/nvme bench/flash.sh          # where the flash files go (default: a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
kura_bin
dir=${FLASH_DIR:-$(mktemp -d)}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "$dir"/h44-flash-*' EXIT

run() { # KIND SIZE FLASH(yes|no)
  local kind=$1 size=$2 flash=$3 port pid
  port=$(free_port)
  local file="$dir/h44-flash-$kind"
  rm -f "$file"
  if [[ $kind == kura ]]; then
    local ext=()
    [[ $flash == yes ]] && ext=(--ext-path "$file:1g")
    "$KURA" server -p "$port" -t 2 -m 64 "${ext[@]}" >/dev/null 2>&1 &
  else
    local ext=()
    [[ $flash == yes ]] && ext=(-o "ext_path=$file:1g")
    memcached -u root -U 0 -l 127.0.0.1 -p "$port" -t 2 -m 64 "${ext[@]}" >/dev/null 2>&1 &
  fi
  pid=$!
  pids+=("$pid")
  wait_port "$port" >/dev/null
  python3 - "$port" "$size" "$pid" "$kind" "$flash" <<'PY'
import socket, sys
port, size, pid, kind, flash = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
n = (2 << 30) // size
s = socket.create_connection(("127.0.0.1", port))
def value(i):
    b = i.to_bytes(8, "little")
    return (b * (size // 8 + 1))[:size]
def ask(req, until):
    s.sendall(req)
    out = b""
    while not out.endswith(until):
        d = s.recv(1 << 20)
        assert d, "closed"
        out += d
    return out
for start in range(0, n, 500):
    req = bytearray()
    for i in range(start, min(n, start + 500)):
        req += b"set k%d 0 0 %d noreply\r\n" % (i, size) + value(i) + b"\r\n"
    ask(bytes(req) + b"mn\r\n", b"MN\r\n")
rss = 0
for line in open(f"/proc/{pid}/status"):
    if line.startswith("VmRSS:"):
        rss = int(line.split()[1]) * 1024
hits = 0
for start in range(0, n, 100):
    keys = [b"k%d" % i for i in range(start, min(n, start + 100))]
    r = ask(b"get " + b" ".join(keys) + b"\r\n", b"END\r\n")
    at = 0
    while True:
        end = r.index(b"\r\n", at)
        head = r[at:end].split()
        if head[0] == b"END":
            break
        k, ln = head[1], int(head[3])
        assert r[end + 2:end + 2 + ln] == value(int(k[1:])), k
        hits += 1
        at = end + 2 + ln + 2
stats = dict(l.split()[1:3] for l in ask(b"stats\r\n", b"END\r\n").decode().splitlines() if l.startswith("STAT "))
print(f"{kind:9} value {size:5} B  flash {flash:3}  sets {n:8}  held {hits:8}  RSS {rss/2**20:7.1f} MiB"
      f"  curr_items {stats.get('curr_items')}  extstore_objects_used {stats.get('extstore_objects_used', '-')}"
      f"  writes_dropped {stats.get('extstore_writes_dropped', '-')}")
PY
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -f "$file"
}

echo "# $(date -u +%FT%TZ) $("$KURA" server -V 2>/dev/null | tail -1); $(memcached -V); flash in $dir"
for size in 1024 8192; do
  for kind in kura memcached; do
    run "$kind" "$size" no
    run "$kind" "$size" yes
  done
done
