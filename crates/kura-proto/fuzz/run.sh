#!/usr/bin/env bash
# Runs every cargo-fuzz target of kura-proto for a bounded time and fails if
# any of them finds a crash (a panic, a failed round trip, a timeout or an
# out-of-memory). Installs cargo-fuzz first when it is missing. With
# FUZZ_CRATE_DIR, the targets of that crate instead (kura-http's run.sh).
#
#   crates/kura-proto/fuzz/run.sh [TARGET...]     (default: every target)
#
# Environment:
#   FUZZ_SECONDS     time per target (default 30)
#   FUZZ_SANITIZER   cargo fuzz's --sanitizer (default none: kura-proto has
#                    no unsafe code, and without a sanitizer the build works
#                    on a stable toolchain; any other value sets
#                    RUSTC_BOOTSTRAP=1 for the -Z flags it needs)
#   FUZZ_ARGS        extra libFuzzer flags, e.g. "-jobs=2 -workers=2"
#
# New inputs go to corpus/TARGET (not committed), which later runs reuse;
# the committed seeds/TARGET and dict/TARGET.dict, when present, are read
# only. A crash leaves its input in artifacts/TARGET/ and the run prints the
# command that reproduces it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "${FUZZ_CRATE_DIR:-$here/..}"

seconds="${FUZZ_SECONDS:-30}"
sanitizer="${FUZZ_SANITIZER:-none}"
cargo_fuzz_version=0.13.2

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz $cargo_fuzz_version (a few minutes)"
    cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked
fi
cargo fuzz --version
if [[ "$sanitizer" != none ]]; then
    export RUSTC_BOOTSTRAP=1
fi

if (($# > 0)); then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

failed=()
for target in "${targets[@]}"; do
    echo "== fuzz $target for ${seconds}s (sanitizer: $sanitizer)"
    corpus=fuzz/corpus/$target
    mkdir -p "$corpus"
    dirs=("$corpus")
    [[ -d fuzz/seeds/$target ]] && dirs+=("fuzz/seeds/$target")
    flags=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1)
    [[ -f fuzz/dict/$target.dict ]] && flags+=(-dict="fuzz/dict/$target.dict")
    # shellcheck disable=SC2206 # FUZZ_ARGS is a list of flags
    flags+=(${FUZZ_ARGS:-})
    if ! cargo fuzz run --sanitizer "$sanitizer" "$target" "${dirs[@]}" -- "${flags[@]}"; then
        failed+=("$target")
    fi
done

if ((${#failed[@]})); then
    echo "fuzzing found crashes in: ${failed[*]} (inputs in $PWD/fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzzing found no crash in ${targets[*]}"
