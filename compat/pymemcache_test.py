#!/usr/bin/env python3
"""Compatibility test: pymemcache (PyPI) against a memcached-compatible server.

Usage: pymemcache_test.py [--host 127.0.0.1] --port PORT

Every check is an assertion; each test prints PASS/FAIL and the script exits
non-zero if any test fails.  The server is flushed first.
"""

import argparse
import os
import sys
import threading
import time
import traceback

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError, MemcacheServerError

ONE_MB = 1024 * 1024

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def new_client(args, **kw):
    # default_noreply=False: every storage command waits for its reply unless a
    # test asks for noreply explicitly.  no_delay: a noreply write followed by a
    # request would otherwise wait on Nagle + delayed ACK (40 ms each time).
    return Client((args.host, args.port), default_noreply=False, no_delay=True,
                  connect_timeout=5, timeout=10, **kw)


class FlagsSerde:
    """Stores bytes as given; reads back (value, flags)."""

    def serialize(self, key, value):
        return value, 0

    def deserialize(self, key, value, flags):
        return value, flags


@test
def version_and_stats(c, args):
    v = c.version()
    assert v and isinstance(v, bytes), v
    st = c.stats()
    for name in (b"pid", b"uptime", b"curr_items", b"cmd_get", b"cmd_set",
                 b"get_hits", b"get_misses", b"limit_maxbytes", b"threads"):
        assert name in st, (name, sorted(st))
    assert c.flush_all(noreply=False) is True


@test
def set_get(c, args):
    assert c.set("sg:a", b"hello") is True
    assert c.get("sg:a") == b"hello"
    assert c.get("sg:missing") is None
    assert c.get("sg:missing", default=b"dflt") == b"dflt"
    # overwrite
    assert c.set("sg:a", b"world") is True
    assert c.get("sg:a") == b"world"
    # empty value
    assert c.set("sg:empty", b"") is True
    assert c.get("sg:empty") == b""
    # client flags round-trip (32-bit), seen through a serde that returns them
    fc = new_client(args, serde=FlagsSerde())
    try:
        for flags in (0, 1, 42, 2 ** 16, 2 ** 32 - 1):
            assert fc.set("sg:flags", b"v", flags=flags) is True
            assert fc.get("sg:flags") == (b"v", flags), (flags, fc.get("sg:flags"))
    finally:
        fc.close()
    # a 250-byte key is the longest allowed
    k = "k" * 250
    assert c.set(k, b"long key") is True
    assert c.get(k) == b"long key"


@test
def serde_python_objects(c, args):
    # pymemcache's python_memcache serde encodes the type in the client flags
    from pymemcache import serde
    pc = new_client(args, serde=serde.pickle_serde)
    try:
        objs = {"obj:int": 42, "obj:str": "text ✓", "obj:dict": {"a": [1, 2, 3]},
                "obj:bytes": b"raw", "obj:bigint": 2 ** 70}
        assert pc.set_many(objs) == []
        assert pc.get_many(list(objs)) == objs
    finally:
        pc.close()


@test
def get_many_set_many(c, args):
    data = {"gm:%d" % i: ("value-%d" % i).encode() for i in range(100)}
    failed = c.set_many(data)
    assert failed == [], failed
    got = c.get_many(list(data) + ["gm:missing1", "gm:missing2"])
    assert got == data, (len(got), len(data))
    assert c.get_many([]) == {}
    # gets_many returns (value, cas) pairs
    gm = c.gets_many(["gm:1", "gm:2", "gm:missing"])
    assert set(gm) == {"gm:1", "gm:2"}, gm
    assert gm["gm:1"][0] == b"value-1" and gm["gm:1"][1].isdigit()


@test
def cas(c, args):
    assert c.set("cas:k", b"v1") is True
    val, token = c.gets("cas:k")
    assert val == b"v1" and token and token.isdigit(), (val, token)
    # successful cas
    assert c.cas("cas:k", b"v2", token) is True
    assert c.get("cas:k") == b"v2"
    # the old token is now stale: cas must fail with EXISTS -> False
    assert c.cas("cas:k", b"v3", token) is False
    assert c.get("cas:k") == b"v2"
    # a fresh token works again and differs from the old one
    val2, token2 = c.gets("cas:k")
    assert val2 == b"v2" and token2 != token, (token, token2)
    assert c.cas("cas:k", b"v4", token2) is True
    assert c.get("cas:k") == b"v4"
    # cas on a missing key: NOT_FOUND -> None
    assert c.cas("cas:missing", b"x", b"12345") is None
    # gets on a missing key
    assert c.gets("cas:missing") == (None, None)
    # any modification changes the cas unique
    _, t1 = c.gets("cas:k")
    assert c.append("cas:k", b"!") is True
    _, t2 = c.gets("cas:k")
    assert t1 != t2
    assert c.cas("cas:k", b"nope", t1) is False



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
        failed = c.set_many(data)
        assert not failed, (prefix, len(failed))
        got = c.get_many(list(data))
        assert len(got) == count, (prefix, len(got), count)
        assert got == data, prefix


@test
def incr_decr(c, args):
    assert c.set("n:k", b"10") is True
    assert c.incr("n:k", 5) == 15
    assert c.decr("n:k", 3) == 12
    assert c.get("n:k") == b"12"
    # decr stops at 0
    assert c.decr("n:k", 100) == 0
    # memcached overwrites in place and pads a shorter number with spaces
    assert c.get("n:k").rstrip(b" ") == b"0"
    # incr wraps at 2**64
    assert c.set("n:big", str(2 ** 64 - 1).encode()) is True
    assert c.incr("n:big", 1) == 0
    assert c.set("n:big", str(2 ** 64 - 2).encode()) is True
    assert c.incr("n:big", 1) == 2 ** 64 - 1
    # incr growing the length of the number
    assert c.set("n:grow", b"99") is True
    assert c.incr("n:grow", 1) == 100
    assert c.get("n:grow") == b"100"
    # decr shrinking it (memcached pads with spaces when the length shrinks;
    # the number read back must still be 9)
    assert c.decr("n:grow", 91) == 9
    assert c.get("n:grow").rstrip(b" ") == b"9"
    # missing key: NOT_FOUND -> None
    assert c.incr("n:missing", 1) is None
    assert c.decr("n:missing", 1) is None
    # non-numeric value is a client error
    assert c.set("n:text", b"abc") is True
    try:
        c.incr("n:text", 1)
    except MemcacheClientError as e:
        assert b"non-numeric" in str(e).encode() or "non-numeric" in str(e), e
    else:
        raise AssertionError("incr on a non-numeric value did not raise")
    # noreply incr/decr
    assert c.set("n:nr", b"1") is True
    assert c.incr("n:nr", 41, noreply=True) is None
    assert c.decr("n:nr", 2, noreply=True) is None
    assert c.get("n:nr").rstrip(b" ") == b"40"


@test
def touch_and_expiry(c, args):
    assert c.set("t:k", b"v", expire=1) is True
    assert c.set("t:keep", b"v", expire=1) is True
    assert c.touch("t:keep", expire=100) is True
    assert c.touch("t:missing", expire=100) is False
    time.sleep(2.5)
    assert c.get("t:k") is None, "item with expire=1 still there after 2.5 s"
    assert c.get("t:keep") == b"v", "touched item expired"
    # negative expiry: immediately expired
    assert c.set("t:neg", b"v", expire=-1) is True
    assert c.get("t:neg") is None
    # touch noreply
    assert c.set("t:nr", b"v", expire=1) is True
    assert c.touch("t:nr", expire=100, noreply=True) is True
    time.sleep(2.2)
    assert c.get("t:nr") == b"v"


@test
def delete(c, args):
    assert c.set("d:k", b"v") is True
    assert c.delete("d:k") is True
    assert c.get("d:k") is None
    assert c.delete("d:k") is False
    assert c.set_many({"d:a": b"1", "d:b": b"2"}) == []
    assert c.delete_many(["d:a", "d:b", "d:missing"]) is True
    assert c.get_many(["d:a", "d:b"]) == {}


@test
def add_replace(c, args):
    c.delete("ar:k")
    assert c.replace("ar:k", b"r") is False
    assert c.get("ar:k") is None
    assert c.add("ar:k", b"a1") is True
    assert c.add("ar:k", b"a2") is False
    assert c.get("ar:k") == b"a1"
    assert c.replace("ar:k", b"r1") is True
    assert c.get("ar:k") == b"r1"


@test
def append_prepend(c, args):
    c.delete("ap:k")
    assert c.append("ap:k", b"x") is False
    assert c.prepend("ap:k", b"x") is False
    assert c.get("ap:k") is None
    assert c.set("ap:k", b"mid") is True
    assert c.append("ap:k", b">>") is True
    assert c.prepend("ap:k", b"<<") is True
    assert c.get("ap:k") == b"<<mid>>"


@test
def noreply_variants(c, args):
    for k in ("nr:set", "nr:add", "nr:rep", "nr:app", "nr:pre", "nr:del"):
        c.delete(k)
    assert c.set("nr:set", b"s", noreply=True) is True
    assert c.add("nr:add", b"a", noreply=True) is True
    assert c.add("nr:add", b"IGNORED", noreply=True) is True  # NOT_STORED, silently
    assert c.set("nr:rep", b"old") is True
    assert c.replace("nr:rep", b"new", noreply=True) is True
    assert c.replace("nr:rep-missing", b"x", noreply=True) is True
    assert c.set("nr:app", b"a") is True
    assert c.append("nr:app", b"b", noreply=True) is True
    assert c.set("nr:pre", b"b") is True
    assert c.prepend("nr:pre", b"a", noreply=True) is True
    assert c.set("nr:del", b"x") is True
    assert c.delete("nr:del", noreply=True) is True
    assert c.set_many({"nr:m1": b"1", "nr:m2": b"2"}, noreply=True) == []
    _, tok = c.gets("nr:set")
    assert c.cas("nr:set", b"s2", tok, noreply=True) is True
    assert c.cas("nr:set", b"s3", tok, noreply=True) is True  # EXISTS, silently
    # everything above was written without waiting; the next request on the same
    # connection must see all of it, and no stray reply may be left in the stream
    got = c.get_many(["nr:set", "nr:add", "nr:rep", "nr:rep-missing", "nr:app",
                      "nr:pre", "nr:del", "nr:m1", "nr:m2"])
    assert got == {"nr:set": b"s2", "nr:add": b"a", "nr:rep": b"new", "nr:app": b"ab",
                   "nr:pre": b"ab", "nr:m1": b"1", "nr:m2": b"2"}, got
    # a flush with noreply, then a normal request still gets its own reply
    assert c.flush_all(noreply=True) is True
    assert c.get("nr:set") is None
    assert c.set("nr:after", b"ok") is True
    assert c.get("nr:after") == b"ok"


@test
def binary_safe_values(c, args):
    every_byte = bytes(range(256))
    values = {
        "bin:all": every_byte * 4,
        "bin:crlf": b"\r\n",
        "bin:endmarker": b"x\r\nEND\r\nVALUE bin:fake 0 1\r\ny\r\n",
        "bin:nul": b"\x00" * 100,
        "bin:utf8": "蔵 storehouse ✓".encode("utf-8"),
        "bin:trailing-cr": b"abc\r",
    }
    for k, v in values.items():
        assert c.set(k, v) is True, k
    for k, v in values.items():
        assert c.get(k) == v, k
    assert c.get_many(list(values)) == values
    # random bytes, many sizes
    rnd = {"bin:rnd:%d" % n: os.urandom(n) for n in (1, 2, 3, 127, 1000, 4095, 65537)}
    assert c.set_many(rnd) == []
    assert c.get_many(list(rnd)) == rnd


@test
def large_values(c, args):
    # near the 1 MB item limit (memcached's default -I 1m): must be stored
    near = os.urandom(ONE_MB - 1024)
    assert c.set("big:near", near) is True
    assert c.get("big:near") == near
    # several large values on one connection, read back with one get_many
    bigs = {"big:%d" % i: os.urandom(300 * 1024) for i in range(4)}
    assert c.set_many(bigs) == []
    assert c.get_many(list(bigs)) == bigs
    # over the limit: SERVER_ERROR object too large for cache
    try:
        c.set("big:over", b"x" * (ONE_MB + 1))
    except MemcacheServerError as e:
        assert "too large" in str(e), e
    else:
        raise AssertionError("a value over 1 MB did not raise MemcacheServerError")
    # the client reconnects; the rejected key is absent and the old big value survives
    assert c.get("big:over") is None
    assert c.get("big:near") == near
    # a failed set on an existing key removes the old value (memcached semantics)
    assert c.set("big:replaced", b"small") is True
    try:
        c.set("big:replaced", b"y" * (2 * ONE_MB))
    except MemcacheServerError:
        pass
    else:
        raise AssertionError("a 2 MB value did not raise MemcacheServerError")
    assert c.get("big:replaced") is None


@test
def too_large_keeps_connection_in_step(c, args):
    # Send an oversized set followed by a normal one in a single write on a raw
    # socket; the server must discard the oversized payload and answer the next
    # command (this is what lets clients that do not reconnect keep working).
    import socket
    s = socket.create_connection((args.host, args.port), timeout=10)
    try:
        payload = b"z" * (ONE_MB + 10)
        s.sendall(b"set raw:over 0 0 %d\r\n" % len(payload) + payload + b"\r\n"
                  + b"set raw:ok 0 0 2\r\nok\r\nget raw:ok\r\n")
        want = (b"SERVER_ERROR object too large for cache\r\nSTORED\r\n"
                b"VALUE raw:ok 0 2\r\nok\r\nEND\r\n")
        buf = b""
        while len(buf) < len(want):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        assert buf == want, buf
    finally:
        s.close()


@test
def many_connections_threads(c, args):
    errors = []

    def worker(n):
        try:
            cl = new_client(args)
            for i in range(500):
                k = "th:%d:%d" % (n, i)
                cl.set(k, k.encode(), noreply=(i % 2 == 0))
            got = cl.get_many(["th:%d:%d" % (n, i) for i in range(500)])
            assert len(got) == 500 and all(v == k.encode() for k, v in got.items())
            cl.close()
        except Exception as e:  # noqa: BLE001
            errors.append((n, repr(e)))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()

    failed = 0
    for fn in TESTS:
        c = new_client(args)
        t0 = time.monotonic()
        try:
            fn(c, args)
        except Exception:  # noqa: BLE001
            failed += 1
            print("  [FAIL] pymemcache %s" % fn.__name__)
            traceback.print_exc(file=sys.stdout)
        else:
            print("  [pass] pymemcache %s (%.2fs)" % (fn.__name__, time.monotonic() - t0))
        finally:
            c.close()
    print("pymemcache: %d/%d tests passed" % (len(TESTS) - failed, len(TESTS)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
