#!/usr/bin/env bash
# Runs every cargo-fuzz target of kura-http (the request framing readers of src/wire/) for a
# bounded time: the same runner as kura-proto's (crates/kura-proto/fuzz/run.sh), on this crate.
#
#   crates/kura-http/fuzz/run.sh [TARGET...]     (default: every target)
#
# The environment is kura-proto's runner's: FUZZ_SECONDS, FUZZ_SANITIZER, FUZZ_ARGS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FUZZ_CRATE_DIR="$here/.." exec "$here/../../kura-proto/fuzz/run.sh" "$@"
