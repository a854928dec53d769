//! A backend whose coded body is broken (gzip, br or zstd that is not what `Content-Encoding`
//! says), decoded for a client that does not accept the coding: a `502` with a head when the
//! body's start cannot be decoded, whether the response is stored, private or passed; a
//! response whose head went out before the break (a gzip body whose checksum is wrong) is cut
//! without its chunked end, so the client sees an error rather than a complete page.

mod common;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use common::wire::GUARD;
use common::*;
use http::Response;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// 40 KB of text.
fn page() -> Vec<u8> {
    (0..2000u32)
        .flat_map(|i| format!("<p>line {i} of the page</p>\n").into_bytes())
        .collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn coded(coding: &str, cache_control: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = reply(
        200,
        &[
            ("cache-control", cache_control),
            ("content-type", "text/html"),
            ("content-encoding", coding),
            ("etag", "\"v1\""),
        ],
        "",
    );
    *response.body_mut() = Full::new(Bytes::from(body));
    response
}

/// What an attacker-controlled (or broken) backend sends.
async fn broken_backend() -> Backend {
    Backend::start(Duration::ZERO, |seen| {
        let garbage = b"this is not compressed at all, whatever the field says".to_vec();
        match seen.uri.path() {
            "/gzip" => coded("gzip", "max-age=60", garbage),
            "/br-private" => coded("br", "no-store", garbage),
            "/zstd" => coded("zstd", "max-age=60", garbage),
            "/bad-crc" => {
                // Valid deflate data, then a checksum that is not the content's.
                let mut body = gzip(&page());
                let at = body.len() - 8;
                body[at] ^= 0xff;
                coded("gzip", "max-age=60", body)
            }
            // Stored valid; a request whose precondition is the origin's is passed, and
            // then the backend sends garbage.
            _ if seen.headers.contains_key("if-match") => coded("gzip", "max-age=60", garbage),
            _ => coded("gzip", "max-age=60", gzip(&page())),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_cannot_be_decoded_gets_a_502_with_a_head() {
    let backend = broken_backend().await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for path in ["/gzip", "/br-private", "/zstd"] {
        // The client accepts none of the codings: kura must decode, and cannot.
        let got = send(&c, addr, "GET", path, &[("accept-encoding", "identity")]).await;
        assert_eq!(got.status, 502, "{path}");
        assert_eq!(got.cache(), "synth", "{path}");
        assert_eq!(&got.body[..], b"502 Bad Gateway\n", "{path}");
    }
    // A client that accepts the coding gets the bytes as the backend sent them.
    let got = send(&c, addr, "GET", "/gzip", &[("accept-encoding", "gzip")]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.header("content-encoding"), "gzip");
    // Passed (If-Match is the origin's), the stored copy valid, the backend's answer not.
    let stored = send(&c, addr, "GET", "/page", &[("accept-encoding", "identity")]).await;
    assert_eq!(
        (stored.status.as_u16(), &stored.body[..]),
        (200, &page()[..])
    );
    let passed = send(
        &c,
        addr,
        "GET",
        "/page",
        &[("accept-encoding", "identity"), ("if-match", "\"v1\"")],
    )
    .await;
    assert_eq!(passed.status, 502);
    // The connection is still good for the next request (no garbage, no half response).
    let again = send(&c, addr, "GET", "/page", &[("accept-encoding", "identity")]).await;
    assert_eq!((again.status.as_u16(), again.cache()), (200, "hit"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_breaks_after_the_head_is_cut_without_its_end() {
    let backend = broken_backend().await;
    let server = proxy(backend.addr, "").await;
    let mut stream = tokio::net::TcpStream::connect(server.http[0])
        .await
        .unwrap();
    stream
        .write_all(b"GET /bad-crc HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut got))
        .await
        .expect("kura ends the connection")
        .unwrap();
    let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 200 "), "{text:.200}");
    assert!(text.contains("transfer-encoding: chunked"), "{text:.400}");
    // Most of the page went out decoded, but never the chunked body's last chunk: a client
    // knows the body is incomplete.
    assert!(text.contains("<p>line 1000 of the page</p>"));
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "the body was ended as if complete"
    );
    // Not stored: the next request goes to the backend again.
    let (count, mut again) = (backend.count(), Vec::new());
    let mut stream = tokio::net::TcpStream::connect(server.http[0])
        .await
        .unwrap();
    stream
        .write_all(b"GET /bad-crc HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(GUARD, stream.read_to_end(&mut again))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(backend.count(), count + 1);
    assert_eq!(stats(&server).await["encoding_refused"], 2);
    server.shutdown().await;
}
