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
cargo build --release -q -p kura
cargo build --release -q -p kura-http --example origin
target=${CARGO_TARGET_DIR:-target}
KURA=$target/release/kura
ORIGIN=$target/release/examples/origin

fast=$(free_port); "$ORIGIN" "$fast" 0 & pids+=($!)
slow=$(free_port); "$ORIGIN" "$slow" 10 & pids+=($!)
wait_port "$fast"; wait_port "$slow"
pool=()
for _ in 1 2 3; do
  p=$(free_port); "$ORIGIN" "$p" 10 & pids+=($!); wait_port "$p"; pool+=("$p")
done
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

# run SYSTEM LOAD: prints "req/s p99_ms cpu_us_per_request".
run() {
  local system=$1 load=$2 port backend url script=()
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
  local before after out
  before=$(cpu_ticks "${cache_pids[@]}")
  out=$(wrk -t 1 -c "$CONNS" -d "${DURATION}s" --latency "${script[@]}" "http://127.0.0.1:$port$url")
  after=$(cpu_ticks "${cache_pids[@]}")
  local rss=0 pid
  for pid in "${cache_pids[@]}"; do
    rss=$((rss + $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
  done
  stop
  echo "$(wrk_figures "$out" $((after - before))) $(awk -v m="$rss" 'BEGIN {printf "%.0f", m / 1024}')"
}

echo "kura http vs $(varnishd -V 2>&1 | head -1); $(nproc) CPUs; $ROUNDS rounds of ${DURATION}s, $CONNS connections, -m $MEM, kura -t $THREADS"
echo "load system round req/s p99_ms cpu_us_per_req rss_mb"
for load in $LOADS; do
  : > "$work/$load.kura"; : > "$work/$load.varnish"
  for round in $(seq "$ROUNDS"); do
    for system in kura varnish; do
      line=$(run "$system" "$load")
      echo "$line" >> "$work/$load.$system"
      echo "$load $system $round $line"
    done
  done
done
echo
echo "load  medians kura | varnish: req/s p99_ms cpu_us rss_mb | ratios kura/varnish: req/s p99 cpu rss"
for load in $LOADS; do
  declare -A m=()
  for system in kura varnish; do
    for col in 1 2 3 4; do
      m[$system$col]=$(awk -v c=$col '{print $c}' "$work/$load.$system" | median)
    done
  done
  awk -v l="$load" -v a1="${m[kura1]}" -v a2="${m[kura2]}" -v a3="${m[kura3]}" -v a4="${m[kura4]}" \
      -v b1="${m[varnish1]}" -v b2="${m[varnish2]}" -v b3="${m[varnish3]}" -v b4="${m[varnish4]}" \
    'BEGIN {printf "%s  %d %.3f %.2f %d | %d %.3f %.2f %d | %.2fx %.2fx %.2fx %.2fx\n", l, a1, a2, a3, a4, b1, b2, b3, b4, a1/b1, a2/b2, a3/b3, a4/b4}'
  unset m
done
