#!/usr/bin/env bash
# Instructions per request of a proxy (user space, counted by callgrind, so
# the figure does not move with the machine's noise): one `kura server`
# backend (release build, not under valgrind), the proxy alone under
# callgrind in front of it (kura proxy -t 1, or Debian's nutcracker, both
# with twemproxy's ketama and fnv1a_64 as bench/proxy.sh configures them),
# and `kura bench -t 1` through the proxy: 1,000 keys prefilled, then N
# requests of a load. Two proxy runs per load, N = SMALL and N = LARGE; the
# difference of their totals over LARGE - SMALL is the cost of a request
# (start-up, prefill and exit cancel out).
#
# Loads (100-byte values):
#   c1      90/10 get/set, one connection           (-c 1)
#   c8      90/10 get/set, eight connections        (-c 8: batching)
#   mget10  10-key multi-gets, eight connections    (-c 8 --multiget 10)
#
#   bench/proxy-instructions.sh                 kura proxy and nutcracker, every load
#   PROXY=kura LOADS="c1 c8" bench/proxy-instructions.sh
#   KEEP=dir bench/proxy-instructions.sh        keeps callgrind's files for callgrind_annotate
#
# KURA is the kura binary (default: the workspace's target/release/kura).
# Under valgrind a proxy runs some 50 times slower, so with -c 8 more
# requests wait in each round of its event loop than at full speed: the c8
# figure is the batched cost, lower than a quiet machine's at 32 connections.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

PROXY=${PROXY:-kura nutcracker}
LOADS=${LOADS:-c1 c8 mget10}
instructions_setup

backend=$(free_port)
"$KURA" server -p "$backend" -t 1 -m 64 >/dev/null 2>&1 &
pids+=("$!")
wait_port "$backend" >/dev/null

# total_instructions PROXY LOAD N: the proxy's whole instruction count
# for a run of N requests of LOAD.
total_instructions() {
  local proxy=$1 load=$2 n=$3 port pid file
  port=$(free_port)
  file="$out/callgrind.$proxy.$load.$n"
  case $proxy in
    kura)
      kura_proxy_pool "$backend" >"$out/proxy.toml"
      valgrind --tool=callgrind --callgrind-out-file="$file" \
        "$KURA" proxy -l "127.0.0.1:$port" -t 1 --config "$out/proxy.toml" \
        >/dev/null 2>"$out/valgrind.$proxy.$load.$n.log" &
      ;;
    nutcracker)
      nutcracker_yml "$port" "$backend" >"$out/nutcracker.yml"
      valgrind --tool=callgrind --callgrind-out-file="$file" \
        nutcracker -c "$out/nutcracker.yml" \
        >/dev/null 2>"$out/valgrind.$proxy.$load.$n.log" &
      ;;
    *) echo "PROXY is kura and/or nutcracker" >&2; exit 2 ;;
  esac
  pid=$!
  wait_port "$port" >/dev/null
  proxy_run "$port" "$KURA" "$load" "$n"
  kill -TERM "$pid"
  wait "$pid" || true
  callgrind_total "$file"
}

per_request "$PROXY"
