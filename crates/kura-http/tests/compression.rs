//! Compressed storage against a real backend on loopback: a plain body stored gzipped and
//! served both ways, a backend's gzip kept as it is, decoded for identity clients, weak ETags
//! for transformed bodies, HEAD, 304s, ranges, types left alone, and how many more pages the
//! same memory holds.

mod common;

use std::io::Read;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::Response;
use http_body_util::Full;

/// A 20 KB page of HTML-like text (about 3x-4x with gzip, as real pages): markup repeated,
/// words from a vocabulary, ids and numbers that do not repeat.
fn page(seed: u64, len: usize) -> String {
    const WORDS: [&str; 48] = [
        "the", "cache", "blog", "entry", "article", "comment", "user", "tokyo", "kyoto", "varnish",
        "memory", "request", "response", "header", "server", "deploy", "nginx", "hatena", "diary",
        "photo", "travel", "ramen", "coffee", "train", "morning", "evening", "weekend", "project",
        "release", "update", "guide", "notes", "review", "recipe", "garden", "music", "book",
        "movie", "game", "story", "city", "river", "mountain", "season", "spring", "summer",
        "autumn", "winter",
    ];
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut out = String::from("<!DOCTYPE html><html><head><title>entry</title></head><body>\n");
    while out.len() < len {
        out.push_str(&format!(
            "<div class=\"entry-content\" id=\"e{:x}\"><a href=\"/entry/{}\">",
            next(),
            next() % 100_000
        ));
        for _ in 0..(8 + next() % 12) {
            out.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
            out.push(' ');
        }
        out.push_str("</a></div>\n");
    }
    out.truncate(len);
    out
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut encoder, bytes).unwrap();
    encoder.finish().unwrap()
}

fn bytes_reply(headers: &[(&str, &str)], body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    for (name, value) in headers {
        response.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    response
}

/// /plain/*: 20 KB of HTML, plain; /gz/*: the same, gzip-coded by the backend (when asked);
/// /png: an image; /small: short HTML; /nt: no-transform HTML.
async fn origin() -> Backend {
    Backend::start(Duration::ZERO, |seen| {
        let path = seen.uri.path();
        let html = page(path.len() as u64, 20_000);
        let cc = ("cache-control", "max-age=100");
        if path.starts_with("/gz") {
            let accepts = seen
                .headers
                .get("accept-encoding")
                .is_some_and(|v| v.to_str().unwrap().contains("gzip"));
            if accepts {
                let headers = [
                    cc,
                    ("content-type", "text/html"),
                    ("content-encoding", "gzip"),
                    ("etag", "\"g1\""),
                    ("vary", "Accept-Encoding"),
                ];
                return bytes_reply(&headers, gzip(html.as_bytes()));
            }
        }
        let kind = match path {
            "/png" => "image/png",
            _ => "text/html; charset=utf-8",
        };
        let body = if path == "/small" {
            "<p>short</p>".to_owned()
        } else {
            html
        };
        let cc = if path == "/nt" {
            ("cache-control", "max-age=100, no-transform")
        } else {
            cc
        };
        let headers = [cc, ("content-type", kind), ("etag", "\"v1\"")];
        bytes_reply(&headers, body.into_bytes())
    })
    .await
}

const GZIP: (&str, &str) = ("accept-encoding", "gzip, deflate, br");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_body_is_stored_gzipped_and_served_both_ways() {
    let backend = origin().await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let html = page("/plain/a".len() as u64, 20_000);

    // A gzip client's miss: compressed on the way in, streamed to it.
    let first = send(&c, addr, "GET", "/plain/a", &[GZIP]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.cache(), "miss");
    assert_eq!(backend.last().headers["accept-encoding"], "gzip, br, zstd");
    assert_eq!(first.header("content-encoding"), "gzip");
    assert_eq!(first.header("vary"), "Accept-Encoding");
    assert_eq!(
        first.header("etag"),
        "W/\"v1\"",
        "RFC 9110 8.8.3: transformed, weak"
    );
    assert!(
        first.body.len() * 3 < html.len(),
        "{} bytes",
        first.body.len()
    );
    assert!(gunzip(&first.body) == html.as_bytes());

    // A hit for a gzip client: the stored bytes, with their length.
    let hit = send(&c, addr, "GET", "/plain/a", &[("accept-encoding", "gzip")]).await;
    assert_eq!(hit.cache(), "hit");
    assert!(hit.body == first.body);
    assert_eq!(hit.header("content-length"), hit.body.len().to_string());
    assert_eq!(hit.header("etag"), "W/\"v1\"");

    // Identity clients: no Accept-Encoding, gzip refused, another coding only.
    for accept in [None, Some("gzip;q=0, deflate"), Some("br"), Some("*;q=0")] {
        let headers: Vec<(&str, &str)> =
            accept.map(|a| ("accept-encoding", a)).into_iter().collect();
        let got = send(&c, addr, "GET", "/plain/a", &headers).await;
        assert_eq!(got.cache(), "hit", "{accept:?}");
        assert_eq!(got.header("content-encoding"), "", "{accept:?}");
        assert!(got.body == html.as_bytes(), "{accept:?}");
        assert_eq!(got.header("content-length"), "20000", "{accept:?}");
        assert_eq!(
            got.header("etag"),
            "\"v1\"",
            "the backend's own bytes: its strong tag"
        );
        assert_eq!(got.header("vary"), "Accept-Encoding");
    }
    assert_eq!(backend.count(), 1);
    assert_eq!(stats(&server).await["objects"], 1);

    // An identity client's miss: the flight's gzip decoded on the fly.
    let got = send(&c, addr, "GET", "/plain/b", &[]).await;
    assert_eq!(got.cache(), "miss");
    assert_eq!(got.header("content-encoding"), "");
    assert!(got.body == page("/plain/b".len() as u64, 20_000).as_bytes());
    // The flight stores the object before its last chunk goes out: a client
    // that has the whole response and asks again gets a hit (it once could
    // join the flight instead, "coalesced", seen in CI).
    let got = send(&c, addr, "GET", "/plain/b", &[GZIP]).await;
    assert_eq!(got.cache(), "hit");
    assert_eq!(got.header("content-encoding"), "gzip");
    assert!(gunzip(&got.body) == page("/plain/b".len() as u64, 20_000).as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_gzip_is_kept_and_decoded_for_identity_clients() {
    let backend = origin().await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let html = page("/gz".len() as u64, 20_000);
    let sent = gzip(html.as_bytes());

    // An identity client first: the backend is asked for gzip all the same (one variant).
    let got = send(&c, addr, "GET", "/gz", &[]).await;
    assert_eq!(got.cache(), "miss");
    assert_eq!(backend.last().headers["accept-encoding"], "gzip, br, zstd");
    assert_eq!(got.header("content-encoding"), "");
    assert_eq!(got.header("content-length"), "", "identity length unknown");
    assert_eq!(got.header("etag"), "W/\"g1\"", "decoded: transformed, weak");
    assert!(got.body == html.as_bytes());

    let got = send(&c, addr, "GET", "/gz", &[GZIP]).await;
    assert_eq!(
        got.cache(),
        "hit",
        "Vary: Accept-Encoding shares one variant"
    );
    assert_eq!(got.header("content-encoding"), "gzip");
    assert!(got.body == sent, "the backend's bytes as they are");
    assert_eq!(got.header("etag"), "\"g1\"");
    assert_eq!(got.header("vary"), "Accept-Encoding");
    assert_eq!(backend.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_conditional_and_range_requests() {
    let backend = origin().await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let html = page("/plain/h".len() as u64, 20_000);
    let gz = send(&c, addr, "GET", "/plain/h", &[GZIP]).await.body;

    // HEAD: the fields of the GET each client would get.
    let head = send(&c, addr, "HEAD", "/plain/h", &[GZIP]).await;
    assert_eq!(head.cache(), "hit");
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-encoding"), "gzip");
    assert_eq!(head.header("content-length"), gz.len().to_string());
    let head = send(&c, addr, "HEAD", "/plain/h", &[]).await;
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-encoding"), "");
    assert_eq!(head.header("content-length"), "20000");
    assert_eq!(head.header("etag"), "\"v1\"");

    // If-None-Match: weak comparison (RFC 9110 13.1.2), either form of the tag.
    for (accept, tag) in [
        (GZIP, "W/\"v1\""),
        (GZIP, "\"v1\""),
        (("accept-encoding", "identity"), "\"v1\""),
        (("accept-encoding", "identity"), "W/\"v1\""),
    ] {
        let got = send(
            &c,
            addr,
            "GET",
            "/plain/h",
            &[accept, ("if-none-match", tag)],
        )
        .await;
        assert_eq!(got.status, 304, "{accept:?} {tag}");
        assert!(got.body.is_empty());
    }
    let got = send(
        &c,
        addr,
        "GET",
        "/plain/h",
        &[GZIP, ("if-none-match", "W/\"v1\"")],
    )
    .await;
    assert_eq!(got.header("etag"), "W/\"v1\"");
    let got = send(
        &c,
        addr,
        "GET",
        "/plain/h",
        &[GZIP, ("if-none-match", "\"v2\"")],
    )
    .await;
    assert_eq!(got.status, 200);
    assert!(got.body == gz);

    // Range: a gzip client's range is of the gzip bytes it would get; an identity client
    // gets the decoded whole (RFC 9110 14.2 lets a server ignore Range).
    let got = send(&c, addr, "GET", "/plain/h", &[GZIP, ("range", "bytes=0-9")]).await;
    assert_eq!(got.status, 206);
    assert!(got.body == gz.slice(0..10));
    assert_eq!(
        got.header("content-range"),
        format!("bytes 0-9/{}", gz.len())
    );
    let got = send(&c, addr, "GET", "/plain/h", &[("range", "bytes=0-9")]).await;
    assert_eq!(got.status, 200);
    assert!(got.body == html.as_bytes());
    // If-Range with the weak tag: never a range (strong comparison).
    let got = send(
        &c,
        addr,
        "GET",
        "/plain/h",
        &[GZIP, ("range", "bytes=0-9"), ("if-range", "W/\"v1\"")],
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(backend.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_compressed() {
    let backend = origin().await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for path in ["/png", "/small", "/nt"] {
        let got = send(&c, addr, "GET", path, &[GZIP]).await;
        assert_eq!(got.header("content-encoding"), "", "{path}");
        assert_eq!(got.header("etag"), "\"v1\"", "{path}");
        assert_eq!(got.header("vary"), "", "{path}");
        let again = send(&c, addr, "GET", path, &[]).await;
        assert_eq!(again.cache(), "hit", "{path}");
        assert!(again.body == got.body, "{path}");
    }
    let png = send(&c, addr, "GET", "/png", &[GZIP]).await;
    assert!(png.body == page("/png".len() as u64, 20_000).as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_off_changes_nothing() {
    let backend = origin().await;
    let server = proxy(backend.addr, "[compression]\nenabled = false").await;
    let (addr, c) = (server.http[0], client());
    let got = send(&c, addr, "GET", "/plain/a", &[GZIP]).await;
    assert_eq!(backend.last().headers["accept-encoding"], GZIP.1);
    assert_eq!(got.header("content-encoding"), "");
    assert_eq!(got.header("etag"), "\"v1\"");
    assert_eq!(got.body.len(), 20_000);
}

/// Distinct 20 KB pages through a 4 MiB cache; the objects it holds at the end.
async fn objects_held(extra: &str) -> u64 {
    let backend = origin().await;
    let config = kura_http::Config::from_toml(&format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\nthreads = 2\nmemory_mb = 4\n{extra}",
        backend.addr
    ))
    .unwrap();
    let server = kura_http::Server::start(config).await.unwrap();
    let (addr, c) = (server.http[0], client());
    for i in 0..1_200 {
        let got = send(&c, addr, "GET", &format!("/plain/{i}"), &[GZIP]).await;
        assert_eq!(got.status, 200);
    }
    let stats = stats(&server).await;
    assert!(
        stats["evictions"].as_u64().unwrap() > 0,
        "the cache was filled"
    );
    stats["objects"].as_u64().unwrap()
}

// Seed 002: about 3x as many pages in the same memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_memory_holds_about_three_times_the_pages() {
    let plain = objects_held("[compression]\nenabled = false").await;
    let gzipped = objects_held("").await;
    eprintln!("20 KB pages held in 4 MiB: {plain} plain, {gzipped} gzip-stored");
    assert!(plain > 50, "{plain}");
    assert!(gzipped * 10 >= plain * 25, "{gzipped} vs {plain}");
}
