#!/usr/bin/env python3
"""Compatibility test: pymemcache over TLS (Python's ssl module, OpenSSL)
against a server started with -Z and ssl_verify_mode=2, with a plain
`notls:` listener beside the TLS one.

Usage: tls_test.py --host 127.0.0.1 --tls-port N --plain-port M \
           --cafile CA --certfile CERT --keyfile KEY

Each test prints PASS/FAIL; the script exits non-zero if any fails.
"""

import argparse
import ssl
import sys
import traceback

from pymemcache.client.base import Client

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def tls_context(args, with_cert=True):
    # Verifies the server's certificate against the CA and its name (the
    # certificate carries IP:127.0.0.1), as a real deployment would.
    ctx = ssl.create_default_context(cafile=args.cafile)
    if with_cert:
        ctx.load_cert_chain(args.certfile, args.keyfile)
    return ctx


def client(args, port, ctx=None):
    return Client((args.host, port), tls_context=ctx, default_noreply=False,
                  connect_timeout=5, timeout=10)


@test
def storage_and_retrieval_over_tls(args):
    c = client(args, args.tls_port, tls_context(args))
    assert c.set("tls:greeting", b"hello") is True
    assert c.get("tls:greeting") == b"hello"
    assert c.add("tls:greeting", b"again") is False
    assert c.append("tls:greeting", b", world") is True
    value, cas = c.gets("tls:greeting")
    assert value == b"hello, world", value
    assert c.cas("tls:greeting", b"swapped", cas) is True
    assert c.cas("tls:greeting", b"late", cas) is False
    assert c.set("tls:n", b"41") is True
    assert c.incr("tls:n", 1) == 42
    assert c.delete("tls:n") is True
    big = bytes(range(256)) * 2048  # 512 KiB, many TLS records
    assert c.set("tls:big", big) is True
    assert c.get("tls:big") == big
    many = {f"tls:k{i}": str(i).encode() * 100 for i in range(200)}
    assert c.set_many(many) == []
    assert c.get_many(list(many)) == many
    c.close()


@test
def stats_report_tls(args):
    c = client(args, args.tls_port, tls_context(args))
    settings = c.stats("settings")
    assert settings.get(b"ssl_enabled") in (b"yes", "yes", True), settings.get(b"ssl_enabled")
    assert b"ssl_handshake_errors" in c.stats()
    c.close()


@test
def plain_listener_serves_the_same_cache(args):
    c = client(args, args.plain_port)
    assert c.get("tls:greeting") == b"swapped"
    c.close()


@test
def client_without_certificate_is_refused(args):
    c = client(args, args.tls_port, tls_context(args, with_cert=False))
    try:
        c.get("tls:greeting")
    except Exception as e:  # an SSL alert, a reset or a closed socket
        print(f"    refused as expected: {type(e).__name__}: {e}")
        return
    finally:
        c.close()
    raise AssertionError("a client without a certificate was served")


@test
def plain_text_on_tls_port_fails(args):
    c = client(args, args.tls_port)
    try:
        c.get("tls:greeting")
    except Exception as e:  # the server closes on a failed handshake
        print(f"    failed as expected: {type(e).__name__}: {e}")
        return
    finally:
        c.close()
    raise AssertionError("a plain-text client was served on the TLS port")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tls-port", type=int, required=True)
    p.add_argument("--plain-port", type=int, required=True)
    p.add_argument("--cafile", required=True)
    p.add_argument("--certfile", required=True)
    p.add_argument("--keyfile", required=True)
    args = p.parse_args()
    failed = 0
    for fn in TESTS:
        try:
            fn(args)
            print(f"PASS {fn.__name__}")
        except Exception:
            failed += 1
            print(f"FAIL {fn.__name__}")
            traceback.print_exc()
    print(f"{len(TESTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
