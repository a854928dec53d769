#!/usr/bin/env python3
# Backend for bench/http-seed002.sh: answers every GET with a distinct ~20 KB HTML page (the
# path chooses its paragraphs, so each URL has its own body, and the body differs per device
# class), `Vary: User-Agent`, `Cache-Control: max-age=3600`. The text is made of words from a
# vocabulary of 4,000 made-up words drawn with Zipf-like weights, in paragraphs with links
# and markup, so it compresses like prose (about 3x with gzip), not like repeated bytes.
# `GET /__count` (asked directly, not through a cache) answers the number of other requests.
#
#   bench/seed002-origin.py PORT [PAGE_BYTES]
import http.server
import random
import socketserver
import sys
import threading
import zlib

PORT = int(sys.argv[1])
PAGE = int(sys.argv[2]) if len(sys.argv) > 2 else 20 * 1024

gen = random.Random(2002)
SYL = ["ka", "ri", "to", "ne", "su", "mo", "ha", "te", "na", "ku", "shi", "ro", "mi", "an",
       "el", "or", "is", "ul", "ba", "de", "po", "ga", "zu", "ya", "wo", "fe", "li", "tra"]
vocab = ["".join(gen.choice(SYL) for _ in range(gen.randint(1, 4))) for _ in range(4000)]
weights = [1.0 / (i + 1) for i in range(len(vocab))]


def paragraph(r):
    words = r.choices(vocab, weights, k=r.randint(25, 90))
    for i in range(0, len(words), r.randint(9, 30)):
        words[i] = f'<a href="/entry/{r.randrange(10**6)}">{words[i]}</a>'
    text = " ".join(words)
    return f"<p>{text[0].upper()}{text[1:]}.</p>\n"


# 6,000 paragraphs (~2.5 MB); a page is a random choice of them, seeded by its URL.
PARAS = [paragraph(gen) for _ in range(6000)]

lock = threading.Lock()
count = [0]


def page(path, device):
    r = random.Random(zlib.crc32(path.encode()))
    title = " ".join(r.choices(vocab, weights, k=6))
    head = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><link rel=\"stylesheet\" href=\"/css/{device}.css\">"
            f"<link rel=\"canonical\" href=\"https://blog.example{path}\"></head>\n"
            f"<body class=\"{device}\"><header><nav><a href=\"/\">Top</a> "
            f"<a href=\"/archive\">Archive</a></nav></header>\n<article><h1>{title}</h1>\n")
    parts = [head]
    size = len(head)
    while size < PAGE - 40:
        p = r.choice(PARAS)
        parts.append(p)
        size += len(p)
    parts.append("</article></body></html>\n")
    return "".join(parts).encode()[: PAGE]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        if self.path == "/__count":
            with lock:
                body = str(count[0]).encode()
        else:
            with lock:
                count[0] += 1
            body = page(self.path, self.headers.get("X-Device-Class", "-"))
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Vary", "User-Agent")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


Server(("127.0.0.1", PORT), H).serve_forever()
