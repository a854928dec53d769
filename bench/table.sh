#!/usr/bin/env bash
# Fixed-length table reads in process, one thread: kura-table against Tokyo
# Cabinet's fixed-length database (Debian's tokyocabinet-bin, `tcftest`), side
# by side, alternating A B A B, medians and ratios.
#
#   bench/table.sh
#
# Both tables hold RECORDS records of WIDTH bytes in a file. Tokyo Cabinet:
# `tcftest write FILE RECORDS WIDTH` once, then `tcftest read -nl -wb FILE`
# (ids 1 to RECORDS in order; -nl no locking, -wb reading into a buffer) and
# `tcftest read -nl -wb -rnd FILE` (random ids); its reads/s are RECORDS over
# the "time" it prints. kura: crates/kura-table/examples/read_bench.rs, READS
# reads of ids in order and at random on a table of the same shape in a file,
# and (a third column) on an in-memory table (anonymous memory, huge pages).
#
# Knobs: ROUNDS=5, RECORDS=1000000, WIDTH=8, READS=20000000, DIR (temporary).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
RECORDS=${RECORDS:-1000000}
WIDTH=${WIDTH:-8}
READS=${READS:-20000000}
DIR=${DIR:-$(mktemp -d /tmp/kura-table-bench.XXXXXX)}
command -v tcftest >/dev/null || { echo "tcftest missing: apt-get install tokyocabinet-bin" >&2; exit 1; }
cargo build --release -q -p kura-table --example read_bench
KURA=target/release/examples/read_bench

tcftest write "$DIR/tc.tcf" "$RECORDS" "$WIDTH" >/dev/null
"$KURA" "$DIR/kura.ktbl" "$RECORDS" "$WIDTH" 1 seq >/dev/null # fill
tc_rate() { # args for tcftest read
  tcftest read -nl -wb "$@" "$DIR/tc.tcf" | awk -v n="$RECORDS" '/^time:/ { printf "%.0f\n", n / $2 }'
}
echo "kura-table vs Tokyo Cabinet $(dpkg-query -W -f '${Version}' tokyocabinet-bin 2>/dev/null), $RECORDS records x $WIDTH B, one thread, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
: >"$DIR/results"
for round in $(seq "$ROUNDS"); do
  for order in seq rnd; do
    flag=""; [[ $order == rnd ]] && flag="-rnd"
    tc=$(tc_rate $flag)
    k=$("$KURA" "$DIR/kura.ktbl" "$RECORDS" "$WIDTH" "$READS" "$order")
    m=$("$KURA" mem "$RECORDS" "$WIDTH" "$READS" "$order")
    printf '  round %s %-3s  tokyocabinet %12s reads/s   kura %12s reads/s   kura in memory %12s reads/s\n' "$round" "$order" "$tc" "$k" "$m"
    printf '%s %s %s %s\n' "$order" "$tc" "$k" "$m" >>"$DIR/results"
    if [[ $order == rnd ]]; then
      # The same random ids, 16 per get_many call (a multi-get), against
      # Tokyo Cabinet's one-at-a-time random reads of this round.
      k=$("$KURA" "$DIR/kura.ktbl" "$RECORDS" "$WIDTH" "$READS" batch)
      m=$("$KURA" mem "$RECORDS" "$WIDTH" "$READS" batch)
      printf '  round %s %-5s                                kura %12s reads/s   kura in memory %12s reads/s\n' "$round" batch "$k" "$m"
      printf '%s %s %s %s\n' batch "$tc" "$k" "$m" >>"$DIR/results"
    fi
  done
done
python3 - "$DIR/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for order, name in (("seq", "ids in order"), ("rnd", "random ids"), ("batch", "random, x16")):
    tc = statistics.median(float(r[1]) for r in rows if r[0] == order)
    k = statistics.median(float(r[2]) for r in rows if r[0] == order)
    m = statistics.median(float(r[3]) for r in rows if r[0] == order)
    print(f"{name:13} tokyocabinet {tc/1e6:7.2f}M/s   kura file {k/1e6:7.2f}M/s ({k/tc:5.1f}x)   kura in memory {m/1e6:7.2f}M/s ({m/tc:5.1f}x)")
PY
