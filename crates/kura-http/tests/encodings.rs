//! Every encoding a backend sends (gzip, br, zstd) stored as it came and served to each client
//! in a coding it accepts, or decoded: curl --compressed, gzip-only clients (br and zstd
//! transcoded to gzip) and identity clients, HEAD, ranges; a backend that lies about its coding,
//! and decompression bombs.

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::Response;
use http_body_util::Full;

/// 30 KB of HTML-like text.
fn page() -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < 30_000 {
        let _ = writeln!(
            out,
            "<p class=\"entry-{}\">kura {} caches</p>",
            i % 17,
            i * 7919 % 1000
        );
        i += 1;
    }
    out
}

fn encode(coding: &str, data: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
            encoder.write_all(data).unwrap();
            encoder.finish().unwrap()
        }
        "br" => {
            let mut out = Vec::new();
            {
                let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                writer.write_all(data).unwrap();
            }
            out
        }
        "zstd" => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
        _ => data.to_vec(),
    }
}

/// `body` gunzipped (a gzip-only client's view), or a panic naming `what`.
fn gunzip(body: &[u8], what: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let read = std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(body), &mut out);
    assert!(read.is_ok(), "{what}: not gzip");
    out
}

fn bytes_reply(headers: &[(&str, &str)], body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = reply(200, headers, "");
    *response.body_mut() = Full::new(Bytes::from(body));
    response
}

/// A backend that codes its page with `coding` when the request accepts it (as nginx with
/// brotli or zstd modules does), else sends it plain.
async fn coding_backend(coding: &'static str) -> Backend {
    Backend::start(Duration::ZERO, move |seen| {
        let accepts = seen
            .headers
            .get("accept-encoding")
            .is_some_and(|v| v.to_str().unwrap().split(',').any(|c| c.trim() == coding));
        let mut headers = vec![
            ("cache-control", "max-age=100"),
            ("content-type", "text/html"),
            ("vary", "Accept-Encoding"),
            ("etag", "\"p1\""),
        ];
        if accepts {
            headers.push(("content-encoding", coding));
            return bytes_reply(&headers, encode(coding, &page()));
        }
        bytes_reply(&headers, page())
    })
    .await
}

/// `curl --compressed` (which accepts deflate, gzip, br and zstd here) through the proxy:
/// the response headers and the decoded body.
async fn curl_compressed(addr: SocketAddr, path: &str, extra: &[&str]) -> (String, Vec<u8>) {
    let url = format!("http://{addr}{path}");
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let dir = temp_dir("curl");
        let head = dir.join("head");
        let output = std::process::Command::new("curl")
            .args(["-s", "--compressed", "--max-time", "10", "-D"])
            .arg(&head)
            .args(&extra)
            .arg(&url)
            .output()
            .expect("curl runs");
        assert!(output.status.success(), "curl: {output:?}");
        (
            std::fs::read_to_string(head).unwrap().to_ascii_lowercase(),
            output.stdout,
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_compressed_gets_each_coding_as_the_backend_sent_it() {
    for coding in ["gzip", "br", "zstd"] {
        let backend = coding_backend(coding).await;
        let server = proxy(backend.addr, "").await;
        let addr = server.http[0];
        let (head, body) = curl_compressed(addr, "/page", &[]).await;
        assert!(
            head.contains(&format!("content-encoding: {coding}")),
            "{coding}: {head}"
        );
        assert!(head.contains("x-cache: miss"), "{head}");
        assert!(body == page(), "{coding}: curl decoded the page");
        // The backend was asked for every coding kura decodes, not gzip only.
        assert_eq!(backend.last().headers["accept-encoding"], "gzip, br, zstd");
        let (head, body) = curl_compressed(addr, "/page", &[]).await;
        assert!(
            head.contains("x-cache: hit") && head.contains(&format!("content-encoding: {coding}")),
            "{head}"
        );
        assert!(body == page());
        assert!(head.contains("vary: accept-encoding"), "{head}");
        // Stored as the backend sent it: one fetch.
        assert_eq!(backend.count(), 1);
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_do_not_accept_the_coding_get_it_decoded() {
    for coding in ["br", "zstd"] {
        let backend = coding_backend(coding).await;
        let server = proxy(backend.addr, "").await;
        let (addr, c) = (server.http[0], client());
        // Miss for a gzip-only client: streamed transcoded to gzip.
        let miss = send(&c, addr, "GET", "/p", &[("accept-encoding", "gzip")]).await;
        assert_eq!((miss.status.as_u16(), miss.cache()), (200, "miss"));
        assert_eq!(miss.header("content-encoding"), "gzip", "{coding}");
        assert_eq!(
            miss.header("content-length"),
            "",
            "{coding}: length unknown"
        );
        assert!(gunzip(&miss.body, coding) == page(), "{coding}");
        assert_eq!(miss.header("etag"), "W/\"p1\"", "transcoded: a weak tag");
        assert_eq!(miss.header("vary"), "Accept-Encoding");
        // Hits for clients that take gzip but not the stored coding: transcoded too, a
        // fraction of the page.
        for accept in ["x-gzip", &format!("{coding};q=0, *")[..]] {
            let hit = send(&c, addr, "GET", "/p", &[("accept-encoding", accept)]).await;
            assert_eq!(
                (hit.cache(), hit.header("content-encoding")),
                ("hit", "gzip"),
                "{accept}"
            );
            assert!(hit.body.len() * 3 < page().len(), "{}", hit.body.len());
            assert!(gunzip(&hit.body, coding) == page(), "{coding}");
        }
        // Decoded for identity clients, as stored for those that accept.
        for accept in [None, Some("identity"), Some("gzip;q=0")] {
            let headers: Vec<(&str, &str)> =
                accept.map(|a| ("accept-encoding", a)).into_iter().collect();
            let hit = send(&c, addr, "GET", "/p", &headers).await;
            assert_eq!(
                (hit.cache(), hit.header("content-encoding")),
                ("hit", ""),
                "{accept:?}"
            );
            assert!(hit.body == page(), "{coding} {accept:?}");
        }
        let accept = format!("gzip;q=0.5, {coding}");
        let coded = send(&c, addr, "GET", "/p", &[("accept-encoding", &accept)]).await;
        assert_eq!(coded.header("content-encoding"), coding);
        assert!(
            coded.body == encode(coding, &page()),
            "the stored bytes as they are"
        );
        assert_eq!(
            coded.header("etag"),
            "\"p1\"",
            "the backend's own coding: its strong tag"
        );
        assert_eq!(backend.count(), 1);
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_and_ranges_of_coded_objects() {
    let backend = coding_backend("br").await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let br = ("accept-encoding", "br");
    let coded = encode("br", &page());
    send(&c, addr, "GET", "/r", &[br]).await;
    let head = send(&c, addr, "HEAD", "/r", &[br]).await;
    assert_eq!(
        (head.status.as_u16(), head.header("content-encoding")),
        (200, "br")
    );
    assert_eq!(head.header("content-length"), coded.len().to_string());
    assert!(head.body.is_empty());
    let plain_head = send(&c, addr, "HEAD", "/r", &[]).await;
    assert_eq!(plain_head.header("content-encoding"), "");
    assert!(plain_head.body.is_empty());
    // A range of the coded representation for a client that takes it (RFC 9110 §14: ranges
    // are of the selected representation, here the br bytes).
    let ranged = send(&c, addr, "GET", "/r", &[br, ("range", "bytes=0-9")]).await;
    assert_eq!(ranged.status, 206);
    assert_eq!(
        ranged.header("content-range"),
        format!("bytes 0-9/{}", coded.len())
    );
    assert!(ranged.body[..] == coded[..10]);
    // Decoded for an identity client, the range is ignored: the whole page (RFC 9110 §14.2
    // allows it; the decoded length is not known in advance).
    let whole = send(&c, addr, "GET", "/r", &[("range", "bytes=0-9")]).await;
    assert_eq!(whole.status, 200);
    assert!(whole.body == page());
    server.shutdown().await;
}

/// A backend whose /lie says br but sends plain text, and whose /bomb sends gzip that
/// decodes to 16 MiB of zeros.
async fn bad_backend() -> Backend {
    Backend::start(Duration::ZERO, |seen| {
        let cc = ("cache-control", "max-age=100");
        match seen.uri.path() {
            "/lie" => bytes_reply(
                &[
                    cc,
                    ("content-encoding", "br"),
                    ("content-type", "text/html"),
                ],
                page(),
            ),
            _ => bytes_reply(
                &[
                    cc,
                    ("content-encoding", "gzip"),
                    ("content-type", "text/html"),
                ],
                encode("gzip", &vec![0u8; 16 << 20]),
            ),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_false_coding_is_passed_through_and_never_stored() {
    let backend = bad_backend().await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for _ in 0..2 {
        let got = send(&c, addr, "GET", "/lie", &[("accept-encoding", "br")]).await;
        assert_eq!((got.status.as_u16(), got.cache()), (200, "miss"));
        assert!(got.body == page(), "the backend's bytes as it sent them");
    }
    assert_eq!(
        backend.count(),
        2,
        "not stored: each request goes to the backend"
    );
    assert_eq!(stats(&server).await["encoding_refused"], 2);
    // A client that needs it decoded gets an error, never garbage: a 502 (the first chunk
    // cannot be decoded: tests/corrupt_codings.rs has the other cases).
    let got = send(&c, addr, "GET", "/lie", &[]).await;
    assert_eq!(got.status, 502);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decompression_bombs_are_refused() {
    let backend = bad_backend().await;
    let server = proxy(backend.addr, "[compression]\nmax_decoded_mb = 1").await;
    let (addr, c) = (server.http[0], client());
    // A gzip client gets the bytes as they came; they are not stored.
    let got = send(&c, addr, "GET", "/bomb", &[("accept-encoding", "gzip")]).await;
    assert!(got.body == encode("gzip", &vec![0u8; 16 << 20]));
    let again = send(&c, addr, "GET", "/bomb", &[("accept-encoding", "gzip")]).await;
    assert_eq!(again.cache(), "miss");
    assert_eq!(stats(&server).await["encoding_refused"], 2);
    // A client that needs it decoded: its first decoded chunk already passes 1 MiB, before
    // any head was sent: 502 (a bomb that passes the limit later is cut, as a broken body is:
    // tests/corrupt_codings.rs).
    let got = send(&c, addr, "GET", "/bomb", &[]).await;
    assert_eq!(got.status, 502);
    assert_eq!(got.header("content-encoding"), "");
    server.shutdown().await;
}

// `[compression] coding = "br"`: plain pages stored brotli-compressed by kura; br clients get
// the stored bytes, the others the page decoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brotli_storage_serves_br_clients_and_decodes_for_the_others() {
    let backend = coding_backend("none").await;
    let server = proxy(backend.addr, "[compression]\ncoding = \"br\"").await;
    let (addr, c) = (server.http[0], client());
    let miss = send(&c, addr, "GET", "/b", &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(
        (miss.cache(), miss.header("content-encoding")),
        ("miss", "br")
    );
    let hit = send(&c, addr, "GET", "/b", &[("accept-encoding", "br")]).await;
    assert_eq!((hit.cache(), hit.header("content-encoding")), ("hit", "br"));
    assert_eq!(hit.header("etag"), "W/\"p1\"", "kura's coding: a weak tag");
    assert!(hit.body.len() * 3 < page().len());
    let mut decoded = Vec::new();
    brotli::BrotliDecompress(&mut &hit.body[..], &mut decoded).unwrap();
    assert!(decoded == page());
    let gzip = send(&c, addr, "GET", "/b", &[("accept-encoding", "gzip")]).await;
    assert_eq!(gzip.header("content-encoding"), "gzip");
    assert_eq!(gzip.header("etag"), "W/\"p1\"", "transcoded: a weak tag");
    assert!(gunzip(&gzip.body, "br storage") == page());
    for accept in [Some("identity"), None] {
        let headers: Vec<(&str, &str)> =
            accept.map(|a| ("accept-encoding", a)).into_iter().collect();
        let plain = send(&c, addr, "GET", "/b", &headers).await;
        assert_eq!(
            (plain.cache(), plain.header("content-encoding")),
            ("hit", "")
        );
        assert_eq!(
            plain.header("etag"),
            "\"p1\"",
            "the backend's own bytes: its tag"
        );
        assert_eq!(plain.header("content-length"), page().len().to_string());
        assert!(plain.body == page());
    }
    let (head, body) = curl_compressed(addr, "/b", &[]).await;
    assert!(head.contains("content-encoding: br"), "{head}");
    assert!(body == page());
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
}
