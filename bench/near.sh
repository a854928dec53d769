#!/usr/bin/env bash
# kura-client's near cache: a hit in process against a remote get (one kura
# server); the invalidation delay in front of kura (the `mt` subscription)
# and in front of Redis (Debian's redis-server, CLIENT TRACKING): from
# another client's write being sent to the invalidation arriving, while a
# third connection writes other keys back to back; and Redis's hit and
# remote GET. SAMPLES (default 5000) of each; p50 and p99.
#
#   bench/near.sh      # results in bench/results/DATE-near.txt
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLES=${SAMPLES:-5000}
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p kura --bin kura
cargo build --release -q -p kura-client --example near
# shellcheck source=bench/lib.sh
. bench/lib.sh
out=bench/results/$(date +%F)-near.txt
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
kport=$(free_port)
"$TARGET/release/kura" server -p "$kport" -t 2 >/dev/null 2>&1 &
pids+=($!)
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
pids+=($!)
wait_port "$kport" >/dev/null
wait_port "$rport" >/dev/null
{
  echo "# bench/near.sh, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), SAMPLES=$SAMPLES"
  echo "# $(nproc) vCPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load average $(cut -d' ' -f1-3 /proc/loadavg): a shared, busy machine; $(redis-server --version | cut -d' ' -f1-3)"
  "$TARGET/release/examples/near" "127.0.0.1:$kport" "redis://127.0.0.1:$rport" "$SAMPLES"
} | tee "$out"
