#!/usr/bin/env bash
# The CPU cost of kura http's codings, in instructions per page (callgrind: the figure does not
# move with the machine's load): compressing a 20 KB page (the first 20,000 bytes of
# docs/http.md, English prose with markup) with gzip at levels 1, 6, 9 and brotli at qualities
# 1, 3, 5, 9, 11, and decoding gzip-6 and br-5 (what a client that does not accept the stored
# coding costs), and br-5 decoded then gzipped at levels 1 and 6 (what a gzip-only client of a br
# object costs: the transcoding). MODES chooses modes; TARGET=target with PROFILE=debug uses a
# debug build (dependencies are built at opt-level 2 there, kura's glue is not). Each mode runs twice, N=SMALL and N=LARGE pages; the difference over
# LARGE-SMALL is one page. Also prints the coded sizes.
#
#   bench/http-encodings.sh      # SMALL=2 LARGE=12
set -euo pipefail
cd "$(dirname "$0")/.."
SMALL=${SMALL:-2}
LARGE=${LARGE:-12}
PROFILE=${PROFILE:-release}
MODES=${MODES:-"gzip-1 gzip-6 gzip-9 br-1 br-3 br-5 br-9 br-11 gunzip unbr unbr-gzip-1 unbr-gzip-6"}
if [ -z "${TARGET:-}" ]; then
  cargo build --release -q -p kura-http --example encode_cost
  TARGET=${CARGO_TARGET_DIR:-target}
fi
BIN=$TARGET/$PROFILE/examples/encode_cost
page=$(mktemp)
trap 'rm -f "$page"' EXIT
head -c 20000 docs/http.md > "$page"

instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$1" "$2" "$page" 2>&1 \
    | awk '/Collected :/ {print $NF}'
}

echo "page: 20,000 bytes of docs/http.md; instructions per page (callgrind), coded bytes"
echo "mode instructions_per_page coded_bytes ratio"
for mode in $MODES; do
  a=$(instructions "$mode" "$SMALL")
  b=$(instructions "$mode" "$LARGE")
  size=$("$BIN" "$mode" 1 "$page" | awk '{print $NF}')
  awk -v m="$mode" -v a="$a" -v b="$b" -v n=$((LARGE - SMALL)) -v s="$size" \
    'BEGIN {printf "%s %.0f %d %.2f\n", m, (b - a) / n, s, 20000 / (s > 0 ? s : 1)}'
done
