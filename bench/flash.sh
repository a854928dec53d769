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
#
# PARTS="held gets" (default "held"): `gets` is the read benchmark instead: both servers -t 2 -m 64
# with 1 GiB of flash, each filled with GETS_KEYS (600,000) keys of GETS_SIZE (1,024) bytes, about
# ten times what RAM holds, so that about 90% of hits come from flash, at GETS_FILL_RATE (25,000)
# sets a second (memcached's storage thread moves items to flash in the background: filled as
# fast as it answers, it evicts most of them instead); then ROUNDS (3) rounds of
# DURATION (10) seconds of gets only (kura bench -t 2 -c 32, uniform keys), kura and memcached in
# turn (A B A B): throughput, p99, the server's CPU a request (utime + stime over the requests
# served), hits and the share of hits read from flash (get_extstore over get_hits); then the
# medians. MEMCACHED_EXT="ext_item_age=0" adds memcached -o options (its storage thread then moves
# every item to flash at once, not only under memory pressure: filled at 25,000 sets a second
# with its defaults memcached 1.6.18 holds 74,059 of the 600,000 keys, with ext_item_age=0 all;
# its maintainer: "most serious users set ext_item_age=0", memcached PR #923); KURA_EXT the same
# for kura (`-o ext_item_age=0`: every entry idle a second moves to flash).
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
    [[ $flash == yes ]] && ext=(--ext-path "$file:1g" ${KURA_EXT:+-o "$KURA_EXT"})
    "$KURA" server -p "$port" -t 2 -m 64 "${ext[@]}" >/dev/null 2>&1 &
  else
    local ext=()
    [[ $flash == yes ]] && ext=(-o "ext_path=$file:1g${MEMCACHED_EXT:+,$MEMCACHED_EXT}")
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

PARTS=${PARTS:-held}
part() { [[ " $PARTS " == *" $1 "* ]]; }

echo "# $(date -u +%FT%TZ) $("$KURA" server -V 2>/dev/null | tail -1); $(memcached -V); flash in $dir; load $(cut -d' ' -f1-3 /proc/loadavg)"
if part held; then
  for size in 1024 8192; do
    for kind in kura memcached; do
      run "$kind" "$size" no
      run "$kind" "$size" yes
    done
  done
fi

# stats PORT NAME...: the values of these `stats` lines, in order (0 when absent).
stats() {
  python3 - "$@" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"stats\r\n")
out = b""
while not out.endswith(b"END\r\n"):
    out += s.recv(1 << 16)
st = dict(l.split()[1:3] for l in out.decode().splitlines() if l.startswith("STAT "))
print(" ".join(st.get(n, "0") for n in sys.argv[2:]))
PY
}

# gets_round KIND: one round of gets against KIND's server; prints throughput (req/s), p99 (us),
# CPU a request (ns), hit %, % of hits from flash.
gets_round() {
  local kind=$1 port=${gets_port[$1]} pid=${gets_pid[$1]} t0 t1 h0 f0 h1 f1 json
  read -r h0 f0 < <(stats "$port" get_hits get_extstore)
  t0=$(cpu_ticks "$pid")
  json=$("$KURA" bench -s "127.0.0.1:$port" -t 2 -c 32 --keys "$GETS_KEYS" --value-size "$GETS_SIZE" \
    --ratio 1:0 -d "$DURATION" --json)
  t1=$(cpu_ticks "$pid")
  read -r h1 f1 < <(stats "$port" get_hits get_extstore)
  python3 - "$json" "$((t1 - t0))" "$(getconf CLK_TCK)" "$((h1 - h0))" "$((f1 - f0))" <<'PY'
import json, sys
run = json.loads(sys.argv[1])["runs"][0]
ticks, hz, hits, flash = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
n = run["requests"]
print(f"{run['throughput']:.0f} {run['latency_us']['p99']:.0f} {ticks * 1e9 / hz / n:.0f}"
      f" {100 * run['hits'] / n:.1f} {100 * flash / max(hits, 1):.1f}")
PY
}

if part gets; then
  GETS_KEYS=${GETS_KEYS:-600000}
  GETS_SIZE=${GETS_SIZE:-1024}
  GETS_FILL_RATE=${GETS_FILL_RATE:-25000}
  ROUNDS=${ROUNDS:-3}
  DURATION=${DURATION:-10}
  work=$(mktemp -d)
  declare -A gets_port gets_pid
  for kind in kura memcached; do
    port=$(free_port)
    file="$dir/h44-flash-gets-$kind"
    rm -f "$file"
    if [[ $kind == kura ]]; then
      "$KURA" server -p "$port" -t 2 -m 64 --ext-path "$file:1g" ${KURA_EXT:+-o "$KURA_EXT"} >/dev/null 2>&1 &
    else
      memcached -u root -U 0 -l 127.0.0.1 -p "$port" -t 2 -m 64 \
        -o "ext_path=$file:1g${MEMCACHED_EXT:+,$MEMCACHED_EXT}" >/dev/null 2>&1 &
    fi
    gets_pid[$kind]=$!
    gets_port[$kind]=$port
    pids+=("$!")
    wait_port "$port" >/dev/null
    # A set refused (memcached: out of memory while its storage thread catches up) is a key
    # not held: counted in the hits below, not an error of the run.
    "$KURA" bench -s "127.0.0.1:$port" -t 2 -c 4 --keys "$GETS_KEYS" --value-size "$GETS_SIZE" \
      --prefill --prefill-rate "$GETS_FILL_RATE" -n 0 >/dev/null 2>&1 || true
    sleep 2 # the flash writes of the fill's tail
    echo "# $kind filled at $GETS_FILL_RATE sets/s: curr_items extstore_objects_used" \
      "extstore_writes_dropped $(stats "$port" curr_items extstore_objects_used extstore_writes_dropped)"
  done
  echo "# gets: $GETS_KEYS keys of $GETS_SIZE B, $DURATION s a round; columns: req/s p99_us cpu_ns_a_request hit% flash%_of_hits"
  rounds_of "kura memcached" gets gets_round
  echo "# medians ($ROUNDS rounds; load $(cut -d' ' -f1-3 /proc/loadavg)):"
  medians_of "kura memcached" gets 5
  rm -rf "$work"
fi
