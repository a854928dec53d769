#!/usr/bin/env python3
# How many of the fill's pages a cache still holds: asks for every STEP-th page, newest first,
# as the fill's client did (desktop User-Agent, gzip), and prints hits x STEP. Newest first,
# because a miss stores its page and evicts the oldest, which the fill has mostly evicted
# already. kura's "objects" counts Vary records beside variants and Varnish's n_object does not,
# so this is the count that compares. Loopback only.
#
#   bench/seed002-probe.py CACHE_PORT FILL STEP USER_AGENT
import http.client
import sys

port, fill, step, ua = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
hits = 0
for n in range(fill, 0, -step):
    c.request("GET", f"/entry/fill-{n}", headers={"User-Agent": ua, "Accept-Encoding": "gzip"})
    resp = c.getresponse()
    resp.read()
    hits += resp.getheader("x-cache", "") == "hit"
print(hits * step)
