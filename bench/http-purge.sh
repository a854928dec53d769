#!/usr/bin/env bash
# Tag purges under load: kura http against Debian's Varnish 7.1 (no xkey there: tags are banned
# with FOSHttpCache's VCL, `ban("obj.http.X-Host ~ ... && obj.http.X-Cache-Tags ~ ...")` on a
# `BAN` request). Each run on fresh processes, in front of the bench origin (1 KB answers; a
# `tag-NAME` path segment comes back as `X-Cache-Tags: NAME` and `xkey: NAME`):
#   1. fill: OBJECTS objects /1k/tag-gK/obj-N (K = N mod TAGS) and HOT hot objects
#      /1k/tag-keep/hot-N, all stored (kura /stats objects, Varnish MAIN.n_object checked);
#   2. wrk (-c CONNS) requests the hot objects (hits) for the rest of the run, one wrk a phase
#      (ended by SIGINT: its own count of requests, as Varnish's MAIN counters are summed only
#      when a worker finishes a task, which a busy keep-alive connection does not), and the
#      cache's CPU (utime + stime of every process, /proc) over each phase:
#        before  PHASE s before the purge;
#        during  from the purge until it is complete: the OBJECTS objects gone from the store
#                (objects back to HOT plus the probes' refetches) and no ban left to evaluate
#                (kura /stats bans = 0; Varnish MAIN.bans - MAIN.bans_completed = 0), or
#                MAX_WAIT s; the hot objects are all older than the bans, so every hit in this
#                phase may have to test them;
#        after   PHASE s after it;
#   3. the purge: TAGS requests, one a tag, as FOSHttpCache sends them (`BAN /` with X-Host,
#      X-Url, X-Content-Type `.*` and `X-Cache-Tags: (^|,)(gK)(,|$)`); system `kura-keys` sends
#      kura's own tag purge instead (`PURGEKEYS /` with `xkey-purge: gK`, one a tag);
#   4. right after the last purge request, PROBES purged objects are requested once each: how
#      many were misses (X-Cache; Varnish's VCL sets it from obj.hits) and how long after the
#      first purge request the last probe was answered.
# Prints per run: the purge requests' time, the probes, the time until complete, and per phase
# req/s and CPU us per request; then medians over ROUNDS (A B A B) and kura/Varnish ratios.
#
#   bench/http-purge.sh   # ROUNDS=3 OBJECTS=10000 TAGS=1 HOT=100 CONNS=32 PHASE=10 MAX_WAIT=150
#                         # PROBES=100 MEM=256 THREADS=2 SYSTEMS="kura varnish"
#                         # VARNISH_ARGS="-p ban_lurker_age=60" (Varnish's default lurker age)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
OBJECTS=${OBJECTS:-10000}
TAGS=${TAGS:-1}
HOT=${HOT:-100}
CONNS=${CONNS:-32}
PHASE=${PHASE:-10}
MAX_WAIT=${MAX_WAIT:-150}
PROBES=${PROBES:-100}
MEM=${MEM:-256}
THREADS=${THREADS:-2}
SYSTEMS=${SYSTEMS:-"kura varnish"}
VARNISH_ARGS=${VARNISH_ARGS:-}
# shellcheck source=bench/lib.sh
. bench/lib.sh
http_setup
http_binaries
start_origin 0; origin=$origin_port

cat >"$work/kura.toml" <<TOML
backend = "http://127.0.0.1:$origin"
[purge]
allow = ["127.0.0.1"]
TOML
# FOSHttpCache's ban VCL (resources/config/varnish/fos_ban.vcl), its X-Url and X-Host copied
# into every object and removed on delivery; X-Cache for the probes.
cat >"$work/purge.vcl" <<VCL
vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "$origin"; }
acl invalidators { "127.0.0.1"; }
sub vcl_recv {
  if (req.method == "BAN") {
    if (!client.ip ~ invalidators) { return (synth(405, "Not allowed")); }
    if (req.http.X-Cache-Tags) {
      ban("obj.http.X-Host ~ " + req.http.X-Host
        + " && obj.http.X-Url ~ " + req.http.X-Url
        + " && obj.http.content-type ~ " + req.http.X-Content-Type
        + " && obj.http.X-Cache-Tags ~ " + req.http.X-Cache-Tags);
    } else {
      ban("obj.http.X-Host ~ " + req.http.X-Host
        + " && obj.http.X-Url ~ " + req.http.X-Url
        + " && obj.http.content-type ~ " + req.http.X-Content-Type);
    }
    return (synth(200, "Banned"));
  }
}
sub vcl_backend_response {
  set beresp.http.X-Url = bereq.url;
  set beresp.http.X-Host = bereq.http.host;
}
sub vcl_deliver {
  unset resp.http.X-Url;
  unset resp.http.X-Host;
  if (obj.hits > 0) { set resp.http.X-Cache = "hit"; } else { set resp.http.X-Cache = "miss"; }
}
VCL
cat >"$work/hot.lua" <<LUA
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  return wrk.format("GET", "/1k/tag-keep/hot-" .. math.random(1, $HOT))
end
LUA

# start SYSTEM: a fresh cache on $port (kura's admin on $aport), its processes in $cache_pids.
start() {
  port=$(free_port)
  case $1 in
    kura*)
      aport=$(free_port)
      "$KURA" http --config "$work/kura.toml" -l "127.0.0.1:$port" -m "$MEM" -t "$THREADS" \
        --admin-listen "127.0.0.1:$aport" 2>"$work/kura.log" &
      cache_pids=($!)
      wait_port "$port"
      wait_port "$aport"
      ;;
    varnish)
      # shellcheck disable=SC2086
      start_varnish "$port" -f "$work/purge.vcl" $VARNISH_ARGS
      ;;
  esac
}

# sample SYSTEM: "seconds cpu_ticks served objects bans_left" of the running cache.
sample() {
  local t ticks
  t=$(date +%s.%N)
  ticks=$(cpu_ticks "${cache_pids[@]}")
  case $1 in
    kura*)
      curl -s "http://127.0.0.1:$aport/stats" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print(sum(s["requests"].values()), s["objects"], s["bans"])'
      ;;
    varnish)
      varnishstat -n "$work/varnish-$port" -1 -f MAIN.client_req -f MAIN.n_object \
        -f MAIN.bans -f MAIN.bans_completed |
        awk '{v[$1] = $2} END {print v["MAIN.client_req"], v["MAIN.n_object"], v["MAIN.bans"] - v["MAIN.bans_completed"]}'
      ;;
  esac | { read -r served objects bans; echo "$t $ticks $served $objects $bans"; }
}

# A Python client on one keep-alive connection: `fill PORT OBJECTS TAGS HOT` stores
# the objects; `probe PORT N TAGS OBJECTS` requests N purged objects (spread over the fill)
# and prints how many were misses.
client_py='
import http.client, sys
mode, port = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
def get(path):
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    assert r.status == 200, (path, r.status)
    return r.getheader("X-Cache", "")
if mode == "fill":
    objects, tags, hot = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    for n in range(1, objects + 1):
        get(f"/1k/tag-g{n % tags}/obj-{n}")
    for n in range(1, hot + 1):
        get(f"/1k/tag-keep/hot-{n}")
else:
    probes, tags, objects = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    step = max(1, objects // probes)
    paths = [f"/1k/tag-g{n % tags}/obj-{n}" for n in range(1, objects + 1, step)][:probes]
    print(sum(get(p).startswith("miss") for p in paths))
'

# purge SYSTEM: sends the TAGS purge requests.
purge() {
  local g
  for g in $(seq 0 $((TAGS - 1))); do
    if [ "$1" = kura-keys ]; then
      curl -sf -o /dev/null -X PURGEKEYS -H "xkey-purge: g$g" "http://127.0.0.1:$port/"
    else
      curl -sf -o /dev/null -X BAN -H "X-Host: .*" -H "X-Url: .*" -H "X-Content-Type: .*" \
        -H "X-Cache-Tags: (^|,)(g$g)(,|$)" "http://127.0.0.1:$port/"
    fi
  done
}

# load_start: wrk -c CONNS on the hot objects in the background (pid $wpid, output in
# $work/wrk.out), and the cache's CPU ticks now ($ticks0).
load_start() {
  ticks0=$(cpu_ticks "${cache_pids[@]}")
  wrk -t 1 -c "$CONNS" -d $((MAX_WAIT + 60))s -s "$work/hot.lua" "http://127.0.0.1:$port/" \
    >"$work/wrk.out" &
  wpid=$!
}
# load_end: ends load_start's wrk (SIGINT: it prints its summary) and sets $figures to "req/s
# cpu_us_per_request" of its requests and the cache's CPU meanwhile (not in a subshell: it
# waits for its wrk).
load_end() {
  local ticks1 n rps
  kill -INT "$wpid"
  wait "$wpid" || true
  ticks1=$(cpu_ticks "${cache_pids[@]}")
  n=$(awk '/requests in/ {print $1}' "$work/wrk.out")
  rps=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
  figures=$(awk -v n="$n" -v r="$rps" -v t=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.0f %.2f", r, (n > 0 ? t / hz / n * 1e6 : 0)}')
}

# run SYSTEM: prints "purge_ms probes_missed probed_ms complete_s before_rps before_cpu
# during_rps during_cpu after_rps after_cpu".
run() {
  local system=$1 t_purge purged probed missed complete before during after t objects bans figures
  start "$system"
  python3 -c "$client_py" fill "$port" "$OBJECTS" "$TAGS" "$HOT"
  read -r _ _ _ objects _ < <(sample "$system")
  if [ "$objects" -lt $((OBJECTS + HOT)) ]; then
    echo "$system holds $objects objects after the fill of $((OBJECTS + HOT))" >&2
    exit 1
  fi
  load_start
  sleep "$PHASE"
  load_end
  before=$figures
  load_start
  t_purge=$(date +%s.%N)
  purge "$system"
  purged=$(date +%s.%N)
  missed=$(python3 -c "$client_py" probe "$port" "$PROBES" "$TAGS" "$OBJECTS")
  probed=$(date +%s.%N)
  complete=-1
  while :; do
    read -r t _ _ objects bans < <(sample "$system")
    if [ "$objects" -le $((HOT + PROBES)) ] && [ "$bans" -eq 0 ]; then
      complete=$(awk -v a="$t_purge" -v b="$t" 'BEGIN {printf "%.1f", b - a}')
      break
    fi
    if awk -v a="$t_purge" -v b="$t" -v m="$MAX_WAIT" 'BEGIN {exit !(b - a > m)}'; then
      echo "$system: not complete after ${MAX_WAIT}s: objects $objects, bans $bans" >&2
      break
    fi
    sleep 0.1
  done
  load_end
  during=$figures
  load_start
  sleep "$PHASE"
  load_end
  after=$figures
  stop
  awk -v a="$t_purge" -v b="$purged" -v c="$probed" -v m="$missed" -v d="$complete" \
    'BEGIN {printf "%.1f %d %.1f %s ", (b - a) * 1000, m, (c - a) * 1000, d}'
  echo "$before $during $after"
}

echo "kura http vs $(varnishd -V 2>&1 | head -1) (FOSHttpCache ban VCL${VARNISH_ARGS:+, $VARNISH_ARGS}); $(nproc) CPUs"
echo "$OBJECTS objects in $TAGS tag(s) purged under wrk -c $CONNS on $HOT hot objects; $ROUNDS rounds, phases of ${PHASE}s"
echo "name system round purge_ms probes_missed/$PROBES probed_ms complete_s before_rps before_cpu_us during_rps during_cpu_us after_rps after_cpu_us"
rounds_of "$SYSTEMS" purge run
echo
echo "medians: system purge_ms probes_missed probed_ms complete_s before_rps before_cpu_us during_rps during_cpu_us after_rps after_cpu_us"
medians_of "$SYSTEMS" purge 10
