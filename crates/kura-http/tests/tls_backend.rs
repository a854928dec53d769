//! `https://` backends: a test CA and server certificates made here (rcgen), a TLS backend
//! (tokio-rustls and hyper, HTTP/2 when it offers `h2`), recording the SNI and HTTP version
//! of what it gets. kura fetches and caches over TLS, speaks HTTP/2 when offered, refuses a
//! certificate of another CA or another name (no content, an error counted, never plaintext),
//! takes `tls_sni`, probes over TLS, and refuses bad TLS settings at start.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use common::{client, eventually, get, send, stats, temp_dir};
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kura_http::{Config, Server};
use kura_testkit::pki;
use parking_lot::Mutex;
use rcgen::ExtendedKeyUsagePurpose;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::rustls;

/// A test CA and the file its certificate is written to.
struct Ca {
    pem: PathBuf,
    ca: pki::Ca,
}

fn new_ca(dir: &Path, name: &str) -> Ca {
    let ca = pki::Ca::new(name);
    let pem = dir.join(format!("{name}.pem"));
    ca.write(&pem);
    Ca { pem, ca }
}

/// What the TLS backend saw of one request: the SNI of its connection, its version, its
/// authority (`:authority` in HTTP/2, `Host` in HTTP/1.1) and path.
#[derive(Debug, Clone)]
struct Seen {
    sni: Option<String>,
    version: Version,
    authority: String,
    path: String,
    body: Bytes,
}

/// A TLS backend with a certificate for `names` signed by `ca`, offering `h2` if asked.
struct TlsBackend {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    handshakes: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TLS acceptor with a certificate for `names` signed by `ca`, offering `h2` if asked.
fn acceptor(ca: &Ca, names: &[&str], h2: bool) -> tokio_rustls::TlsAcceptor {
    acceptor_with(ca, names, h2, None)
}

/// The same, asking for a client certificate of `clients` when given.
fn acceptor_with(
    ca: &Ca,
    names: &[&str],
    h2: bool,
    clients: Option<&Ca>,
) -> tokio_rustls::TlsAcceptor {
    let (cert, key) = ca.ca.sign(names, Some(ExtendedKeyUsagePurpose::ServerAuth));
    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(clients) => {
            let mut roots = rustls::RootCertStore::empty();
            let pem = std::fs::read(&clients.pem).unwrap();
            let der = CertificateDer::from_pem_slice(&pem).unwrap();
            roots.add(der).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = if h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

async fn tls_backend(ca: &Ca, names: &[&str], h2: bool) -> TlsBackend {
    serve(acceptor(ca, names, h2)).await
}

async fn serve(acceptor: tokio_rustls::TlsAcceptor) -> TlsBackend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let handshakes = Arc::new(AtomicUsize::new(0));
    let (log, count) = (seen.clone(), handshakes.clone());
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, log, count) = (acceptor.clone(), log.clone(), count.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let (_, session) = stream.get_ref();
                let sni = session.server_name().map(str::to_owned);
                let h2 = session.alpn_protocol() == Some(b"h2");
                let service = service_fn(move |request: Request<Incoming>| {
                    let (sni, log) = (sni.clone(), log.clone());
                    async move {
                        let (parts, body) = request.into_parts();
                        let authority = parts.uri.authority().map_or_else(
                            || {
                                let host = parts.headers.get("host");
                                host.map_or("", |h| h.to_str().unwrap_or("")).to_owned()
                            },
                            ToString::to_string,
                        );
                        let body = body.collect().await.map(|b| b.to_bytes());
                        let body = body.unwrap_or_default();
                        log.lock().push(Seen {
                            sni,
                            version: parts.version,
                            authority,
                            path: parts.uri.path().to_owned(),
                            body: body.clone(),
                        });
                        // A POST gets its body back; anything else the same cacheable page.
                        let answer = if parts.method == http::Method::POST {
                            Bytes::from([&b"got:"[..], &body].concat())
                        } else {
                            Bytes::from_static(b"secure")
                        };
                        let mut response = Response::new(Full::new(answer));
                        response
                            .headers_mut()
                            .insert("cache-control", "max-age=60".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
                let io = TokioIo::new(stream);
                if h2 {
                    let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(io, service).await;
                } else {
                    let builder = hyper::server::conn::http1::Builder::new();
                    let _ = builder.serve_connection(io, service).await;
                }
            });
        }
    });
    TlsBackend {
        addr,
        seen,
        handshakes,
        task,
    }
}

/// The configuration text of a proxy whose default backend is `server` with pool settings.
fn config_text(server: &str, pool: &str) -> String {
    format!(
        "listen = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\nthreads = 2\nmemory_mb = 16\n\
         [backends.default]\nservers = [\"{server}\"]\n{pool}\n"
    )
}

async fn proxy(server: &str, pool: &str) -> Server {
    Server::start(Config::from_toml(&config_text(server, pool)).unwrap())
        .await
        .unwrap()
}

/// The CA line of a pool.
fn trusting(ca: &Ca) -> String {
    format!("tls_ca = \"{}\"", ca.pem.display())
}

/// A proxy in front of `url`, fetching `/page` through it: the status and body served, and the
/// backend errors counted.
async fn fetch_through(url: &str, pool: &str) -> (u16, Bytes, u64) {
    let server = proxy(url, pool).await;
    let got = get(&client(), server.http[0], "/page").await;
    let errors = stats(&server).await["backend_errors"].as_u64().unwrap();
    (got.status.as_u16(), got.body, errors)
}

#[tokio::test]
async fn fetches_and_caches_over_tls_with_http2_when_offered() {
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let backend = tls_backend(&ca, &["localhost"], true).await;
    let url = format!("https://localhost:{}", backend.addr.port());
    let server = proxy(&url, &trusting(&ca)).await;
    let c = client();
    let addr = server.http[0];
    let host = [("host", "www.example.test")];
    let first = send(&c, addr, "GET", "/page", &host).await;
    assert_eq!(first.status, 200);
    assert_eq!(&first.body[..], b"secure");
    let second = send(&c, addr, "GET", "/page", &host).await;
    assert_eq!(&second.body[..], b"secure");
    assert_eq!(second.cache(), "hit", "{:?}", second.headers);
    send(&c, addr, "GET", "/other", &host).await;
    let seen = backend.seen.lock().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for request in &seen {
        assert_eq!(request.version, Version::HTTP_2);
        assert_eq!(request.sni.as_deref(), Some("localhost"));
        // The site's name, as Host carries it over HTTP/1.1.
        assert_eq!(request.authority, "www.example.test");
    }
    assert_eq!(
        (seen[0].path.as_str(), seen[1].path.as_str()),
        ("/page", "/other")
    );
    // Both over one multiplexed connection.
    assert_eq!(backend.handshakes.load(Ordering::SeqCst), 1);
    assert_eq!(stats(&server).await["backend_errors"], 0);
}

#[tokio::test]
async fn request_bodies_reach_an_http2_backend_whole() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let backend = tls_backend(&ca, &["localhost"], true).await;
    let url = format!("https://localhost:{}", backend.addr.port());
    let server = proxy(&url, &trusting(&ca)).await;
    let addr = server.http[0];
    // With a length.
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let sized = "POST /form HTTP/1.1\r\nHost: site.test\r\nContent-Length: 7\r\nConnection: close\r\n\r\na=1&b=2";
    client.write_all(sized.as_bytes()).await.unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("got:a=1&b=2"), "{answer}");
    // Chunked: sent on with no length, which HTTP/2 frames by itself.
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let chunked = "POST /form HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    client.write_all(chunked.as_bytes()).await.unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).await.unwrap();
    assert!(answer.ends_with("got:abcdefg"), "{answer}");
    let seen = backend.seen.lock().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.version == Version::HTTP_2));
    assert_eq!(
        (&seen[0].body[..], &seen[1].body[..]),
        (&b"a=1&b=2"[..], &b"abcdefg"[..])
    );
}

#[tokio::test]
async fn http1_over_tls_when_the_backend_offers_no_h2() {
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let backend = tls_backend(&ca, &["127.0.0.1"], false).await;
    let url = format!("https://{}", backend.addr);
    let server = proxy(&url, &trusting(&ca)).await;
    let got = send(
        &client(),
        server.http[0],
        "GET",
        "/a",
        &[("host", "site.test")],
    )
    .await;
    assert_eq!(&got.body[..], b"secure");
    let seen = backend.seen.lock().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].version, Version::HTTP_11);
    assert_eq!(seen[0].authority, "site.test");
    // An IP address is verified against the certificate's addresses and sent without SNI.
    assert_eq!(seen[0].sni, None);
}

#[tokio::test]
async fn a_certificate_of_another_ca_is_refused() {
    let dir = temp_dir("tls-backend");
    let (ca, stranger) = (new_ca(&dir, "ca"), new_ca(&dir, "stranger"));
    let backend = tls_backend(&stranger, &["localhost"], true).await;
    let url = format!("https://localhost:{}", backend.addr.port());
    let (status, body, errors) = fetch_through(&url, &trusting(&ca)).await;
    assert_eq!(status, 503);
    assert_ne!(&body[..], b"secure");
    assert!(errors >= 1);
    assert!(backend.seen.lock().is_empty());
    // Nor do the system's roots trust a test CA.
    let (status, _, _) = fetch_through(&url, "").await;
    assert_eq!(status, 503);
    assert!(backend.seen.lock().is_empty());
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused_unless_tls_sni_names_it() {
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let backend = tls_backend(&ca, &["app.internal"], true).await;
    let url = format!("https://localhost:{}", backend.addr.port());
    let (status, body, errors) = fetch_through(&url, &trusting(&ca)).await;
    assert_eq!(status, 503);
    assert_ne!(&body[..], b"secure");
    assert!(errors >= 1);
    assert!(backend.seen.lock().is_empty());
    let pool = format!("{}\ntls_sni = \"app.internal\"", trusting(&ca));
    let (status, body, errors) = fetch_through(&url, &pool).await;
    assert_eq!((status, &body[..], errors), (200, &b"secure"[..], 0));
    let seen = backend.seen.lock().clone();
    assert_eq!(seen[0].sni.as_deref(), Some("app.internal"));
}

#[tokio::test]
async fn a_plaintext_server_behind_an_https_url_is_refused() {
    let plain = common::Backend::start(std::time::Duration::ZERO, |_| {
        common::reply(200, &[], "plaintext")
    })
    .await;
    let url = format!("https://{}", plain.addr);
    let (status, body, errors) = fetch_through(&url, "").await;
    assert_eq!(status, 503);
    assert_ne!(&body[..], b"plaintext");
    assert!(errors >= 1);
    assert_eq!(plain.count(), 0, "no request sent in plaintext");
}

#[tokio::test]
async fn probes_go_over_tls() {
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let backend = tls_backend(&ca, &["localhost"], true).await;
    let url = format!("https://localhost:{}", backend.addr.port());
    // Starts sick: only a probe that got through TLS makes it healthy.
    let pool = format!(
        "{}\nprobe = {{ url = \"/health\", interval = 0.02, timeout = 1, window = 1, threshold = 1, initial = 0 }}",
        trusting(&ca)
    );
    let server = proxy(&url, &pool).await;
    let mut healthy = false;
    for _ in 0..500 {
        if stats(&server).await["backends"]["default"]["healthy"] == 1 {
            healthy = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(healthy, "never healthy");
    eventually("a probe seen", || {
        backend.seen.lock().iter().any(|s| s.path == "/health")
    })
    .await;
}

/// Why the configuration `text` is refused.
fn refusal(text: &str) -> String {
    match Config::from_toml(text) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_tls_settings_are_refused_at_start_naming_the_line() {
    let dir = temp_dir("tls-backend");
    let missing = dir.join("missing.pem");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let error = |server: &str, pool: &str| refusal(&config_text(server, pool));
    let e = error(
        "https://a.test",
        &format!("tls_ca = \"{}\"", missing.display()),
    );
    assert!(e.contains("line 5") && e.contains("missing.pem"), "{e}");
    let e = error(
        "https://a.test",
        &format!("tls_ca = \"{}\"", not_pem.display()),
    );
    assert!(e.contains("no usable CA certificate"), "{e}");
    let e = error("http://a.test", "tls_sni = \"a.test\"");
    assert!(e.contains("are for https:// servers"), "{e}");
    let e = error("https://a.test", "tls_sni = \"not a name\"");
    assert!(e.contains("tls_sni"), "{e}");
    let top = format!(
        "backend = \"https://a.test\"\nbackend_tls_ca = \"{}\"\nlisten = [\"127.0.0.1:0\"]\n",
        missing.display()
    );
    let e = refusal(&top);
    assert!(e.contains("line 2") && e.contains("backend_tls_ca"), "{e}");
}

#[tokio::test]
async fn backend_tls_ca_applies_to_every_https_server() {
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let backend = tls_backend(&ca, &["localhost"], false).await;
    let text = format!(
        "backend = \"https://localhost:{}\"\nbackend_tls_ca = \"{}\"\nlisten = [\"127.0.0.1:0\"]\nthreads = 2\nmemory_mb = 16\n",
        backend.addr.port(),
        ca.pem.display()
    );
    let server = Server::start(Config::from_toml(&text).unwrap())
        .await
        .unwrap();
    let got = get(&client(), server.http[0], "/x").await;
    assert_eq!(&got.body[..], b"secure");
    assert_eq!(backend.seen.lock()[0].version, Version::HTTP_11);
}

/// A TLS backend offering h2 that answers one upgrade request with 101 and then echoes bytes;
/// it sends the protocol ALPN chose.
async fn upgrade_backend(ca: &Ca) -> (SocketAddr, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let acceptor = acceptor(ca, &["localhost"], true);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (alpn_tx, alpn_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut stream = acceptor.accept(tcp).await.unwrap();
        let alpn = stream
            .get_ref()
            .1
            .alpn_protocol()
            .unwrap_or_default()
            .to_vec();
        let _ = alpn_tx.send(alpn);
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        let answer =
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n";
        stream.write_all(answer).await.unwrap();
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            stream.write_all(&buf[..n]).await.unwrap();
        }
    });
    (addr, alpn_rx)
}

#[tokio::test]
async fn upgrades_are_piped_over_tls_as_http1() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = temp_dir("tls-backend");
    let ca = new_ca(&dir, "ca");
    let (backend, alpn) = upgrade_backend(&ca).await;
    let url = format!("https://localhost:{}", backend.port());
    let server = proxy(&url, &trusting(&ca)).await;
    let mut client = tokio::net::TcpStream::connect(server.http[0])
        .await
        .unwrap();
    client
        .write_all(b"GET /chat HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(client.read(&mut byte).await.unwrap(), 1, "closed: {head:?}");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    assert_eq!(alpn.await.unwrap(), b"http/1.1", "a pipe offers no h2");
    client.write_all(b"ping over tls").await.unwrap();
    let mut echoed = [0u8; 13];
    client.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"ping over tls");
}

#[tokio::test]
async fn a_client_certificate_is_sent_when_configured() {
    let dir = temp_dir("tls-backend");
    let (ca, clients) = (new_ca(&dir, "ca"), new_ca(&dir, "clients"));
    let backend = serve(acceptor_with(&ca, &["localhost"], true, Some(&clients))).await;
    let url = format!("https://localhost:{}", backend.addr.port());
    // Without one, the backend refuses the connection: nothing is served.
    let (status, body, errors) = fetch_through(&url, &trusting(&ca)).await;
    assert!(status >= 500, "{status}");
    assert_ne!(&body[..], b"secure");
    assert!(errors >= 1);
    assert!(backend.seen.lock().is_empty());
    // With one its CA signed, the request goes through.
    let client = ExtendedKeyUsagePurpose::ClientAuth;
    clients.ca.write_leaf(&dir, "client", &["kura"], client);
    let (cert_pem, key_pem) = (dir.join("client.pem"), dir.join("client-key.pem"));
    let pool = format!(
        "{}\ntls_cert = \"{}\"\ntls_key = \"{}\"",
        trusting(&ca),
        cert_pem.display(),
        key_pem.display()
    );
    let (status, body, errors) = fetch_through(&url, &pool).await;
    assert_eq!((status, &body[..], errors), (200, &b"secure"[..], 0));
    // A certificate without its key, or a key that is not one, is refused at start.
    let e = refusal(&config_text(
        &url,
        &format!("tls_cert = \"{}\"", cert_pem.display()),
    ));
    assert!(e.contains("go together"), "{e}");
    let e = refusal(&config_text(
        &url,
        &format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"",
            cert_pem.display(),
            cert_pem.display()
        ),
    ));
    assert!(e.contains("tls_key"), "{e}");
}
