#!/usr/bin/env python3
"""Sets KEYS distinct keys once each on a memcached-protocol server, for
bench/full-cache.sh's sizes that `kura bench` cannot make (values under 16
bytes, a log-normal mix of sizes).

    bench/fill.py PORT KEYS SIZE

SIZE is a value size in bytes, or lognormal:MEDIAN:SIGMA (sizes drawn from
a log-normal distribution with that median and shape, at least 1 byte and at
most 512 KiB, seeded: both servers get the same sequence). Keys are as
`kura bench` makes them ("key:" and the number, zero-padded to the width of
KEYS - 1), client flags 1, no expiry; the sets are pipelined with noreply,
then a `version` waits until the server has read them all. Prints the bytes
of values sent.
"""
import random
import socket
import sys
import threading

port, keys, size = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if size.startswith("lognormal:"):
    _, median, sigma = size.split(":")
    rng = random.Random(44)
    mu, sigma = __import__("math").log(float(median)), float(sigma)

    def next_size():
        return max(1, min(512 * 1024, int(rng.lognormvariate(mu, sigma))))

else:
    fixed = int(size)

    def next_size():
        return fixed


value = b"v" * (512 * 1024)
width = len(str(max(keys - 1, 0)))
s = socket.create_connection(("127.0.0.1", port))
done = threading.Event()
replies = bytearray()


def read():
    # Noreply sets answer nothing, but errors may come back: drain them so
    # the server never blocks writing, until the version's reply.
    while not done.is_set():
        chunk = s.recv(65536)
        if not chunk:
            break
        replies.extend(chunk)
        if b"VERSION" in replies[-200:]:
            done.set()


reader = threading.Thread(target=read)
reader.start()
batch, pending, sent = [], 0, 0
for i in range(keys):
    n = next_size()
    batch.append(b"set key:%0*d 1 0 %d noreply\r\n%s\r\n" % (width, i, n, value[:n]))
    pending += n + 40
    sent += n
    if pending > 1 << 20:
        s.sendall(b"".join(batch))
        batch, pending = [], 0
s.sendall(b"".join(batch) + b"version\r\n")
reader.join()
errors = bytes(replies).count(b"ERROR")
print(sent, errors)
