#!/usr/bin/env bash
# Instructions per request of a server (user space, counted by callgrind, so
# the figure does not move with the machine's noise): the server runs alone
# under callgrind with one worker thread; `kura bench` prefills 1,000 keys and
# sends N requests, 90% gets and 10% sets of 100 bytes, over one connection.
# Two server runs, N = 10,000 and N = 30,000; the difference of their totals
# over 20,000 is the cost of a request (startup, prefill and exit cancel out).
#
#   bench/instructions.sh              kura ($KURA, default target/release/kura)
#   SERVER=memcached bench/instructions.sh
#   KEEP=dir bench/instructions.sh     keeps callgrind's files for callgrind_annotate
#   KURA_ARGS="-o worker_loop=tasks" bench/instructions.sh   more flags for kura server
#   RATIO=0:1 bench/instructions.sh    sets only (--ratio GETS:SETS of kura bench; default 9:1)
#   SETUP="stats topkeys on 60" bench/instructions.sh   a text command sent before the prefill
#   MEM=8 KEYS=20000 SIZE=1024 bench/instructions.sh   -m, key space and value size (default 64,
#     1000, kura bench's): with KURA_ARGS="--ext-path FILE:64M", most keys' values are on flash
#
# memcached sets its open-files limit to exactly -c, which valgrind accepts
# only when it equals the hard limit valgrind leaves the program: the soft
# limit is lowered to 1024 first, and memcached is given -c 1024.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

KURA=${KURA:-target/release/kura}
SERVER=${SERVER:-kura}
MEM=${MEM:-64}
KEYS=${KEYS:-1000}
size=()
[ -n "${SIZE:-}" ] && size=(--value-size "$SIZE")
SMALL=${SMALL:-10000}
LARGE=${LARGE:-30000}
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"

# total_instructions N: the server's whole instruction count for a run of N
# requests.
total_instructions() {
  local n=$1 port pid file
  port=$(free_port)
  file="$out/callgrind.$SERVER.$n"
  case $SERVER in
    kura)
      valgrind --tool=callgrind --callgrind-out-file="$file" \
        "$KURA" server -p "$port" -t 1 -m "$MEM" ${KURA_ARGS:-} >/dev/null 2>"$out/valgrind.$n.log" &
      ;;
    memcached)
      (ulimit -Sn 1024
       exec valgrind --tool=callgrind --callgrind-out-file="$file" \
         memcached -u root -U 0 -l 127.0.0.1 -p "$port" -t 1 -m "$MEM" -c 1024 ${MEMCACHED_ARGS:-}) \
        >/dev/null 2>"$out/valgrind.$n.log" &
      ;;
    *) echo "SERVER is kura or memcached" >&2; exit 2 ;;
  esac
  pid=$!
  wait_port "$port" >/dev/null
  if [ -n "${SETUP:-}" ]; then
    python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.sendall(sys.argv[2].encode()+b"\r\n"); s.recv(100)' "$port" "$SETUP"
  fi
  "$KURA" bench -s "127.0.0.1:$port" -t 1 -c 1 --keys "$KEYS" "${size[@]}" --prefill -n 0 >/dev/null
  "$KURA" bench -s "127.0.0.1:$port" -t 1 -c 1 --keys "$KEYS" "${size[@]}" --ratio "${RATIO:-9:1}" -n "$n" >/dev/null
  kill -TERM "$pid"
  wait "$pid" || true
  awk '/^totals:/ {print $2}' "$file"
}

small=$(total_instructions "$SMALL")
large=$(total_instructions "$LARGE")
echo "$SERVER: $small instructions for $SMALL requests, $large for $LARGE"
echo "$SERVER: $(( (large - small) / (LARGE - SMALL) )) instructions a request"
