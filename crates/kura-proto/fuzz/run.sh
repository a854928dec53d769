#!/usr/bin/env bash
# Runs every fuzz target of kura-proto for a bounded time and fails if any of
# them finds a crash (a panic, a failed round trip, a timeout or an
# out-of-memory). With FUZZ_CRATE_DIR, the targets of that crate instead
# (kura-http's run.sh).
#
#   crates/kura-proto/fuzz/run.sh [TARGET...]     (default: every target)
#
# The fuzz crates are cargo-fuzz's layout (`cargo fuzz run TARGET` works in
# them), but this runner does not need cargo-fuzz: it builds the targets with
# plain cargo and the flags cargo-fuzz 0.13 passes for `--sanitizer none`
# (libFuzzer's coverage counters, `--cfg fuzzing`, debug assertions and
# overflow checks, a release build for the host triple so that build scripts
# stay uninstrumented), which saves CI a `cargo install cargo-fuzz` of several
# minutes on every fresh machine. Both crates build into one target directory
# (FUZZ_TARGET_DIR, default target/fuzz at the repository's root), so what
# they share is built once.
#
# Environment:
#   FUZZ_SECONDS     time per target (default 30)
#   FUZZ_SANITIZER   none (default: kura-proto has no unsafe code, and
#                    without a sanitizer the build works on a stable
#                    toolchain) or address (AddressSanitizer; sets
#                    RUSTC_BOOTSTRAP=1 for the -Z flag it needs)
#   FUZZ_ARGS        extra libFuzzer flags, e.g. "-jobs=2 -workers=2"
#
# New inputs go to fuzz/corpus/TARGET (not committed), which later runs reuse;
# the committed seeds/TARGET and dict/TARGET.dict, when present, are read
# only. A crash leaves its input in fuzz/artifacts/TARGET/ and the run prints
# the command that reproduces it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "${FUZZ_CRATE_DIR:-$here/..}"

seconds="${FUZZ_SECONDS:-30}"
sanitizer="${FUZZ_SANITIZER:-none}"
triple="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$repo/target/fuzz}"

flags=(-Cpasses=sancov-module
    -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
    -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares
    -Cllvm-args=-sanitizer-coverage-stack-depth
    --cfg fuzzing -Cdebug-assertions -Coverflow-checks)
case "$sanitizer" in
none) ;;
address)
    export RUSTC_BOOTSTRAP=1
    flags+=(-Zsanitizer=address)
    ;;
*)
    echo "FUZZ_SANITIZER: none or address, not '$sanitizer'" >&2
    exit 2
    ;;
esac
export RUSTFLAGS="${flags[*]}"

if (($# > 0)); then
    targets=("$@")
else
    # every target, named for its file as cargo-fuzz names them (`cargo fuzz list`)
    mapfile -t targets < <(find fuzz/fuzz_targets -name '*.rs' -printf '%f\n' | sed 's/\.rs$//' | sort)
fi
echo "== building ${targets[*]} ($triple, sanitizer: $sanitizer, into $CARGO_TARGET_DIR)"
bins=()
for target in "${targets[@]}"; do bins+=(--bin "$target"); done
cargo build --manifest-path fuzz/Cargo.toml --release --target "$triple" "${bins[@]}"

failed=()
for target in "${targets[@]}"; do
    echo "== fuzz $target for ${seconds}s"
    corpus=fuzz/corpus/$target
    mkdir -p "$corpus"
    dirs=("$corpus")
    [[ -d fuzz/seeds/$target ]] && dirs+=("fuzz/seeds/$target")
    flags=(-max_total_time="$seconds" -timeout=10 -print_final_stats=1)
    [[ -f fuzz/dict/$target.dict ]] && flags+=(-dict="fuzz/dict/$target.dict")
    # shellcheck disable=SC2206 # FUZZ_ARGS is a list of flags
    flags+=(${FUZZ_ARGS:-})
    mkdir -p "fuzz/artifacts/$target"
    flags+=(-artifact_prefix="fuzz/artifacts/$target/")
    bin="$CARGO_TARGET_DIR/$triple/release/$target"
    if ! "$bin" "${flags[@]}" "${dirs[@]}"; then
        echo "$target crashed; reproduce (from $PWD) with: $bin fuzz/artifacts/$target/<crash file>" >&2
        failed+=("$target")
    fi
done

if ((${#failed[@]})); then
    echo "fuzzing found crashes in: ${failed[*]} (inputs in $PWD/fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzzing found no crash in ${targets[*]}"
