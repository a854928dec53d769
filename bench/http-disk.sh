#!/usr/bin/env bash
# Restart with a disk tier (issue 42): origin requests in the first minute after a restart of a
# warm cache, kura http with `--disk-cache` (after a clean stop, SIGTERM, and after SIGKILL;
# kura-all-kill: with `--disk-cache-all`, every object written to disk when stored, then SIGKILL)
# against Debian's Varnish 7.1 (malloc storage: cold after any restart) and nginx's
# proxy_cache (its cache on disk, warm; stopped with SIGQUIT, nginx's graceful stop), all with
# the same memory (MEM MiB: kura -m, Varnish malloc, nginx's keys_zone holds keys only), in
# front of the bench origin. Each run on fresh processes and an empty cache directory:
#   1. fill: OBJECTS objects /SIZE/obj-N requested once each, one keep-alive connection;
#   2. the cache stops (kura-disk, varnish, nginx: cleanly; kura-kill: SIGKILL two seconds
#      after the fill, one second more than kura's write buffers wait) and starts again on the
#      same port and directory, in front of a fresh origin process (its request count is the
#      figure);
#   3. wrk -c CONNS for 60 s on the OBJECTS objects, uniformly at random; then the origin's
#      count (origin requests in the first minute), the share of wrk's requests that went to
#      the origin, wrk's req/s (throughput is not the point, and on a loaded machine not
#      comparable run to run) and the answers that were not 2xx (wrk's count: should be 0).
#
#   bench/http-disk.sh   # ROUNDS=1 OBJECTS=10000 SIZE=16k MEM=64 DISK=512M CONNS=16 THREADS=2
#                        # SYSTEMS="kura-disk kura-kill kura-all-kill varnish nginx" MINUTE=60
#                        # KURA_BIN=target/debug/kura ORIGIN_BIN=target/debug/examples/origin
#                        # to skip the release build
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-1}
OBJECTS=${OBJECTS:-10000}
SIZE=${SIZE:-16k}
MEM=${MEM:-64}
DISK=${DISK:-512M}
CONNS=${CONNS:-16}
THREADS=${THREADS:-2}
MINUTE=${MINUTE:-60}
SYSTEMS=${SYSTEMS:-"kura-disk kura-kill kura-all-kill varnish nginx"}
# shellcheck source=bench/lib.sh
. bench/lib.sh
http_setup
command -v nginx >/dev/null || { echo "needs nginx: apt-get install -y nginx-light" >&2; exit 1; }
http_binaries

cat >"$work/varnish.vcl" <<VCL
vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "ORIGIN"; }
VCL
cat >"$work/random.lua" <<LUA
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  return wrk.format("GET", "/$SIZE/obj-" .. math.random(1, $OBJECTS))
end
LUA

# origin_start: a fresh origin on $origin (a port chosen once a run), pid in $origin_pid.
origin_start() {
  "$ORIGIN" "$origin" 0 2>"$work/origin.err" &
  origin_pid=$!
  wait_port "$origin"
}
# origin_count: stops the origin (SIGINT: it prints its count) and prints the count.
origin_count() {
  kill -INT "$origin_pid"
  wait "$origin_pid" || true
  awk '/^origin:/ {print $2}' "$work/origin.err"
}

# start SYSTEM: the cache on $port (chosen once a run), on $dir for the disk caches.
start() {
  case $1 in
    kura*)
      local all=()
      [ "$1" = kura-all-kill ] && all=(--disk-cache-all)
      "$KURA" http --backend "http://127.0.0.1:$origin" -l "127.0.0.1:$port" -m "$MEM" \
        -t "$THREADS" --disk-cache "$dir:$DISK" "${all[@]}" 2>>"$work/kura.log" &
      cache_pids=($!)
      wait_port "$port"
      ;;
    varnish)
      sed "s/ORIGIN/$origin/" "$work/varnish.vcl" >"$work/run.vcl"
      start_varnish "$port" -f "$work/run.vcl"
      ;;
    nginx)
      cat >"$work/nginx.conf" <<NGINX
user root;
worker_processes $THREADS;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx-body;
  proxy_temp_path $work/nginx-proxy;
  fastcgi_temp_path $work/nginx-fastcgi;
  uwsgi_temp_path $work/nginx-uwsgi;
  scgi_temp_path $work/nginx-scgi;
  proxy_cache_path $dir levels=1:2 keys_zone=k:${MEM}m max_size=$DISK inactive=1h use_temp_path=off;
  upstream origin { server 127.0.0.1:$origin; keepalive 32; }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache k;
    }
  }
}
NGINX
      nginx -c "$work/nginx.conf" &
      cache_pids=($!)
      wait_port "$port"
      cache_pids+=($(pgrep -P "${cache_pids[0]}" || true))
      ;;
  esac
}

# halt SYSTEM: the stop of step 2.
halt() {
  local pid
  case $1 in
    kura-kill | kura-all-kill) sleep 2; kill -KILL "${cache_pids[@]}" ;;
    nginx) kill -QUIT "${cache_pids[0]}" ;;
    *) kill -TERM "${cache_pids[0]}" ;;
  esac
  for pid in "${cache_pids[@]}"; do
    for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  done
  cache_pids=()
}

fill_py='
import http.client, sys
port, objects, size = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for n in range(1, objects + 1):
    c.request("GET", f"/{size}/obj-{n}")
    r = c.getresponse()
    r.read()
    assert r.status == 200, (n, r.status)
'

# run SYSTEM: prints "fill_origin origin_first_minute share_of_requests wrk_rps".
run() {
  local system=$1 filled first out n rps bad
  port=$(free_port)
  origin=$(free_port)
  while [ "$origin" = "$port" ]; do origin=$(free_port); done
  dir=$(mktemp -d "$work/disk.XXXXXX")
  origin_start
  start "$system"
  python3 -c "$fill_py" "$port" "$OBJECTS" "$SIZE"
  halt "$system"
  filled=$(origin_count)
  origin_start
  start "$system"
  out=$(wrk -t 1 -c "$CONNS" -d "${MINUTE}s" -s "$work/random.lua" "http://127.0.0.1:$port/")
  first=$(origin_count)
  case $system in kura*) halt kura-disk ;; *) halt "$system" ;; esac
  rm -rf "$dir"
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' <<<"$out")
  bad=$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")
  awk -v f="$filled" -v o="$first" -v n="$n" -v r="$rps" -v b="${bad:-0}" \
    'BEGIN {printf "%d %d %.4f %d %d\n", f, o, (n > 0 ? o / n : 0), r, b}'
}

echo "restart with a disk tier: kura http ($KURA) vs $(varnishd -V 2>&1 | head -1) vs $(nginx -v 2>&1)"
echo "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $OBJECTS objects of $SIZE, memory ${MEM} MiB, disk $DISK, wrk -c $CONNS for ${MINUTE}s after the restart"
echo "name system round fill_origin_requests origin_requests_first_minute origin_share wrk_rps non_2xx"
rounds_of "$SYSTEMS" disk run
echo
echo "medians: system fill_origin_requests origin_requests_first_minute origin_share wrk_rps non_2xx"
medians_of "$SYSTEMS" disk 5
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
