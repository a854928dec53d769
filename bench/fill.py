#!/usr/bin/env python3
"""Sets KEYS distinct keys once each on a memcached-protocol server, for
bench/full-cache.sh's sizes that `kura bench` cannot make (values under 16
bytes, a log-normal mix of sizes).

    bench/fill.py PORT KEYS SIZE [CONNS]

SIZE is a value size in bytes, or lognormal:MEDIAN:SIGMA (sizes drawn from
a log-normal distribution with that median and shape, at least 1 byte and at
most 512 KiB, seeded: both servers get the same sequence). Keys are as
`kura bench` makes them ("key:" and the number, zero-padded to the width of
KEYS - 1), client flags 1, no expiry.

The keys are split into CONNS (default 4) contiguous ranges, one connection
each, so that every worker thread of the server takes sets (one connection
kept one worker busy and the other idle: 4,000,000 sets of 10 bytes did not
finish in 8 minutes on a loaded machine). On each connection the sets are
pipelined with noreply in batches of about 1 MiB, then a `version` waits
until the server has read them all. Each connection is a process of its
own (no shared interpreter lock). Prints the bytes of values sent and the
error replies.
"""
import math
import multiprocessing
import random
import socket
import sys
import threading

# A server that stops reading (or answering) for this long fails the fill.
TIMEOUT_S = 600


def sizes(keys, size):
    """The value sizes of keys 0..KEYS-1, the same for every run."""
    if not size.startswith("lognormal:"):
        return [int(size)] * keys
    _, median, sigma = size.split(":")
    rng = random.Random(44)
    mu, sigma = math.log(float(median)), float(sigma)
    return [max(1, min(512 * 1024, int(rng.lognormvariate(mu, sigma)))) for _ in range(keys)]


def fill(port, width, first, lens, out):
    """Sets keys first.. with the value lengths `lens` over one connection;
    puts (bytes sent, error replies) on `out`."""
    value = b"v" * max(lens, default=1)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(TIMEOUT_S)
    done = threading.Event()
    replies = bytearray()

    def read():
        # Noreply sets answer nothing, but errors may come back: drain them
        # so the server never blocks writing, until the version's reply.
        while not done.is_set():
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            replies.extend(chunk)
            if b"VERSION" in replies[-200:]:
                done.set()

    reader = threading.Thread(target=read)
    reader.start()
    batch, pending, sent = [], 0, 0
    for i, n in enumerate(lens, start=first):
        batch.append(b"set key:%0*d 1 0 %d noreply\r\n%s\r\n" % (width, i, n, value[:n]))
        pending += n + 40
        sent += n
        if pending > 1 << 20:
            s.sendall(b"".join(batch))
            batch, pending = [], 0
    s.sendall(b"".join(batch) + b"version\r\n")
    reader.join()
    s.close()
    if not done.is_set():
        sys.exit(f"connection for keys from {first}: no reply to version")
    out.put((sent, bytes(replies).count(b"ERROR")))


def main():
    port, keys, size = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    conns = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    lens = sizes(keys, size)
    width = len(str(max(keys - 1, 0)))
    out = multiprocessing.Queue()
    step = -(-keys // conns)
    procs = [
        multiprocessing.Process(target=fill, args=(port, width, a, lens[a : a + step], out))
        for a in range(0, keys, step)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a filler failed ({p.exitcode})")
    print(sum(r[0] for r in results), sum(r[1] for r in results))


if __name__ == "__main__":
    main()
