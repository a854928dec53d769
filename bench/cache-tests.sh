#!/usr/bin/env bash
# The RFC 9111 suite people compare caches with (cache-tests, cache-tests.fyi) against kura http
# with the conformance settings of docs/http.md (Conformance): its origin server on one port,
# kura http in front of it, the suite's client through kura; prints the required tests passed
# of those run (as cache-tests.fyi counts them, dependencies honoured) and each one failed.
#
#   bench/cache-tests.sh                    # CACHE_TESTS=/path/to/cache-tests (a checkout with
#                                           # `npm i` done; default: cloned into a temp dir)
#   SETTINGS=defaults bench/cache-tests.sh  # kura's defaults instead of the conformance settings
#
# Needs node (>= 18) and npm; KURA_BIN picks the binary (default: a release build).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
KURA=${KURA_BIN:-$target/release/kura}
[ -n "${KURA_BIN:-}" ] || cargo build --release -q -p kura
SETTINGS=${SETTINGS:-conformance}
# shellcheck source=bench/lib.sh
. bench/lib.sh
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

suite=${CACHE_TESTS:-}
if [ -z "$suite" ]; then
  suite=$work/cache-tests
  git clone -q --depth 1 https://github.com/http-tests/cache-tests.git "$suite"
  (cd "$suite" && npm i --no-audit --no-fund --silent)
fi

origin=$(free_port)
(cd "$suite" && npm_config_port=$origin npm_config_protocol=http \
  npm_config_pidfile="$work/origin.pid" exec node test-engine/server/server.mjs) >"$work/origin.log" 2>&1 &
pids+=($!)
wait_port "$origin"

port=$(free_port)
case $SETTINGS in
  conformance)
    # docs/http.md, Conformance: no default TTL or grace (the suite expects a response without
    # freshness information not to be reused), CDN-Cache-Control (RFC 9213), Set-Cookie stored.
    printf 'cdn_cache_control = true\nset_cookie = "store"\n' >"$work/kura.toml"
    flags=(--default-ttl 0 --grace 0 --config "$work/kura.toml")
    ;;
  defaults) flags=() ;;
  *) echo "SETTINGS is conformance or defaults" >&2; exit 1 ;;
esac
"$KURA" http --backend "http://127.0.0.1:$origin" -l "127.0.0.1:$port" "${flags[@]}" 2>"$work/kura.log" &
pids+=($!)
wait_port "$port"

(cd "$suite" && npm_config_base="http://127.0.0.1:$port" npm_package_config_id= \
  node --no-warnings test-engine/cli.mjs) >"$work/results.json"

cat >"$suite/kura-score.mjs" <<'JS'
// Required tests passed of those run, as cache-tests.fyi counts them.
import fs from 'fs'
import tests from './tests/index.mjs'
import { determineTestResult, resultTypes } from './test-engine/lib/results.mjs'
const results = JSON.parse(fs.readFileSync(process.argv[2]))
let run = 0
let passed = 0
const failed = []
for (const suite of tests) {
  for (const test of suite.tests) {
    if (!(test.kind === 'required' || test.kind === undefined) || results[test.id] === undefined) continue
    run++
    const verdict = determineTestResult(tests, test.id, results)
    if (verdict === resultTypes.pass) passed++
    else failed.push(`  ${test.id} ${verdict[2]} ${JSON.stringify(results[test.id])}`)
  }
}
console.log(`required tests passed: ${passed} of ${run}`)
failed.forEach(line => console.log(line))
JS
echo "kura http ($SETTINGS: ${flags[*]:-no flags} $(cat "$work/kura.toml" 2>/dev/null | tr '\n' ' '))"
echo "cache-tests $(git -C "$suite" rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)')"
node "$suite/kura-score.mjs" "$work/results.json"
