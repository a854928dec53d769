//! Malformed requests and misbehaving backends, spoken byte by byte over TCP.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const NO_DELAY: Duration = Duration::ZERO;

/// Sends raw bytes and reads until the proxy closes the connection (bounded by a guard
/// timeout: a proxy that keeps the connection open fails the test).
async fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut out))
        .await
        .expect("the proxy closes the connection")
        .ok();
    String::from_utf8_lossy(&out).into_owned()
}

fn status(response: &str) -> &str {
    response.get(9..12).unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_4xx_and_close() {
    let backend = Backend::start(NO_DELAY, |_| reply(200, &[], "ok")).await;
    let server = proxy(backend.addr, "").await;
    let addr = server.http[0];
    let bad_byte = raw(addr, b"GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n").await;
    assert_eq!(status(&bad_byte), "400", "{bad_byte}");
    let bad_name = raw(addr, b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n").await;
    assert_eq!(status(&bad_name), "400");
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 * 1024)
    );
    let huge = raw(addr, huge.as_bytes()).await;
    assert_eq!(status(&huge), "431", "{huge}");
    let long_url = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "u".repeat(9000));
    let long_url = raw(addr, long_url.as_bytes()).await;
    assert_eq!(status(&long_url), "414");
    assert!(long_url.to_ascii_lowercase().contains("connection: close"));
    let no_host = raw(addr, b"GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(status(&no_host), "400");
    let two_hosts = raw(addr, b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").await;
    assert_eq!(status(&two_hosts), "400");
    let two_lengths = raw(
        addr,
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    )
    .await;
    assert_eq!(status(&two_lengths), "400");
    let bad_te = raw(
        addr,
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
    )
    .await;
    assert_eq!(status(&bad_te), "400");
    let connect = raw(
        addr,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status(&connect), "405");
    assert_eq!(backend.count(), 0, "nothing malformed reached the backend");
    assert!(stats(&server).await["bad_requests"].as_u64().unwrap() >= 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_length_with_transfer_encoding_is_refused() {
    let backend = Backend::start(NO_DELAY, |seen| {
        reply(200, &[], &format!("{} {}", seen.method, seen.uri.path()))
    })
    .await;
    let server = proxy(backend.addr, "").await;
    // A smuggling attempt after a good request on the same connection: the good one is
    // answered, the one with both framing fields gets 400 and the connection closes, so the
    // bytes after it are never read as a request.
    let response = raw(
        server.http[0],
        b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\nPOST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert_eq!(response.matches("HTTP/1.1 ").count(), 2, "{response}");
    assert!(response.contains("HTTP/1.1 400"), "{response}");
    let seen = backend.seen.lock().clone();
    assert_eq!(seen.len(), 1, "only the good request reached the backend");
    assert_eq!(seen[0].uri.path(), "/ok");
    assert_eq!(stats(&server).await["bad_requests"], 1);
    server.shutdown().await;
}

/// A backend that answers every connection with `answer` (or closes it when `None`), or never
/// answers when `hang`.
async fn bad_backend(answer: Option<&'static [u8]>, hang: bool) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                if hang {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                if let Some(answer) = answer {
                    let _ = stream.write_all(answer).await;
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_backends_give_502_or_503() {
    let c = client();
    let garbage = proxy(bad_backend(Some(b"SPDY/9 what\r\n\r\n"), false).await, "").await;
    let got = get(&c, garbage.http[0], "/").await;
    assert_eq!((got.status.as_u16(), got.cache()), (502, "synth"));
    garbage.shutdown().await;

    let reset = proxy(bad_backend(None, false).await, "").await;
    assert_eq!(get(&c, reset.http[0], "/").await.status, 502);
    reset.shutdown().await;

    let slow = proxy(bad_backend(None, true).await, "first_byte_timeout = 0.3").await;
    assert_eq!(get(&c, slow.http[0], "/").await.status, 503);
    slow.shutdown().await;

    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere = closed.local_addr().unwrap();
    drop(closed);
    let refused = proxy(nowhere, "").await;
    let got = get(&c, refused.http[0], "/").await;
    assert_eq!(got.status, 503);
    assert_eq!(stats(&refused).await["backend_errors"], 1);
    refused.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_short_is_not_stored() {
    // Promises 100 bytes, sends 5, closes.
    let addr = bad_backend(
        Some(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=100\r\nContent-Length: 100\r\n\r\nhello"),
        false,
    )
    .await;
    let server = proxy(addr, "").await;
    let c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let uri: http::Uri = format!("http://{}/cut", server.http[0]).parse().unwrap();
    // The client sees the response break (before or after its head, as the bytes fall).
    for _ in 0..2 {
        let broke = match c.get(uri.clone()).await {
            Err(_) => true,
            Ok(response) => response.into_body().collect().await.is_err(),
        };
        assert!(broke);
    }
    assert_eq!(stats(&server).await["objects"], 0);
    assert_eq!(stats(&server).await["stored"], 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_wait_for_a_free_one() {
    let backend = Backend::start(NO_DELAY, |_| reply(200, &[], "ok")).await;
    let server = proxy(backend.addr, "max_connections = 2").await;
    let addr = server.http[0];
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    // Not served while two connections are open (the check cannot pass wrongly: a served
    // request would answer within the wait).
    let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut byte)).await;
    assert!(early.is_err(), "served past max_connections");
    drop(first);
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), third.read_to_end(&mut out))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert!(String::from_utf8_lossy(&out).contains("200 OK"));
    server.shutdown().await;
}
