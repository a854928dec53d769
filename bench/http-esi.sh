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
cargo build --release -q -p kura
cargo build --release -q -p kura-http --example origin
target=${CARGO_TARGET_DIR:-target}
KURA=$target/release/kura
ORIGIN=$target/release/examples/origin

origin=$(free_port); "$ORIGIN" "$origin" 0 & pids+=($!)
wait_port "$origin"

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
  local before after out
  before=$(cpu_ticks "${cache_pids[@]}")
  out=$(wrk -t 1 -c "$CONNS" -d "${DURATION}s" --latency "http://127.0.0.1:$port$url")
  after=$(cpu_ticks "${cache_pids[@]}")
  stop
  wrk_figures "$out" $((after - before))
}

echo "kura http vs $(varnishd -V 2>&1 | head -1), ESI pages of 5 fragments; $(nproc) CPUs; $ROUNDS rounds of ${DURATION}s, $CONNS connections, kura -t $THREADS"
echo "system round req/s p99_ms cpu_us_per_req"
: > "$work/kura"; : > "$work/varnish"
for round in $(seq "$ROUNDS"); do
  for system in kura varnish; do
    line=$(run "$system")
    echo "$line" >> "$work/$system"
    echo "$system $round $line"
  done
done
echo
declare -A m=()
for system in kura varnish; do
  for col in 1 2 3; do
    m[$system$col]=$(awk -v c=$col '{print $c}' "$work/$system" | median)
  done
done
echo "medians kura | varnish: req/s p99_ms cpu_us | ratios kura/varnish: req/s p99 cpu"
awk -v a1="${m[kura1]}" -v a2="${m[kura2]}" -v a3="${m[kura3]}" \
    -v b1="${m[varnish1]}" -v b2="${m[varnish2]}" -v b3="${m[varnish3]}" \
  'BEGIN {printf "%d %.3f %.2f | %d %.3f %.2f | %.2fx %.2fx %.2fx\n", a1, a2, a3, b1, b2, b3, a1/b1, a2/b2, a3/b3}'
