//! What an operator sees and sets: /stats, /metrics, the access log, TLS with HTTP/2.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

const NO_DELAY: Duration = Duration::ZERO;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_metrics_and_access_log() {
    let backend = Backend::start(NO_DELAY, |seen| match seen.uri.path() {
        "/p" => reply(200, &[("cache-control", "private")], "p"),
        _ => reply(200, &[("cache-control", "max-age=100")], "0123456789"),
    })
    .await;
    let dir = temp_dir("log");
    let log = dir.join("access.log");
    let server = proxy(
        backend.addr,
        &format!("access_log = {:?}", log.to_str().unwrap()),
    )
    .await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/x").await;
    get(&c, addr, "/x").await;
    get(&c, addr, "/p").await;
    let stats = stats(&server).await;
    assert_eq!(stats["requests"]["hit"], 1);
    assert_eq!(stats["requests"]["miss"], 1);
    assert_eq!(stats["requests"]["pass"], 1);
    assert_eq!(stats["hit_ratio"], 0.5);
    assert_eq!(
        stats["objects"].as_u64().unwrap(),
        2,
        "the object and /p's hit-for-miss marker"
    );
    assert!(stats["bytes"].as_u64().unwrap() > 10);
    assert_eq!(stats["limit_bytes"], 16 << 20);
    assert_eq!(stats["backend_healthy"], 1);
    let metrics = get(&c, server.admin.unwrap(), "/metrics").await;
    let text = std::str::from_utf8(&metrics.body).unwrap();
    assert!(
        text.contains("kura_http_requests_total{outcome=\"hit\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("# TYPE kura_http_objects gauge\nkura_http_objects 2\n"));
    assert!(text.contains("kura_http_backend_healthy 1\n"));
    assert!(text.contains("kura_http_hit_ratio 0.5\n"));
    assert_eq!(get(&c, server.admin.unwrap(), "/nope").await.status, 404);
    let mut lines = Vec::new();
    for _ in 0..200 {
        lines = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if lines.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(lines.len(), 3, "{lines:?}");
    // varnishncsa's default line (tests/access_log.rs has the formats).
    assert!(lines[0].starts_with("127.0.0.1 - - ["));
    let x = format!("\"GET http://{addr}/x HTTP/1.1\" 200 10 \"-\" \"-\"");
    assert!(lines[0].ends_with(&x), "{}", lines[0]);
    assert!(lines[1].ends_with(&x), "{}", lines[1]);
    assert!(lines[2].contains(&format!("\"GET http://{addr}/p HTTP/1.1\" 200 ")));
    server.shutdown().await;
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_http2() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "secure")
    })
    .await;
    let dir = temp_dir("tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let server = proxy(
        backend.addr,
        &format!(
            "[[tls]]\nlisten = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\n",
            dir.join("cert.pem").to_str().unwrap(),
            dir.join("key.pem").to_str().unwrap()
        ),
    )
    .await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(cert.cert.der().to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(server.https[0]).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(connection);
    let outcomes = twice_over_h2(&mut sender, "https://localhost/s", "secure").await;
    assert_eq!(outcomes, ["miss", "hit"]);
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_listener() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "local")
    })
    .await;
    let dir = temp_dir("unix");
    let socket = dir.join("kura-http.sock");
    let server = proxy(
        backend.addr,
        &format!("listen_unix = [{:?}]", socket.to_str().unwrap()),
    )
    .await;
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = http::Request::get("/u")
            .header("host", "example")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        outcomes.push(response.headers()["x-cache"].to_str().unwrap().to_owned());
        assert_eq!(
            response.into_body().collect().await.unwrap().to_bytes(),
            "local"
        );
    }
    assert_eq!(outcomes, ["miss", "hit"]);
    server.shutdown().await;
    assert!(!socket.exists(), "the socket file is removed at shutdown");
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_with_prior_knowledge_and_no_upgrade() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "clear")
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let tcp = TcpStream::connect(server.http[0]).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(connection);
    let url = format!("http://{}/c", server.http[0]);
    let outcomes = twice_over_h2(&mut sender, &url, "clear").await;
    assert_eq!(outcomes, ["miss", "hit"]);
    // HTTP/1.1 on the same listener still works, and `Upgrade: h2c` is not taken up.
    let c = client();
    assert_eq!(get(&c, server.http[0], "/c").await.cache(), "hit");
    let mut raw = TcpStream::connect(server.http[0]).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upgrade = format!(
        "GET /c HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade, HTTP2-Settings, close\r\n\
         Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        server.http[0]
    );
    raw.write_all(upgrade.as_bytes()).await.unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("clear"));
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
}

/// GETs `url` twice over an HTTP/2 connection, checking the version and body: the two
/// `X-Cache` outcomes.
async fn twice_over_h2(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    url: &str,
    body: &str,
) -> Vec<String> {
    let mut outcomes = Vec::new();
    for _ in 0..2 {
        let request = http::Request::get(url).body(Empty::<Bytes>::new()).unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        outcomes.push(response.headers()["x-cache"].to_str().unwrap().to_owned());
        assert_eq!(
            response.into_body().collect().await.unwrap().to_bytes(),
            body
        );
    }
    outcomes
}
