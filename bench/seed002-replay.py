#!/usr/bin/env python3
# Replays a synthetic access log against a cache on loopback and prints
# "requests backend_requests hit_ratio fewest_possible_backend_requests", the backend's count taken from the origin's
# /__count before and after (bench/seed002-origin.py). The log (fixed seed, the same for
# every cache): REQUESTS requests for PAGES pages, popularity Zipf-like, URLs carrying
# tracking parameters (utm_*, fbclid, _ga, gclid) in random order beside the page's own
# parameters, from 48 User-Agents (iPhones, Android phones, iPads, Android tablets, desktops,
# several versions each), half of the requests with Accept-Encoding: gzip. No timings.
#
#   bench/seed002-replay.py CACHE_PORT ORIGIN_PORT [REQUESTS] [PAGES]
import http.client
import random
import sys

cport, oport = int(sys.argv[1]), int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
pages = int(sys.argv[4]) if len(sys.argv) > 4 else 200
r = random.Random(2)

agents = []
for v in range(110, 118):
    agents.append(f"Mozilla/5.0 (iPhone; CPU iPhone OS 17_{v % 10} like Mac OS X) AppleWebKit/605.1.15 Version/17.{v % 10} Mobile/15E148 Safari/604.1")
    agents.append(f"Mozilla/5.0 (Linux; Android 14; Pixel {v % 10}) AppleWebKit/537.36 Chrome/{v}.0.0.0 Mobile Safari/537.36")
    agents.append(f"Mozilla/5.0 (iPad; CPU OS 16_{v % 10} like Mac OS X) AppleWebKit/605.1.15 Version/16.{v % 10} Mobile/15E148 Safari/604.1")
    agents.append(f"Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 Chrome/{v}.0.0.0 Safari/537.36")
    agents.append(f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/{v}.0.0.0 Safari/537.36")
    agents.append(f"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_{v % 10}) Gecko/20100101 Firefox/{v}.0")

weights = [1.0 / (i + 1) ** 0.8 for i in range(pages)]
log = []
for _ in range(n):
    page = r.choices(range(pages), weights)[0]
    params = [f"id={page}"]
    if page % 3 == 0:
        params.append(f"page={1 + page % 4}")
    if r.random() < 0.6:
        params.append("utm_source=" + r.choice(["twitter", "fb", "news", "mail", "hatebu"]))
        params.append("utm_medium=" + r.choice(["social", "email", "rss"]))
    if r.random() < 0.3:
        params.append("fbclid=IwAR" + str(r.randrange(10**9)))
    if r.random() < 0.3:
        params.append("_ga=2." + str(r.randrange(10**9)) + "." + str(r.randrange(10**9)))
    if r.random() < 0.1:
        params.append("gclid=Cj0K" + str(r.randrange(10**9)))
    r.shuffle(params)
    gzip = r.random() < 0.5
    log.append(("/entry?" + "&".join(params), r.choice(agents), gzip))


def origin_count():
    c = http.client.HTTPConnection("127.0.0.1", oport, timeout=10)
    c.request("GET", "/__count")
    v = int(c.getresponse().read())
    c.close()
    return v


before = origin_count()
c = http.client.HTTPConnection("127.0.0.1", cport, timeout=30)
bad = 0
for path, ua, gz in log:
    headers = {"User-Agent": ua, "Host": "Blog.Example"}
    if gz:
        headers["Accept-Encoding"] = "gzip"
    c.request("GET", path, headers=headers)
    resp = c.getresponse()
    resp.read()
    bad += resp.status != 200
c.close()
backend = origin_count() - before
if bad:
    print(f"{bad} responses were not 200", file=sys.stderr)
    sys.exit(1)


def device(ua):
    return "pc" if "iPad" in ua else "sp" if "Mobile" in ua else "pc"


ideal = len({(p.split("?")[1] and tuple(sorted(x for x in p.split("?")[1].split("&") if x.startswith(("id=", "page=")))), device(ua)) for p, ua, _ in log})
print(f"{n} {backend} {1 - backend / n:.4f} {ideal}")
