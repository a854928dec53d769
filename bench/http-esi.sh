#!/usr/bin/env bash
# ESI pages: kura http (`do_esi` on /esi/) against Debian's Varnish 7.1 (`beresp.do_esi` on
# /esi/), wrk on loopback, keep-alive: every request a hit on a ~2 KB HTML page of 5
# `<esi:include>`s, each a hit on a 1 KB fragment (the origin example's /esi/ page). Run ROUNDS
# times alternating kura and Varnish (A B A B), each on freshly started processes; for each
# run, requests/s and p99 from wrk and the cache process's CPU (user + system, /proc, every
# varnishd process) per request. Prints each run, medians, and kura/Varnish ratios of medians.
#
#   bench/http-esi.sh    # ROUNDS=3 DURATION=10 CONNS=32 MEM=256 THREADS=2
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-32}
MEM=${MEM:-256}
THREADS=${THREADS:-2}
# shellcheck source=bench/lib.sh
. bench/lib.sh
http_setup
http_binaries
start_origin 0; origin=$origin_port

cat > "$work/kura.toml" <<TOML
[[rule]]
path_prefix = "/esi/"
do_esi = true
TOML
cat > "$work/esi.vcl" <<VCL
vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "$origin"; }
sub vcl_backend_response {
  if (bereq.url ~ "^/esi/") { set beresp.do_esi = true; }
}
VCL

start() {
  local system=$1 port=$2
  case $system in
    kura)
      "$KURA" http --backend "http://127.0.0.1:$origin" --config "$work/kura.toml" \
        -l "127.0.0.1:$port" -m "$MEM" -t "$THREADS" 2>"$work/kura.log" &
      cache_pids=($!)
      ;;
    varnish)
      start_varnish "$port" -f "$work/esi.vcl"
      ;;
  esac
  wait_port "$port"
}

# run SYSTEM: prints "req/s p99_ms cpu_us_per_request".
run() {
  local system=$1 port url=/esi/page
  port=$(free_port)
  start "$system" "$port"
  # The page and its fragments stored; the assembled page checked.
  local page
  page=$(curl -s "http://127.0.0.1:$port$url")
  if [[ $page == *"esi:include"* ]] || [ "$(grep -o 'xxxxxxxxxx' <<<"$page" | wc -l)" -lt 500 ]; then
    echo "$system did not assemble the page" >&2
    exit 1
  fi
  local figures
  figures=$(wrk_cpu "http://127.0.0.1:$port$url")
  stop
  echo "$figures"
}

echo "kura http vs $(varnishd -V 2>&1 | head -1), ESI pages of 5 fragments; $(nproc) CPUs; $ROUNDS rounds of ${DURATION}s, $CONNS connections, kura -t $THREADS"
echo "page system round req/s p99_ms cpu_us_per_req"
ab_rounds esi run
echo
echo "page  medians kura | varnish: req/s p99_ms cpu_us | ratios kura/varnish: req/s p99 cpu"
ab_medians esi %d %.3f %.2f
