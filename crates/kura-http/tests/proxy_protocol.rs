//! kura http behind load balancers: PROXY protocol v1 and v2 headers from a test client on a
//! `listen_proxy` listener (the purge ACL, the access log and `X-Forwarded-For` see the client
//! they name), their refusals (none, broken, from an untrusted address, on a plain listener),
//! and `X-Forwarded-For` read only from `trusted_proxies`.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::wire::Conn;
use common::*;

/// A PROXY v2 header for a TCP/IPv4 client `ip:port`.
fn v2(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    out.extend_from_slice(&[0x21, 0x11, 0, 12]);
    out.extend_from_slice(&ip);
    out.extend_from_slice(&[127, 0, 0, 1]);
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&6081u16.to_be_bytes());
    out
}

fn v1(ip: &str) -> Vec<u8> {
    format!("PROXY TCP4 {ip} 127.0.0.1 51234 6081\r\n").into_bytes()
}

/// Sends `header` then `request` on a new connection; the answer's status and body.
async fn through(addr: SocketAddr, header: &[u8], request: &str) -> (u16, String) {
    let mut conn = Conn::open(addr).await;
    conn.send(&[header, request.as_bytes()].concat()).await;
    let got = conn.response(false).await.expect("an answer");
    (got.status, got.text())
}

async fn plain_backend() -> Backend {
    Backend::start(Duration::ZERO, |_| {
        reply(200, &[("cache-control", "max-age=60")], "ok")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_headers_name_the_client_for_the_acl_the_log_and_the_backend() {
    let backend = plain_backend().await;
    let log = temp_dir("proxy-protocol").join("access.log");
    let extra = format!(
        "listen_proxy = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"127.0.0.1\"]\naccess_log = {:?}\n\
         [purge]\nallow = [\"192.0.2.0/24\"]\n",
        log.display().to_string()
    );
    let server = proxy(backend.addr, &extra).await;
    let lb = server.proxied[0];
    let get = "GET /p HTTP/1.1\r\nHost: site.example\r\n\r\n";
    let purge = "PURGE /p HTTP/1.1\r\nHost: site.example\r\n\r\n";
    // v2: the backend gets the client it names in X-Forwarded-For.
    assert_eq!(through(lb, &v2([192, 0, 2, 8], 40000), get).await.0, 200);
    assert_eq!(backend.last().headers["x-forwarded-for"], "192.0.2.8");
    // v1 from a client inside the purge ACL, then from one outside it.
    assert_eq!(through(lb, &v1("192.0.2.7"), purge).await.0, 200);
    assert_eq!(through(lb, &v1("203.0.113.9"), purge).await.0, 403);
    // LOCAL (the balancer's health check): the connection's own address.
    let mut local = v2([192, 0, 2, 8], 1);
    local[12] = 0x20;
    assert_eq!(through(lb, &local, purge).await.0, 403);
    let mut logged = String::new();
    for _ in 0..500 {
        logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.lines().count() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let clients: Vec<&str> = logged.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(
        clients,
        ["192.0.2.8", "192.0.2.7", "203.0.113.9", "127.0.0.1"]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_broken_untrusted_or_misplaced_headers_are_refused() {
    let backend = plain_backend().await;
    let extra = "listen_proxy = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"127.0.0.1\"]\n\
                 [purge]\nallow = [\"192.0.2.0/24\"]\n";
    let server = proxy(backend.addr, extra).await;
    let (lb, plain) = (server.proxied[0], server.http[0]);
    let get = "GET /p HTTP/1.1\r\nHost: site.example\r\n\r\n";
    for (header, why) in [
        (&b""[..], "no PROXY protocol header"),
        (b"PROXY TCP4 999.0.2.7 127.0.0.1 1 2\r\n", "bad address"),
        (b"PROXY TCP4 192.0.2.7 127.0.0.1 1 2\n", "CRLF"),
        (&v2([192, 0, 2, 7], 1)[..15], "ended inside"),
    ] {
        let mut conn = Conn::open(lb).await;
        conn.send(header).await;
        if header.is_empty() {
            conn.send(get.as_bytes()).await;
        }
        if header.len() == 15 {
            // Cut short: the balancer went away.
            conn.shutdown_write().await;
        }
        let got = conn.response(false).await.expect("a refusal");
        assert_eq!(got.status, 400, "{why}");
        assert!(got.text().contains(why), "{why}: {}", got.text());
        assert!(conn.closed().await, "{why}");
    }
    let before = backend.count();
    // A PROXY header on a plain listener is no request: 400, and no client is believed.
    for header in [v1("192.0.2.7"), v2([192, 0, 2, 7], 1)] {
        let purge = "PURGE /p HTTP/1.1\r\nHost: site.example\r\n\r\n";
        assert_eq!(through(plain, &header, purge).await.0, 400);
    }
    assert_eq!(backend.count(), before);
    // A refusal is counted as its connection ends, which may be just after the client read
    // the 400: wait (bounded) for the fourth rather than race it.
    let mut refused = stats(&server).await["proxy_protocol_refused"].clone();
    for _ in 0..500 {
        if refused == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        refused = stats(&server).await["proxy_protocol_refused"].clone();
    }
    assert_eq!(refused, 4);
    server.shutdown().await;

    // A header from an address that is not a trusted balancer.
    let extra = "listen_proxy = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"10.0.0.0/8\"]\n";
    let server = proxy(backend.addr, extra).await;
    let (status, text) = through(server.proxied[0], &v1("192.0.2.7"), get).await;
    assert_eq!(status, 400);
    assert!(text.contains("not in trusted_proxies"), "{text}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_forwarded_for_names_the_client_only_from_trusted_proxies() {
    let backend = plain_backend().await;
    let c = client();
    let acl = "[purge]\nallow = [\"192.0.2.0/24\"]\n";
    let trusting = proxy(
        backend.addr,
        &format!("trusted_proxies = [\"127.0.0.1\"]\n{acl}"),
    )
    .await;
    let addr = trusting.http[0];
    get(&c, addr, "/p").await;
    let from = |xff: &'static str| [("x-forwarded-for", xff)];
    let purged = send(&c, addr, "PURGE", "/p", &from("203.0.113.1, 192.0.2.7")).await;
    assert_eq!(purged.status, 200);
    let refused = send(&c, addr, "PURGE", "/p", &from("192.0.2.7, 203.0.113.1")).await;
    assert_eq!(
        refused.status, 403,
        "the nearest untrusted address is the client"
    );
    // The backend gets the list with the connection's peer appended, not the judged client.
    get(&c, addr, "/q").await;
    send(&c, addr, "GET", "/q2", &from("192.0.2.7")).await;
    assert_eq!(
        backend.last().headers["x-forwarded-for"],
        "192.0.2.7, 127.0.0.1"
    );
    trusting.shutdown().await;
    // Without trusted_proxies, X-Forwarded-For names nobody.
    let strict = proxy(backend.addr, acl).await;
    let addr = strict.http[0];
    get(&c, addr, "/p").await;
    assert_eq!(
        send(&c, addr, "PURGE", "/p", &from("192.0.2.7"))
            .await
            .status,
        403
    );
    strict.shutdown().await;
}

/// A TLS client connection to `addr` that sends `header` first: alone, then the handshake
/// (`together` false), or in the same write as the `ClientHello` (true).
async fn tls_through(
    addr: SocketAddr,
    cert: &rcgen::CertifiedKey<rcgen::KeyPair>,
    header: &[u8],
    together: bool,
) -> std::io::Result<tokio_rustls::client::TlsStream<First<tokio::net::TcpStream>>> {
    use tokio::io::AsyncWriteExt;
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from(
            cert.cert.der().to_vec(),
        ))
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    let first = if together {
        header.to_vec()
    } else {
        tcp.write_all(header).await?;
        Vec::new()
    };
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, First(tcp, first)).await
}

/// A stream whose first write carries these bytes before its own.
struct First<S>(S, Vec<u8>);

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for First<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for First<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.1.is_empty() {
            return std::pin::Pin::new(&mut self.0).poll_write(cx, buf);
        }
        // Header and data in one write (one segment). On loopback an empty socket takes a
        // ClientHello whole; anything less fails the test rather than being retried.
        let mut both = std::mem::take(&mut self.1);
        let header = both.len();
        both.extend_from_slice(buf);
        match std::pin::Pin::new(&mut self.0).poll_write(cx, &both) {
            std::task::Poll::Ready(Ok(n)) if n == both.len() => {
                std::task::Poll::Ready(Ok(n - header))
            }
            std::task::Poll::Ready(Ok(_)) => std::task::Poll::Ready(Err(std::io::Error::other(
                "the header and the ClientHello did not go in one write",
            ))),
            other => {
                both.truncate(header);
                self.1 = both;
                other
            }
        }
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_headers_before_the_tls_handshake() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = plain_backend().await;
    let dir = temp_dir("proxy-tls");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let tls = format!(
        "[[tls]]\nlisten = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\nproxy_protocol = true\n",
        dir.join("cert.pem").to_str().unwrap(),
        dir.join("key.pem").to_str().unwrap()
    );
    // Refused at load without trusted balancers.
    let error =
        kura_http::Config::from_toml(&format!("backend = \"http://{}\"\n{tls}", backend.addr))
            .unwrap_err()
            .to_string();
    assert!(error.contains("trusted_proxies"), "{error}");
    let extra =
        format!("trusted_proxies = [\"127.0.0.1\"]\n[purge]\nallow = [\"192.0.2.0/24\"]\n{tls}");
    let server = proxy(backend.addr, &extra).await;
    let lb = server.https[0];
    // One request on a new connection through the "balancer": the answer's first line.
    let once = |header: Vec<u8>, together: bool, request: &'static str| {
        let cert = &cert;
        async move {
            let mut conn = tls_through(lb, cert, &header, together).await.unwrap();
            conn.write_all(request.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            let _ = conn.read_to_end(&mut got).await;
            let text = String::from_utf8_lossy(&got).into_owned();
            text.lines().next().unwrap_or_default().to_owned()
        }
    };
    for (header, together, client) in [
        (v1("192.0.2.7"), false, "192.0.2.7"),
        (v2([192, 0, 2, 8], 40000), true, "192.0.2.8"),
        (v1("203.0.113.9"), true, "203.0.113.9"),
    ] {
        let get = "GET /t HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n";
        assert_eq!(once(header.clone(), together, get).await, "HTTP/1.1 200 OK");
        assert_eq!(backend.last().headers["x-forwarded-for"], client);
        // The purge ACL judges the client the header named.
        let purge = "PURGE /t HTTP/1.1\r\nHost: site.example\r\nConnection: close\r\n\r\n";
        let want = if client.starts_with("192.0.2.") {
            "HTTP/1.1 200 OK"
        } else {
            "HTTP/1.1 403 Forbidden"
        };
        assert_eq!(once(header, together, purge).await, want, "{client}");
    }
    // A TLS client without a header: no handshake, refused and counted.
    let refused = tls_through(lb, &cert, b"", false).await;
    assert!(refused.is_err());
    eventually_stat(&server, "proxy_protocol_refused", 1).await;
    server.shutdown().await;
    std::fs::remove_dir_all(dir).ok();
}

/// Waits (bounded) for figure `name` of `/stats` to be `want`.
async fn eventually_stat(server: &kura_http::Server, name: &str, want: u64) {
    for _ in 0..500 {
        if stats(server).await[name] == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{name} never reached {want}");
}
