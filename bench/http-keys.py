#!/usr/bin/env python3
# Usage: bench/http-keys.py PATH/TO/kura
# Prints backend requests and the hit ratio for three configurations (keys as received,
# normalised keys, normalised keys + device classes). Loopback only; no timings.
# Hit ratio of kura http on a synthetic access log: 50 pages, URLs with tracking parameters
# in random order, 24 User-Agents (phones, tablets, desktops, several versions each).
import http.client, http.server, random, socketserver, subprocess, sys, threading, time, os, json
random.seed(2)
count = [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        count[0] += 1
        body = b"x" * 2000
        self.send_response(200)
        self.send_header("Cache-Control", "max-age=600")
        self.send_header("Vary", "User-Agent")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), H); srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
bport = srv.server_address[1]
agents = []
for v in range(100, 106):
    agents.append(f"Mozilla/5.0 (iPhone; CPU iPhone OS 17_{v%10} like Mac OS X) Version/17.{v%10} Mobile/15E148 Safari/604.1")
    agents.append(f"Mozilla/5.0 (Linux; Android 14; Pixel {v%10}) Chrome/{v}.0 Mobile Safari/537.36")
    agents.append(f"Mozilla/5.0 (Linux; Android 13; SM-X700) Chrome/{v}.0 Safari/537.36")
    agents.append(f"Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/{v}.0 Safari/537.36")
requests = []
for _ in range(3000):
    page = random.randrange(50)
    params = [f"id={page}"]
    if random.random() < 0.6: params.append("utm_source=" + random.choice(["x", "fb", "news", "mail"]))
    if random.random() < 0.3: params.append("fbclid=" + str(random.randrange(10**6)))
    if random.random() < 0.3: params.append("_ga=2." + str(random.randrange(10**6)))
    random.shuffle(params)
    requests.append(("/entry?" + "&".join(params), random.choice(agents)))
def run(name, toml):
    count[0] = 0
    path = os.path.join(os.environ.get('TMPDIR', '/tmp'), f'kura-keys-{name}.toml'); open(path, "w").write(toml)
    port = 20000 + random.randrange(10000)
    p = subprocess.Popen([sys.argv[1], "http", "--backend", f"http://127.0.0.1:{bport}", "-l", f"127.0.0.1:{port}", "-m", "64", "-t", "1", "--config", path], stderr=subprocess.DEVNULL)
    for _ in range(200):
        try: http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect(); break
        except OSError: time.sleep(0.05)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    hits = 0
    for path_, ua in requests:
        c.request("GET", path_, headers={"User-Agent": ua, "Host": "blog.example"})
        r = c.getresponse(); r.read()
        hits += r.getheader("x-cache") == "hit"
    p.terminate(); p.wait()
    print(f"{name}: {len(requests)} requests, {count[0]} backend requests, hit ratio {hits/len(requests):.3f}")
run("as-received", "[normalize]\nremove = []\nsort = false\n[device]\nenabled = false\n")
run("normalised-keys-only", "[device]\nenabled = false\n")
run("normalised+device-classes", "[device]\nvary_user_agent = true\n")
