#!/usr/bin/env python3
"""Compatibility test: pylibmc (PyPI; libmemcached underneath).

Usage: pylibmc_test.py [--host 127.0.0.1] --port PORT [--binary]

Uses the ASCII protocol, or with --binary libmemcached's binary protocol.  Every check is an assertion; each test
prints PASS/FAIL and the script exits non-zero if any test fails.
"""

import argparse
import os
import sys
import time
import traceback

import pylibmc

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def new_client(args, **behaviors):
    b = {"tcp_nodelay": True, "cas": True, "connect_timeout": 5000,
         "receive_timeout": 10_000_000, "send_timeout": 10_000_000}
    b.update(behaviors)
    return pylibmc.Client(["%s:%d" % (args.host, args.port)], binary=args.binary, behaviors=b)


@test
def stats_and_flush(c, args):
    stats = c.get_stats()
    assert len(stats) == 1, stats
    _, st = stats[0]
    for name in ("pid", "uptime", "curr_items", "cmd_get", "cmd_set", "version"):
        assert name in st, (name, sorted(st))
    assert c.flush_all() is True


@test
def set_get(c, args):
    assert c.set("pl:a", b"hello") is True
    assert c.get("pl:a") == b"hello"
    assert c.get("pl:missing") is None
    assert c.set("pl:a", b"world") is True
    assert c.get("pl:a") == b"world"
    assert c.set("pl:empty", b"") is True
    assert c.get("pl:empty") == b""
    # pylibmc's own serialisation uses the client flags
    objs = {"pl:int": 42, "pl:long": 2 ** 62, "pl:str": "text ✓",
            "pl:obj": {"a": [1, 2.5, None]}}
    for k, v in objs.items():
        assert c.set(k, v) is True, k
    for k, v in objs.items():
        got = c.get(k)
        assert got == v and type(got) is type(v), (k, v, got)
    every_byte = bytes(range(256)) * 4 + b"\r\nEND\r\n"
    assert c.set("pl:bin", every_byte) is True
    assert c.get("pl:bin") == every_byte
    big = os.urandom(1024 * 1024 - 1024)
    assert c.set("pl:big", big) is True
    assert c.get("pl:big") == big


@test
def get_multi_set_multi(c, args):
    data = {"plm:%d" % i: ("value-%d" % i).encode() for i in range(300)}
    assert c.set_multi(data) == []
    got = c.get_multi(list(data) + ["plm:missing"])
    assert got == data, (len(got), len(data))
    # key_prefix
    assert c.set_multi({"a": b"1", "b": b"2"}, key_prefix="plm:pfx:") == []
    assert c.get("plm:pfx:a") == b"1"
    assert c.get_multi(["a", "b", "c"], key_prefix="plm:pfx:") == {"a": b"1", "b": b"2"}
    assert c.delete_multi(["plm:1", "plm:2"]) is True
    assert c.get_multi(["plm:1", "plm:2", "plm:3"]) == {"plm:3": b"value-3"}



@test
def multi_get_of_thousands_of_values(c, args):
    # Replies of thousands of values, small and large (9-20 KB, sent by
    # handle): kura once closed the connection on these, and the client
    # then returned nothing at all.
    for prefix, count, size in (("mgs", 20000, lambda i: 1 + i % 100),
                                ("mgl", 2000, lambda i: 9000 + (i * 37) % 11000)):
        data = {}
        for i in range(count):
            tag = ("%s%d-" % (prefix, i)).encode()
            n = size(i)
            data["%s:%d" % (prefix, i)] = (tag * (n // len(tag) + 1))[:n]
        failed = c.set_multi(data)
        assert not failed, (prefix, len(failed))
        got = c.get_multi(list(data))
        assert len(got) == count, (prefix, len(got), count)
        assert got == data, prefix


@test
def incr_decr(c, args):
    assert c.set("pl:n", b"10") is True
    assert c.incr("pl:n") == 11
    assert c.incr("pl:n", 9) == 20
    assert c.decr("pl:n", 5) == 15
    assert c.decr("pl:n", 100) == 0
    try:
        c.incr("pl:n-missing")
    except pylibmc.NotFound:
        pass
    else:
        raise AssertionError("incr of a missing key did not raise NotFound")
    assert c.set("pl:n2", b"1") is True
    c.incr_multi(["pl:n", "pl:n2"], delta=5)
    assert int(c.get("pl:n")) == 5 and int(c.get("pl:n2")) == 6, (c.get("pl:n"), c.get("pl:n2"))


@test
def delete(c, args):
    assert c.set("pl:d", b"x") is True
    assert c.delete("pl:d") is True
    assert c.get("pl:d") is None
    assert c.delete("pl:d") is False


@test
def add_replace_append_prepend(c, args):
    c.delete("pl:ar")
    if args.binary:
        # The binary protocol answers "key not found", which libmemcached
        # raises (memcached does the same).
        try:
            c.replace("pl:ar", b"r")
            raise AssertionError("replace of a missing key succeeded")
        except pylibmc.NotFound:
            pass
    else:
        assert c.replace("pl:ar", b"r") is False
    assert c.get("pl:ar") is None
    assert c.add("pl:ar", b"a1") is True
    assert c.add("pl:ar", b"a2") is False
    assert c.get("pl:ar") == b"a1"
    assert c.replace("pl:ar", b"r1") is True
    assert c.get("pl:ar") == b"r1"
    assert c.append("pl:ar", b">") is True
    assert c.prepend("pl:ar", b"<") is True
    assert c.get("pl:ar") == b"<r1>"
    assert c.add_multi({"pl:am1": b"1", "pl:ar": b"no"}) == ["pl:ar"]
    assert c.get("pl:am1") == b"1"


@test
def cas_via_gets(c, args):
    assert c.set("pl:cas", b"v1") is True
    val, token = c.gets("pl:cas")
    assert val == b"v1" and isinstance(token, int) and token > 0, (val, token)
    assert c.cas("pl:cas", b"v2", token) is True
    assert c.get("pl:cas") == b"v2"
    assert c.cas("pl:cas", b"v3", token) is False  # stale token: EXISTS
    assert c.get("pl:cas") == b"v2"
    val2, token2 = c.gets("pl:cas")
    assert val2 == b"v2" and token2 != token
    assert c.gets("pl:cas-missing") == (None, None)


@test
def touch_and_expiry(c, args):
    assert c.set("pl:t", b"v", time=1) is True
    assert c.set("pl:t2", b"v", time=1) is True
    assert c.touch("pl:t2", 100) is True
    assert c.touch("pl:t-missing", 100) is False
    time.sleep(2.5)
    assert c.get("pl:t") is None
    assert c.get("pl:t2") == b"v"


@test
def too_big(c, args):
    # libmemcached sends the value; the server rejects it with SERVER_ERROR
    try:
        c.set("pl:toobig", b"x" * (1024 * 1024 + 100))
    except (pylibmc.TooBig, pylibmc.ServerError, pylibmc.Error):
        pass
    else:
        raise AssertionError("a value over 1 MB was accepted")
    # the client is still usable afterwards
    assert c.set("pl:after-toobig", b"ok") is True
    assert c.get("pl:after-toobig") == b"ok"
    assert c.get("pl:toobig") is None


@test
def noreply(c, args):
    # libmemcached's noreply behaviour: storage commands and deletes carry
    # "noreply" and the client does not wait (pylibmc reports success)
    nr = new_client(args, _noreply=True)
    try:
        for i in range(2000):
            nr.set("plnr:%d" % i, b"v%d" % i)
        nr.delete("plnr:0")
        nr.append("plnr:1", b"+")
        nr.add("plnr:2", b"not stored")
        # a retrieval on the same connection comes after all of the above
        assert nr.get("plnr:1999") == b"v1999"
        assert nr.get("plnr:1") == b"v1+"
    finally:
        nr.disconnect_all()
    want = {"plnr:%d" % i: b"v%d" % i for i in range(2, 2000)}
    want["plnr:1"] = b"v1+"
    got = c.get_multi(["plnr:%d" % i for i in range(2000)])
    missing = sorted(set(want) - set(got))
    wrong = sorted(k for k in want if k in got and got[k] != want[k])
    assert "plnr:0" not in got, "noreply delete not applied"
    assert not missing and not wrong, (missing[:5], wrong[:5])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--binary", action="store_true", help="use the binary protocol")
    args = ap.parse_args()

    print("pylibmc %s (libmemcached %s), text protocol"
          % (pylibmc.__version__, pylibmc.libmemcached_version))
    failed = 0
    for fn in TESTS:
        c = new_client(args)
        t0 = time.monotonic()
        try:
            fn(c, args)
        except Exception:  # noqa: BLE001
            failed += 1
            print("  [FAIL] pylibmc %s" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
        else:
            print("  [pass] pylibmc %s (%.2fs)" % (fn.__name__, time.monotonic() - t0))
        finally:
            c.disconnect_all()
    print("pylibmc: %d/%d tests passed" % (len(TESTS) - failed, len(TESTS)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
