#!/usr/bin/env bash
# kura http against Debian's Varnish 7.1 (default VCL, malloc storage of the same size), wrk on
# loopback, keep-alive. Three loads, each run ROUNDS times alternating kura and Varnish (A B A B),
# each run on freshly started processes:
#   hits-1k    every request a hit on one 1 KB object
#   hits-100k  every request a hit on one 100 KB object
#   mix        10% misses (unique URLs) against an origin that answers in 10 ms, 90% hits on
#              100 hot 1 KB objects
#   churn      every request a miss on a new 100 KB object: some GB through -m MEM of cache,
#              to see the resident memory stay near -m
#   director   the mix, the origin a pool of 3 servers (each answering in 10 ms) round-robin:
#              kura's [backends.default] pool, Varnish's directors.round_robin() (VCL below)
# For each run: requests/s and p99 from wrk, the cache process's CPU (user + system, from /proc,
# every varnishd process for Varnish) per request, and its resident memory (VmRSS, MB) at the
# end. Prints each run, then medians and kura/Varnish ratios of medians.
#
#   bench/http.sh    # ROUNDS=3 DURATION=10 CONNS=32 MEM=256 THREADS=2 LOADS="hits-1k hits-100k mix churn"
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
MEM=${MEM:-256}
THREADS=${THREADS:-2}
LOADS=${LOADS:-"hits-1k hits-100k mix churn director"}
# shellcheck source=bench/lib.sh
. bench/lib.sh
http_setup
http_binaries

start_origin 0; fast=$origin_port
start_origin 10; slow=$origin_port
pool=()
for _ in 1 2 3; do start_origin 10; pool+=("$origin_port"); done
cat > "$work/director.toml" <<TOML
[backends.default]
servers = ["http://127.0.0.1:${pool[0]}", "http://127.0.0.1:${pool[1]}", "http://127.0.0.1:${pool[2]}"]
policy = "round-robin"
TOML
cat > "$work/director.vcl" <<VCL
vcl 4.1;
import directors;
backend s1 { .host = "127.0.0.1"; .port = "${pool[0]}"; }
backend s2 { .host = "127.0.0.1"; .port = "${pool[1]}"; }
backend s3 { .host = "127.0.0.1"; .port = "${pool[2]}"; }
sub vcl_init { new pool = directors.round_robin(); pool.add_backend(s1); pool.add_backend(s2); pool.add_backend(s3); }
sub vcl_recv { set req.backend_hint = pool.backend(); }
VCL

cat > "$work/mix.lua" <<'LUA'
local n = 0
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  n = n + 1
  if math.random(10) == 1 then
    return wrk.format("GET", "/1k/miss-" .. math.random(1, 1000000000) .. "-" .. n)
  end
  return wrk.format("GET", "/1k/hot-" .. math.random(1, 100))
end
LUA
cat > "$work/churn.lua" <<'LUA'
local n = 0
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  n = n + 1
  return wrk.format("GET", "/100k/new-" .. math.random(1, 1000000000) .. "-" .. n)
end
LUA

# start SYSTEM PORT BACKEND_PORT: starts the cache, sets $cache_pids. BACKEND_PORT "pool": the
# three servers' director.
start() {
  local system=$1 port=$2 backend=$3 kura_backend varnish_backend
  if [ "$backend" = pool ]; then
    kura_backend=(--config "$work/director.toml")
    varnish_backend=(-f "$work/director.vcl")
  else
    kura_backend=(--backend "http://127.0.0.1:$backend")
    varnish_backend=(-b "127.0.0.1:$backend")
  fi
  case $system in
    kura)
      "$KURA" http "${kura_backend[@]}" -l "127.0.0.1:$port" -m "$MEM" -t "$THREADS" 2>"$work/kura.log" &
      cache_pids=($!)
      ;;
    varnish)
      start_varnish "$port" "${varnish_backend[@]}"
      ;;
  esac
  wait_port "$port"
}

# run LOAD SYSTEM: prints "req/s p99_ms cpu_us_per_request rss_mb".
run() {
  local load=$1 system=$2 port backend url script=()
  port=$(free_port)
  case $load in
    hits-1k) backend=$fast; url=/1k/a ;;
    hits-100k) backend=$fast; url=/100k/a ;;
    mix) backend=$slow; url=/; script=(-s "$work/mix.lua") ;;
    director) backend=pool; url=/; script=(-s "$work/mix.lua") ;;
    churn) backend=$fast; url=/; script=(-s "$work/churn.lua") ;;
  esac
  start "$system" "$port" "$backend"
  if [ "$load" = churn ]; then
    :
  elif [ "$load" = mix ] || [ "$load" = director ]; then
    for i in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/1k/hot-$i"; done
  else
    curl -s -o /dev/null "http://127.0.0.1:$port$url"
  fi
  local figures
  figures=$(wrk_cpu "${script[@]}" "http://127.0.0.1:$port$url")
  figures="$figures $(rss_mb "${cache_pids[@]}")"
  stop
  echo "$figures"
}

echo "kura http vs $(varnishd -V 2>&1 | head -1); $(nproc) CPUs; $ROUNDS rounds of ${DURATION}s, $CONNS connections, -m $MEM, kura -t $THREADS"
echo "load system round req/s p99_ms cpu_us_per_req rss_mb"
for load in $LOADS; do ab_rounds "$load" run "$load"; done
echo
echo "load  medians kura | varnish: req/s p99_ms cpu_us rss_mb | ratios kura/varnish: req/s p99 cpu rss"
for load in $LOADS; do ab_medians "$load" %d %.3f %.2f %d; done
