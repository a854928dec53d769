#!/usr/bin/env python3
"""Replication lag as a client sees it, for bench/replication.sh.

  repl_probe.py lag PROTO PRIMARY_PORT REPLICA_PORT SECONDS
      every LAG_GAP_MS (10 ms): write a new key on the primary, then read it from the
      replica until it is there (polling every 0.2 ms); prints the delay from
      the write's acknowledgement to the first read that sees it: p50, p99,
      max in ms, and the number of samples. PROTO is memcached or redis.
  repl_probe.py fill PROTO PORT - COUNT
      sets keys key:0 .. key:COUNT-1 to 100 random hex digits each, pipelined
      (the same data for either system, for the full resync's timing).
  repl_probe.py synced PROTO PRIMARY_PORT REPLICA_PORT TIMEOUT
      waits until the replica has everything the primary wrote (kura:
      repl_applied_seq reaches the primary's repl_written_seq with the link
      up; redis: master_link_status up and no sync in progress, offsets
      equal); prints the seconds it took.
"""
import os
import socket
import statistics
import sys
import time


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def until(self, end):
        while end not in self.buf:
            d = self.s.recv(65536)
            if not d:
                raise EOFError
            self.buf += d
        i = self.buf.index(end) + len(end)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def send(self, b):
        self.s.sendall(b)


def mc_set(c, k, v):
    c.send(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v))
    c.until(b"\r\n")


def mc_has(c, k):
    c.send(b"get %s\r\n" % k)
    return c.until(b"END\r\n").startswith(b"VALUE")


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def redis_set(c, k, v):
    c.send(resp(b"SET", k, v))
    c.until(b"\r\n")


def redis_has(c, k):
    c.send(resp(b"GET", k))
    line = c.until(b"\r\n")
    if line.startswith(b"$-1"):
        return False
    n = int(line[1:-2])
    while len(c.buf) < n + 2:
        c.buf += c.s.recv(65536)
    c.buf = c.buf[n + 2:]
    return True


# Pause between two lag probes (LAG_GAP_MS, default 10 ms): a shorter one
# gives more probes a second, so a steadier p99.
LAG_GAP = float(os.environ.get("LAG_GAP_MS", "10")) / 1000


def lag(proto, pport, rport, secs):
    p, r = Conn(pport), Conn(rport)
    put, has = (mc_set, mc_has) if proto == "memcached" else (redis_set, redis_has)
    samples = []
    end = time.time() + secs
    i = 0
    while time.time() < end:
        k = b"probe:%d" % i
        put(p, k, b"x")
        t0 = time.perf_counter()
        while not has(r, k):
            time.sleep(0.0002)
            if time.perf_counter() - t0 > 10:
                break
        samples.append((time.perf_counter() - t0) * 1000)
        i += 1
        time.sleep(LAG_GAP)
    samples.sort()
    if os.environ.get("LAG_SAMPLES"):
        # One line per probe, for percentiles over every round's probes.
        with open(os.environ["LAG_SAMPLES"], "a") as f:
            f.write("".join("%s %.4f\n" % (proto, x) for x in samples))
    q = lambda f: samples[min(len(samples) - 1, int(f * len(samples)))]
    print("lag_ms p50 %.3f p99 %.3f max %.3f samples %d" % (q(0.5), q(0.99), samples[-1], len(samples)))


def stats_mc(port):
    c = Conn(port)
    c.send(b"stats\r\n")
    out = c.until(b"END\r\n").decode()
    return dict(l.split(" ")[1:3] for l in out.splitlines() if l.startswith("STAT "))


def info_redis(port):
    c = Conn(port)
    c.send(resp(b"INFO", b"replication"))
    line = c.until(b"\r\n")
    n = int(line[1:-2])
    while len(c.buf) < n + 2:
        c.buf += c.s.recv(65536)
    text = c.buf[:n].decode()
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def synced(proto, pport, rport, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            if proto == "memcached":
                p, r = stats_mc(pport), stats_mc(rport)
                if r.get("repl_link") == "up" and int(r["repl_applied_seq"]) >= int(p["repl_written_seq"]):
                    break
            else:
                p, r = info_redis(pport), info_redis(rport)
                if (r.get("master_link_status") == "up" and r.get("master_sync_in_progress") == "0"
                        and r.get("slave_repl_offset") == p.get("master_repl_offset")):
                    break
        except (OSError, EOFError, KeyError, ValueError):
            pass
        time.sleep(0.02)
    print("synced_s %.3f" % (time.time() - t0))


def fill(proto, port, _unused, count):
    import os
    c = Conn(port)
    batch = []
    for i in range(int(count)):
        k, v = b"key:%d" % i, os.urandom(50).hex().encode()
        batch.append(b"set %s 0 0 100 noreply\r\n%s\r\n" % (k, v) if proto == "memcached" else resp(b"SET", k, v))
        if len(batch) == 1000:
            c.send(b"".join(batch))
            batch = []
            if proto == "redis":
                for _ in range(1000):
                    c.until(b"\r\n")
    c.send(b"".join(batch))
    if proto == "redis":
        for _ in range(len(batch)):
            c.until(b"\r\n")
    else:
        c.send(b"mn\r\n")
        c.until(b"MN\r\n")
    print("filled %d" % int(count))


if __name__ == "__main__":
    cmd, proto, pport = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rport = 0 if sys.argv[4] == "-" else int(sys.argv[4])
    n = float(sys.argv[5])
    {"lag": lag, "synced": synced, "fill": fill}[cmd](proto, pport, rport, n)
