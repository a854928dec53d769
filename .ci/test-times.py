#!/usr/bin/env python3
"""Wall-clock time of each crate's tests in a `cargo test --workspace` log.

Usage: .ci/test-times.py LOG [--fill TESTING.md]

Sums the `finished in Xs` of every test binary (unit tests, integration tests,
doc tests) per crate. cargo names a binary by its file (`tests/wire.rs`), not
its crate: a name found in one crate's tests/ is that crate's; a name found in
several goes with the crate of the binary before it (cargo runs a package's
binaries together). With --fill, replaces each `TIME_<crate>` in the file by
the crate's time.
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def owners():
    by_name = {}
    for path in glob.glob(os.path.join(ROOT, "crates", "*", "tests", "*.rs")):
        crate = path.split(os.sep)[-3]
        name = os.path.basename(path)[:-3]
        by_name.setdefault(name, set()).add(crate)
    return by_name


def times(log):
    by_name = owners()
    crate, current, totals = None, None, {}
    for line in open(log, encoding="utf-8", errors="replace"):
        m = re.search(r"Running unittests \S+ \(.*?deps/([a-z0-9_]+)-[0-9a-f]+\)", line)
        if m:
            current = m.group(1).replace("_", "-")
            crate = current
            continue
        m = re.search(r"Running tests/([A-Za-z0-9_]+)\.rs", line)
        if m:
            found = by_name.get(m.group(1), set())
            if len(found) == 1:
                current = next(iter(found))
            elif crate in found:
                current = crate
            else:
                current = sorted(found)[0] if found else crate
            crate = current
            continue
        m = re.search(r"Doc-tests ([a-z0-9_]+)", line)
        if m:
            current = m.group(1).replace("_", "-")
            crate = current
            continue
        m = re.search(r"test result: .*finished in ([0-9.]+)s", line)
        if m and current:
            totals[current] = totals.get(current, 0.0) + float(m.group(1))
    return totals


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    totals = times(sys.argv[1])
    for crate, secs in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"{crate}\t{secs:.0f} s")
    if len(sys.argv) == 4 and sys.argv[2] == "--fill":
        path = sys.argv[3]
        text = open(path, encoding="utf-8").read()
        for crate, secs in totals.items():
            shown = f"{secs:.0f} s" if secs >= 1 else "<1 s"
            text = text.replace(f"TIME_{crate} ", f"{shown} ")
        open(path, "w", encoding="utf-8").write(text)


if __name__ == "__main__":
    main()
