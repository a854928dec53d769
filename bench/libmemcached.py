#!/usr/bin/env python3
"""libmemcached on kura-client's throughput load (bench/client.sh).

The load of crates/kura-client/examples/throughput.rs: one connection, one
request at a time, gets of 100-byte values and then sets, over 1,024 keys
of 16 bytes. One round per call, so that client.sh can alternate it with
the Rust clients; `median` then folds the rounds.

  libmemcached.py pylibmc ADDR REQUESTS    # pylibmc 1.6.3: libmemcached under CPython
  libmemcached.py memcaslap ADDR REQUESTS  # Debian's memcaslap (C, libmemcached's tools)
  libmemcached.py median < lines           # medians per name, ratios to kura-client

Each prints `NAME<TAB>R req/s<TAB>C us CPU/request`: CPU is the client
process's user + system time (getrusage) over the requests made. pylibmc's
includes the Python interpreter's loop and calls; memcaslap's includes its
own load generation (keys, values, statistics) and its warm-up: with gets
it first sets its 1,024-key window, counted in its operations.
"""
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

KEYS = 1024


def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def line(name, n, wall, used):
    print(f"{name}\t{n / wall:.0f} req/s\t{used * 1e6 / n:.2f} us CPU/request", flush=True)


def run_pylibmc(addr, n):
    import pylibmc

    c = pylibmc.Client([addr], behaviors={"tcp_nodelay": True})
    keys = [f"tp:key:{i:09d}" for i in range(KEYS)]
    value = b"v" * 100
    for k in keys:
        c.set(k, value)
    name = f"pylibmc {pylibmc.__version__} (libmemcached {pylibmc.libmemcached_version}, text)"
    t, u = time.perf_counter(), cpu(resource.RUSAGE_SELF)
    for i in range(n):
        if c.get(keys[i % KEYS]) is None:
            sys.exit("pylibmc: a get missed")
    line(f"{name}, get", n, time.perf_counter() - t, cpu(resource.RUSAGE_SELF) - u)
    t, u = time.perf_counter(), cpu(resource.RUSAGE_SELF)
    for i in range(n):
        c.set(keys[i % KEYS], value)
    line(f"{name}, set", n, time.perf_counter() - t, cpu(resource.RUSAGE_SELF) - u)


def run_memcaslap(addr, n):
    for op, props in (("get", "0 0\n1 1\n"), ("set", "0 1\n1 0\n")):
        with tempfile.NamedTemporaryFile("w", suffix=".cnf") as cfg:
            cfg.write(f"key\n16 16 1\nvalue\n100 100 1\ncmd\n{props}")
            cfg.flush()
            u = cpu(resource.RUSAGE_CHILDREN)
            out = subprocess.run(
                ["memcaslap", "-s", addr, "-T", "1", "-c", "1", "-w", "1k",
                 "-x", str(n), "-F", cfg.name],
                capture_output=True, text=True, timeout=300, check=True,
            ).stdout
            used = cpu(resource.RUSAGE_CHILDREN) - u
        m = re.search(r"Run time: \S+ Ops: (\d+) TPS: (\d+)", out)
        if not m:
            sys.exit(f"memcaslap: no summary in\n{out}")
        ops, tps = int(m.group(1)), int(m.group(2))
        if op == "get" and not re.search(r"get_misses: 0\b", out):
            sys.exit(f"memcaslap: gets missed\n{out}")
        print(f"memcaslap (libmemcached tools, text), {op}\t{tps} req/s\t"
              f"{used * 1e6 / ops:.2f} us CPU/request", flush=True)


def median():
    rows = {}
    for raw in sys.stdin:
        m = re.match(r"(.*)\t([\d.]+) req/s\t([\d.]+) us CPU/request", raw.rstrip("\n"))
        if m:
            rows.setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(3))))
    med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v), len(v))
           for k, v in rows.items()}
    for k, (rate, c, n) in med.items():
        print(f"{k}\t{rate:.0f} req/s\t{c:.2f} us CPU/request (median of {n})")
    # each client's get and set against kura-client meta's, same server
    for k, (rate, c, _) in med.items():
        kind, _, rest = k.partition("\t")
        op = rest.rsplit(", ", 1)[-1]
        ours = med.get(f"{kind}\tkura-client meta, {op}")
        if ours and "kura-client" not in rest:
            print(f"{kind}\tkura-client meta / {rest}\treq/s {ours[0] / rate:.2f}x"
                  f"\tCPU/request {ours[1] / c:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["median"]:
        median()
    elif len(sys.argv) == 4 and sys.argv[1] == "pylibmc":
        run_pylibmc(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 4 and sys.argv[1] == "memcaslap":
        run_memcaslap(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
