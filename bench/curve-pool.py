#!/usr/bin/env python3
"""Pools several bench/curve.sh runs (their OUT directories) step by step; curve.sh itself
calls it on its one run for the paired figures.

Each run sweeps 10%, 20%, ... 90% of its own lower saturation, so step i of one run and step i
of another are the same fraction of load even where the rates differ. Per step and figure
(mean, p99, p99.9): the median over every pooled round of kura/memcached, and in how many rounds
kura was the lower. Runs made with AA=1 (a second memcached in kura's place) are pooled apart,
as the control: what two identical servers give on the same machine with the same rounds.

    bench/curve-pool.py LOAD DIR [DIR ...]     # LOAD: mixed or sets; AA runs are told by
                                               # an "aa1" in their directory name
"""
import glob
import json
import os
import statistics
import sys


def pairs(directory, load):
    """The (memcached, kura) report pairs of one run, round by round."""
    out = []
    for mem in sorted(glob.glob(os.path.join(directory, f"{load}-memcached-*.json"))):
        tail = mem.rsplit("-", 1)[1]
        if tail == "median.json":
            continue
        kura = os.path.join(directory, f"{load}-kura-{tail}")
        if not os.path.exists(kura):
            continue
        try:
            out.append((json.load(open(mem)), json.load(open(kura))))
        except ValueError as e:
            # A round still being written (a run in progress) or cut short.
            print(f"skipped {kura}: {e}", file=sys.stderr)
    return out


def table(title, rounds):
    if not rounds:
        return
    steps = min(len(m["runs"]) for m, _ in rounds)
    print(f"{title}: {len(rounds)} rounds")
    print(f"{'step':>5}  " + "  ".join(f"{n:>22}" for n in ("mean", "p99", "p99.9")))
    lower_all = {n: 0 for n in ("mean", "p99", "p999")}
    for i in range(steps):
        cells = []
        for name in ("mean", "p99", "p999"):
            ks = [(k["runs"][i]["latency_us"][name], m["runs"][i]["latency_us"][name])
                  for m, k in rounds]
            lower = sum(k < m for k, m in ks)
            lower_all[name] += lower
            ratio = statistics.median(k / m for k, m in ks if m > 0)
            cells.append(f"{ratio:>6.2f}x lower {lower:>2}/{len(ks):<2}   ")
        print(f"{(i + 1) * 10:>4}%  " + "  ".join(f"{c:>22}" for c in cells))
    n = steps * len(rounds)
    print("  all steps: lower in " + ", ".join(
        f"{name} {lo}/{n} ({100 * lo / n:.0f}%)" for name, lo in lower_all.items()))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("mixed", "sets"):
        sys.exit(__doc__)
    load, dirs = sys.argv[1], sys.argv[2:]
    control = [p for d in dirs if "aa1" in os.path.basename(d.rstrip("/")) for p in pairs(d, load)]
    test = [p for d in dirs if "aa1" not in os.path.basename(d.rstrip("/")) for p in pairs(d, load)]
    table(f"{load}: kura / memcached", test)
    table(f"{load}: A/A control, memcached / memcached", control)


main()
