#!/usr/bin/env bash
# Issue 21's side-by-side: kura http with its defaults for seed 002 (key normalisation, device
# classes with `vary_user_agent = true`, gzip storage) against Varnish 7.1 with
# bench/seed002.vcl (the same normalisation, X-Device-Class, beresp.do_gzip, obj.* bans), both
# given MEM MB (-m / -s malloc), in front of bench/seed002-origin.py (distinct ~20 KB HTML
# pages of made-up prose, Vary: User-Agent). Loopback only; every process ends on exit.
#   fill       FILL distinct pages (desktop, gzip client; wrk, 4 connections) through a fresh
#              cache: objects held at the end (kura /stats "objects", Varnish MAIN.n_object),
#              bytes of storage used, evictions, the cache's RSS
#   hit-ratio  bench/seed002-replay.py: REQUESTS requests for PAGES pages, tracking parameters
#              in random order, 48 User-Agents, half gzip clients, through a fresh cache:
#              backend requests and hit ratio (and the fewest possible: one per page and class)
#   gzip, identity  throughput on HOT hot pages (warmed first), one User-Agent, wrk -c CONNS
#              for DURATION s, with and without Accept-Encoding: gzip; ROUNDS rounds
#              alternating kura and Varnish on fresh processes; req/s, p99, the cache's CPU
#              per request (user + system from /proc, every varnishd process), medians and
#              kura/Varnish ratios of medians
#
#   bench/http-seed002.sh   # ROUNDS=3 DURATION=5 CONNS=8 MEM=256 THREADS=2 FILL=50000 HOT=100
#                           # REQUESTS=5000 PAGES=200 PARTS="fill hit-ratio throughput"
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-8}
MEM=${MEM:-256}
THREADS=${THREADS:-2}
FILL=${FILL:-50000}
HOT=${HOT:-100}
REQUESTS=${REQUESTS:-5000}
PAGES=${PAGES:-200}
PROBE_STEP=${PROBE_STEP:-10}
PARTS=${PARTS:-"fill hit-ratio throughput"}
target=${CARGO_TARGET_DIR:-target}
KURA=${KURA_BIN:-$target/release/kura}
[ -n "${KURA_BIN:-}" ] || cargo build --release -q -p kura
# shellcheck source=bench/lib.sh
. bench/lib.sh

http_setup

oport=$(free_port)
python3 bench/seed002-origin.py "$oport" & pids+=($!)
wait_port "$oport"
count() { curl -s "http://127.0.0.1:$oport/__count"; }

cat > "$work/kura.toml" <<'TOML'
# Defaults: [normalize] (tracking parameters removed, query sorted), [device] (seed 002's
# rules, X-Device-Class) and [compression] (gzip) are on without a line; only this is asked:
[device]
vary_user_agent = true
TOML
sed "s/BACKEND_PORT/$oport/" bench/seed002.vcl > "$work/seed002.vcl"

# The fill: page n of FILL, then the thread stops (wrk still waits out -d, so the script
# watches the origin's count and ends wrk when every page went through).
cat > "$work/fill.lua" <<LUA
local n = 0
request = function()
  n = n + 1
  if n > $FILL then wrk.thread:stop() end
  return wrk.format("GET", "/entry/fill-" .. n)
end
LUA
cat > "$work/hot.lua" <<LUA
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  return wrk.format("GET", "/entry?id=hot-" .. math.random(1, $HOT) .. "&utm_source=x")
end
LUA
UA_PC="Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/117.0.0.0 Safari/537.36"

# start SYSTEM: a fresh cache on $port (admin on $aport for kura), pids in $cache_pids.
start() {
  port=$(free_port)
  case $1 in
    kura)
      aport=$(free_port)
      "$KURA" http --backend "http://127.0.0.1:$oport" -l "127.0.0.1:$port" -m "$MEM" \
        -t "$THREADS" --config "$work/kura.toml" --admin-listen "127.0.0.1:$aport" \
        2>"$work/kura.log" &
      cache_pids=($!)
      wait_port "$port"
      wait_port "$aport"
      ;;
    varnish)
      start_varnish "$port" -f "$work/seed002.vcl"
      ;;
  esac
}

# held SYSTEM: "objects storage_mb evictions" of the running cache.
held() {
  case $1 in
    kura)
      curl -s "http://127.0.0.1:$aport/stats" | python3 -c \
        'import json,sys; s=json.load(sys.stdin); print(s["objects"], round(s["bytes"]/2**20,1), s["evictions"])'
      ;;
    varnish)
      varnishstat -n "$work/varnish-$port" -1 -f MAIN.n_object -f SMA.s0.g_bytes -f MAIN.n_lru_nuked |
        awk '$1=="MAIN.n_object"{o=$2} $1=="SMA.s0.g_bytes"{b=$2} $1=="MAIN.n_lru_nuked"{e=$2}
             END {printf "%d %.1f %d\n", o, b/1048576, e}'
      ;;
  esac
}

fill() {
  local system=$1 before wpid
  start "$system"
  before=$(count)
  wrk -t 1 -c 4 -d 600s -s "$work/fill.lua" -H "User-Agent: $UA_PC" -H "Accept-Encoding: gzip" \
    "http://127.0.0.1:$port/" >/dev/null &
  wpid=$!
  pids+=($wpid)
  for _ in $(seq 1200); do
    [ $(($(count) - before)) -ge "$FILL" ] && break
    kill -0 "$wpid" 2>/dev/null || break
    sleep 0.5
  done
  kill "$wpid" 2>/dev/null || true
  wait "$wpid" 2>/dev/null || true
  sleep 1
  local stats rss
  stats=$(held "$system")
  rss=$(rss_mb "${cache_pids[@]}")
  echo "fill $system $FILL pages ($(($(count) - before)) fetched): objects storage_mb evictions rss_mb: $stats $rss; pages still held (every ${PROBE_STEP}th page probed, newest first, x step): $(python3 bench/seed002-probe.py "$port" "$FILL" "$PROBE_STEP" "$UA_PC")"
  stop
}

hit_ratio() {
  local system=$1
  start "$system"
  echo "hit-ratio $system: requests backend_requests hit_ratio fewest_possible: $(python3 bench/seed002-replay.py "$port" "$oport" "$REQUESTS" "$PAGES")"
  stop
}

# run MODE SYSTEM: prints "req/s p99_ms cpu_us_per_request".
run() {
  local mode=$1 system=$2 ae=() i
  [ "$mode" = gzip ] && ae=(-H "Accept-Encoding: gzip")
  start "$system"
  for i in $(seq 1 "$HOT"); do
    curl -s -o /dev/null -A "$UA_PC" "http://127.0.0.1:$port/entry?id=hot-$i"
  done
  local figures
  figures=$(wrk_cpu -s "$work/hot.lua" -H "User-Agent: $UA_PC" "${ae[@]}" "http://127.0.0.1:$port/")
  stop
  echo "$figures"
}

echo "kura http vs $(varnishd -V 2>&1 | head -1) (bench/seed002.vcl); $(nproc) CPUs; -m $MEM / malloc,${MEM}m, kura -t $THREADS"
echo "pages: $(curl -s -A "$UA_PC" "http://127.0.0.1:$oport/entry/sample" | wc -c) bytes, gzip -6 $(curl -s -A "$UA_PC" "http://127.0.0.1:$oport/entry/sample" | gzip -6 | wc -c) bytes"
for part in $PARTS; do
  case $part in
    fill) for system in kura varnish; do fill "$system"; done ;;
    hit-ratio) for system in kura varnish; do hit_ratio "$system"; done ;;
    throughput)
      echo "throughput: $HOT hot pages, $CONNS connections, ${DURATION}s, $ROUNDS rounds"
      echo "mode system round req/s p99_ms cpu_us_per_req"
      for mode in gzip identity; do ab_rounds "$mode" run "$mode"; done
      echo
      echo "mode  medians kura | varnish: req/s p99_ms cpu_us | ratios kura/varnish: req/s p99 cpu"
      for mode in gzip identity; do ab_medians "$mode" %d %.3f %.2f; done
      ;;
    *) echo "unknown part $part" >&2; exit 1 ;;
  esac
done
