#!/usr/bin/env python3
"""Durability with real clients: pymemcache writes, the server is killed with
SIGKILL, and pylibmc (libmemcached) reads everything back from the restarted
server.

Usage: durable_test.py write --port PORT --state FILE
       durable_test.py verify --port PORT --state FILE

`write` records what each key must hold in FILE (JSON); `verify` checks it.
The server must run with --data-dir and --fsync always (every acknowledged
write is on disk before its reply).
"""

import argparse
import json
import sys


def write(args):
    from pymemcache.client.base import Client

    c = Client(("127.0.0.1", args.port), default_noreply=False, no_delay=True,
               connect_timeout=5, timeout=10)
    want = {}
    for i in range(2000):
        k = f"durable:{i}"
        v = f"value-{i}-" + "x" * (i % 300)
        assert c.set(k, v.encode(), expire=0)
        want[k] = v
    assert c.append("durable:1", b"+appended")
    want["durable:1"] += "+appended"
    assert c.prepend("durable:2", b"prepended+")
    want["durable:2"] = "prepended+" + want["durable:2"]
    assert c.set("durable:counter", b"100")
    assert c.incr("durable:counter", 23) == 123
    assert c.decr("durable:counter", 3) == 120
    want["durable:counter"] = "120"
    assert c.delete("durable:3")
    del want["durable:3"]
    value, cas = c.gets("durable:4")
    assert c.cas("durable:4", b"swapped", cas)
    want["durable:4"] = "swapped"
    assert c.set("durable:ttl", b"lives", expire=3600)
    want["durable:ttl"] = "lives"
    assert c.touch("durable:5", expire=3600)
    assert c.set("durable:gone-soon", b"x", expire=1)
    c.close()
    with open(args.state, "w") as f:
        json.dump(want, f)
    print(f"wrote {len(want)} keys")


def verify(args):
    import pylibmc

    with open(args.state) as f:
        want = json.load(f)
    c = pylibmc.Client([f"127.0.0.1:{args.port}"])
    got = c.get_multi(list(want.keys()))
    bad = [k for k, v in want.items() if got.get(k) != v.encode()]
    for k in bad[:10]:
        print(f"FAIL {k}: want {want[k][:40]!r}, got {got.get(k)!r:.60}")
    if c.get("durable:3") is not None:
        print("FAIL durable:3 was deleted and came back")
        bad.append("durable:3")
    print(f"{len(want) - len(bad)} of {len(want)} keys as written")
    sys.exit(1 if bad else 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("phase", choices=["write", "verify"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--state", required=True)
    args = p.parse_args()
    write(args) if args.phase == "write" else verify(args)


if __name__ == "__main__":
    main()
