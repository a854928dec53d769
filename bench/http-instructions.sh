#!/usr/bin/env bash
# Instructions per request of kura http (user space, counted by callgrind, so the figure does
# not move with the machine's noise): the proxy runs alone under callgrind with one worker
# thread (the `serve` example of kura-http: only that crate is built), in front of the bench
# origin (`origin` example, 1 KB answers with max-age=3600); a Python http.client sends N
# keep-alive GETs with User-Agent and Accept-Encoding: gzip. Two runs, N = 500 and N = 2,500;
# the difference of their totals over 2,000 is the cost of one request.
#
#   bench/http-instructions.sh                 hits (one URL) and misses (a new URL each)
#   TARGET=/path/to/target bench/http-instructions.sh   binaries of another build
#   EXTRA='cache_status = ""' bench/http-instructions.sh   more lines for the config file
#   KEEP=dir MODES=hit bench/http-instructions.sh   keeps callgrind's files for callgrind_annotate
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

if [ -z "${TARGET:-}" ]; then
  cargo build --release -q -p kura-http --example serve --example origin
  TARGET=${CARGO_TARGET_DIR:-target}
fi
SERVE=$TARGET/release/examples/serve
ORIGIN=$TARGET/release/examples/origin
SMALL=${SMALL:-500}
LARGE=${LARGE:-2500}
out=${KEEP:-$(mktemp -d)}
mkdir -p "$out"
trap 'kill $origin_pid 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT

origin_port=$(free_port)
"$ORIGIN" "$origin_port" 0 2>/dev/null &
origin_pid=$!
wait_port "$origin_port" >/dev/null

# total MODE N: the proxy's whole instruction count for a run of N requests.
total() {
  local mode=$1 n=$2 port pid file
  port=$(free_port)
  file="$out/callgrind.$mode.$n"
  cat >"$out/http.toml" <<TOML
backend = "http://127.0.0.1:$origin_port"
listen = ["127.0.0.1:$port"]
threads = 1
memory_mb = 64
${EXTRA:-}
TOML
  valgrind --tool=callgrind --callgrind-out-file="$file" "$SERVE" "$out/http.toml" \
    >/dev/null 2>"$out/valgrind.$mode.$n.log" &
  pid=$!
  wait_port "$port" >/dev/null
  python3 - "$port" "$n" "$mode" <<'PY'
import http.client, sys
port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port)
headers = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64)", "Accept-Encoding": "gzip"}
for i in range(n):
    path = "/1k/hit" if mode == "hit" else f"/1k/miss-{i}"
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status
PY
  kill -TERM "$pid"
  wait "$pid" || true
  awk '/^totals:/ {print $2}' "$file"
}

for mode in ${MODES:-hit miss}; do
  small=$(total "$mode" "$SMALL")
  large=$(total "$mode" "$LARGE")
  echo "$mode: $(( (large - small) / (LARGE - SMALL) )) instructions a request (totals $small for $SMALL, $large for $LARGE)"
done
