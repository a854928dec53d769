//! TLS (`-Z`) end to end: a throwaway CA, server and client certificates
//! made at test time, a real kura server, and a rustls client speaking the
//! text, meta and binary protocols over TLS.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use kura_server::tls::{MinVersion, VerifyMode};
use kura_server::{Server, ServerConfig, TlsConfig};
use kura_testkit::pki::Ca;
use rcgen::{ExtendedKeyUsagePurpose, KeyPair};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// A certificate and its key, for a client.
struct Identity {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

/// A CA, a server certificate for 127.0.0.1 and localhost signed by it, and
/// client certificates, written as PEM files into a fresh directory.
struct Pki {
    dir: PathBuf,
    ca: CertificateDer<'static>,
    /// A client certificate signed by the CA.
    client: Identity,
    /// A client certificate signed by some other CA.
    stranger: Identity,
}

fn client_identity(ca: &Ca) -> Identity {
    let (cert, key) = ca.sign(
        &["kura-test-client"],
        Some(ExtendedKeyUsagePurpose::ClientAuth),
    );
    Identity {
        cert: cert.der().clone(),
        key: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
    }
}

/// Writes `server.pem` and `server-key.pem` into `dir`: a certificate for
/// 127.0.0.1 and localhost signed by `ca`.
fn write_server_files(dir: &std::path::Path, ca: &Ca) {
    let names = ["127.0.0.1", "localhost"];
    ca.write_leaf(dir, "server", &names, ExtendedKeyUsagePurpose::ServerAuth);
}

impl Pki {
    fn new() -> Pki {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kura-tls-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Ca::new("kura test CA");
        ca.write(&dir.join("ca.pem"));
        write_server_files(&dir, &ca);
        let client = client_identity(&ca);
        let stranger = client_identity(&Ca::new("some other CA"));
        Pki {
            dir,
            ca: ca.cert().der().clone(),
            client,
            stranger,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The server's settings: TLS on, certificate and key from the files.
    fn tls(&self) -> TlsConfig {
        TlsConfig {
            enabled: true,
            chain_cert: Some(self.path("server.pem")),
            key: Some(self.path("server-key.pem")),
            ..TlsConfig::default()
        }
    }

    /// A client that trusts the CA, presenting `identity` if given.
    fn client(&self, identity: Option<&Identity>) -> Arc<ClientConfig> {
        self.client_with_versions(identity, rustls::DEFAULT_VERSIONS)
    }

    fn client_with_versions(
        &self,
        identity: Option<&Identity>,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.clone()).unwrap();
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(versions)
                .unwrap()
                .with_root_certificates(roots);
        Arc::new(match identity {
            Some(id) => builder
                .with_client_auth_cert(vec![id.cert.clone()], id.key.clone_key())
                .unwrap(),
            None => builder.with_no_client_auth(),
        })
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A blocking rustls client on one connection.
struct TlsClient {
    stream: StreamOwned<ClientConnection, TcpStream>,
}

impl TlsClient {
    /// Connects and completes the handshake (as far as the client sees it:
    /// under TLS 1.3 a server's refusal of the client's certificate arrives
    /// only with the first read).
    fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<TlsClient> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsClient { stream })
    }

    /// Sends `req` and reads until the reply ends with `end`.
    fn ask(&mut self, req: &[u8], end: &[u8]) -> std::io::Result<Vec<u8>> {
        self.stream.write_all(req)?;
        self.stream.flush()?;
        let mut out = Vec::new();
        let mut b = [0u8; 65536];
        while !out.ends_with(end) {
            let n = self.stream.read(&mut b)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            out.extend_from_slice(&b[..n]);
        }
        Ok(out)
    }

    fn roundtrip(&mut self, req: &[u8], want: &[u8]) {
        let got = self.ask(req, want).expect("TLS request");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }
}

/// True when a client with `config` cannot get a reply to `version`.
fn refused(addr: SocketAddr, config: Arc<ClientConfig>) -> bool {
    match TlsClient::connect(addr, config) {
        Err(_) => true,
        Ok(mut c) => c.ask(b"version\r\n", b"\r\n").is_err(),
    }
}

/// A TLS server with a plain `notls:` listener beside it.
fn start(pki: &Pki, tweak: impl FnOnce(&mut TlsConfig)) -> (TestServer, SocketAddr, SocketAddr) {
    let mut tls = pki.tls();
    tweak(&mut tls);
    let server = TestServer::with(|c| {
        c.listen = vec!["127.0.0.1".into(), "notls:127.0.0.1:0".into()];
        c.tls = tls;
    });
    let find = |want: bool| {
        server
            .tcp
            .iter()
            .find(|(_, tls)| *tls == want)
            .map(|(a, _)| *a)
            .expect("listener")
    };
    let (tls_addr, plain_addr) = (find(true), find(false));
    (server, tls_addr, plain_addr)
}

/// Polls the general stats on a plain connection until `line` shows up.
fn wait_for_stat(addr: SocketAddr, line: &str) {
    let mut c = common::Client::connect(addr);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        c.send(b"stats\r\n");
        let stats = String::from_utf8_lossy(&c.read_until(b"END\r\n")).into_owned();
        if stats.contains(line) {
            return;
        }
        assert!(Instant::now() < deadline, "no {line:?} in {stats}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn text_meta_and_binary_over_tls() {
    let pki = Pki::new();
    let (_server, addr, _) = start(&pki, |_| {});
    let mut c = TlsClient::connect(addr, pki.client(None)).unwrap();
    c.roundtrip(b"set greeting 5 0 5\r\nhello\r\n", b"STORED\r\n");
    c.roundtrip(
        b"get greeting\r\n",
        b"VALUE greeting 5 5\r\nhello\r\nEND\r\n",
    );
    c.roundtrip(b"ms meta 3 T0\r\nabc\r\n", b"HD\r\n");
    c.roundtrip(b"mg meta v f\r\n", b"VA 3 f0\r\nabc\r\n");
    c.roundtrip(b"incr missing 1\r\n", b"NOT_FOUND\r\n");

    // Values large enough to go out by handle, and a pipeline of them.
    let big = vec![b'x'; 300_000];
    let mut req = b"set big 0 0 300000\r\n".to_vec();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n");
    c.roundtrip(&req, b"STORED\r\n");
    let reply = c.ask(b"get big big big\r\n", b"END\r\n").unwrap();
    let mut want = Vec::new();
    for _ in 0..3 {
        want.extend_from_slice(b"VALUE big 0 300000\r\n");
        want.extend_from_slice(&big);
        want.extend_from_slice(b"\r\n");
    }
    want.extend_from_slice(b"END\r\n");
    assert!(reply == want, "large multi-get over TLS differs");

    // A binary NOOP: magic 0x80, opcode 0x0a, opaque echoed in the reply.
    let mut noop = [0u8; 24];
    noop[0] = 0x80;
    noop[1] = 0x0a;
    noop[12..16].copy_from_slice(&[1, 2, 3, 4]);
    let mut c = TlsClient::connect(addr, pki.client(None)).unwrap();
    c.stream.write_all(&noop).unwrap();
    c.stream.flush().unwrap();
    let mut reply = [0u8; 24];
    c.stream.read_exact(&mut reply).unwrap();
    assert_eq!((reply[0], reply[1]), (0x81, 0x0a));
    assert_eq!(&reply[12..16], &[1, 2, 3, 4]);

    let mut c = TlsClient::connect(addr, pki.client(None)).unwrap();
    let settings = c.ask(b"stats settings\r\n", b"END\r\n").unwrap();
    let settings = String::from_utf8_lossy(&settings);
    for line in [
        "STAT ssl_enabled yes\r\n",
        "STAT ssl_verify_mode 0\r\n",
        "STAT ssl_ca_cert NULL\r\n",
        "STAT ssl_min_version tlsv1.2\r\n",
    ] {
        assert!(settings.contains(line), "no {line:?} in {settings}");
    }
    let key = format!("STAT ssl_key {}\r\n", pki.path("server-key.pem").display());
    assert!(settings.contains(&key), "{settings}");
    let stats = c.ask(b"stats\r\n", b"END\r\n").unwrap();
    let stats = String::from_utf8_lossy(&stats);
    // Where memcached 1.6.18 -Z puts them: after log_watchers, before
    // unexpected_napi_ids.
    let at = |name: &str| stats.find(&format!("STAT {name} ")).unwrap_or(usize::MAX);
    assert!(stats.contains("STAT ssl_handshake_errors 0\r\n"), "{stats}");
    assert!(
        at("log_watchers") < at("ssl_handshake_errors")
            && at("ssl_handshake_errors") < at("time_since_server_cert_refresh")
            && at("time_since_server_cert_refresh") < at("unexpected_napi_ids"),
        "{stats}"
    );
}

#[test]
fn plain_text_fails_on_a_tls_listener_and_works_on_notls() {
    let pki = Pki::new();
    let (_server, tls_addr, plain_addr) = start(&pki, |_| {});

    let mut plain = TcpStream::connect(tls_addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain.write_all(b"version\r\n").unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(
        !String::from_utf8_lossy(&got).contains("VERSION"),
        "a plain request on the TLS port was answered: {got:?}"
    );

    let mut c = common::Client::connect(plain_addr);
    c.roundtrip(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    // The same store behind both listeners.
    let mut t = TlsClient::connect(tls_addr, pki.client(None)).unwrap();
    t.roundtrip(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    // And TLS is refused on the plain listener.
    assert!(refused(plain_addr, pki.client(None)));

    wait_for_stat(plain_addr, "STAT ssl_handshake_errors 1\r\n");
}

#[test]
fn verify_mode_2_requires_a_certificate_from_the_ca() {
    let pki = Pki::new();
    let (_server, addr, _) = start(&pki, |t| {
        t.ca_cert = Some(pki.path("ca.pem"));
        t.verify_mode = VerifyMode::Require;
    });
    assert!(refused(addr, pki.client(None)), "no certificate");
    assert!(
        refused(addr, pki.client(Some(&pki.stranger))),
        "a certificate from another CA"
    );
    let mut c = TlsClient::connect(addr, pki.client(Some(&pki.client))).unwrap();
    c.roundtrip(b"set k 0 0 2\r\nok\r\n", b"STORED\r\n");
    let settings = c.ask(b"stats settings\r\n", b"END\r\n").unwrap();
    assert!(String::from_utf8_lossy(&settings).contains("STAT ssl_verify_mode 3\r\n"));
}

#[test]
fn verify_mode_1_checks_a_certificate_only_if_given() {
    let pki = Pki::new();
    let (_server, addr, _) = start(&pki, |t| {
        t.ca_cert = Some(pki.path("ca.pem"));
        t.verify_mode = VerifyMode::Request;
    });
    let mut c = TlsClient::connect(addr, pki.client(None)).unwrap();
    c.roundtrip(
        b"version\r\n",
        format!("VERSION {}\r\n", kura_server::VERSION).as_bytes(),
    );
    let mut c = TlsClient::connect(addr, pki.client(Some(&pki.client))).unwrap();
    c.roundtrip(b"mn\r\n", b"MN\r\n");
    assert!(refused(addr, pki.client(Some(&pki.stranger))));
}

#[test]
fn min_version_3_refuses_tls_1_2() {
    let pki = Pki::new();
    let (_server, addr, _) = start(&pki, |t| t.min_version = MinVersion::Tls13);
    assert!(refused(
        addr,
        pki.client_with_versions(None, &[&rustls::version::TLS12])
    ));
    let mut c = TlsClient::connect(
        addr,
        pki.client_with_versions(None, &[&rustls::version::TLS13]),
    )
    .unwrap();
    c.roundtrip(b"mn\r\n", b"MN\r\n");
}

#[test]
fn a_client_that_never_finishes_its_handshake_is_dropped() {
    let pki = Pki::new();
    let (_server, addr, plain) = start(&pki, |t| t.handshake_timeout = 1);
    let mut silent = TcpStream::connect(addr).unwrap();
    // Others are served meanwhile.
    let mut c = TlsClient::connect(addr, pki.client(None)).unwrap();
    c.roundtrip(b"mn\r\n", b"MN\r\n");
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut b = [0u8; 16];
    match silent.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("expected the server to close the connection, got {other:?}"),
    }
    wait_for_stat(plain, "STAT ssl_handshake_errors 1\r\n");
}

fn bind_error(pki: &Pki, tweak: impl FnOnce(&mut TlsConfig)) -> String {
    let mut config = ServerConfig {
        port: 0,
        threads: 1,
        ..ServerConfig::default()
    };
    config.tls = pki.tls();
    tweak(&mut config.tls);
    match Server::bind(config) {
        Ok(_) => panic!("the server started"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn unusable_files_are_startup_errors_naming_the_file() {
    let pki = Pki::new();
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "this is not a key\n").unwrap();
    let e = bind_error(&pki, |t| t.key = Some(garbage.clone()));
    assert!(
        e.contains("ssl_key") && e.contains(&garbage.display().to_string()),
        "{e}"
    );

    let missing = pki.path("missing.pem");
    let e = bind_error(&pki, |t| t.chain_cert = Some(missing.clone()));
    assert!(
        e.contains("cannot read ssl_chain_cert file") && e.contains("missing.pem"),
        "{e}"
    );

    // A key that is not the certificate's.
    let other_key = pki.path("other-key.pem");
    std::fs::write(&other_key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let e = bind_error(&pki, |t| t.key = Some(other_key.clone()));
    assert!(
        e.contains("other-key.pem") && e.contains("server.pem"),
        "{e}"
    );

    // A key where the certificate chain should be.
    let e = bind_error(&pki, |t| t.chain_cert = Some(pki.path("server-key.pem")));
    assert!(e.contains("holds no PEM certificate"), "{e}");

    let e = bind_error(&pki, |t| {
        t.ca_cert = Some(garbage.clone());
        t.verify_mode = VerifyMode::Require;
    });
    assert!(
        e.contains("ssl_ca_cert") && e.contains("garbage.pem"),
        "{e}"
    );

    let e = bind_error(&pki, |t| t.key = None);
    assert!(e.contains("ssl_chain_cert=FILE,ssl_key=FILE"), "{e}");
}

#[test]
fn a_client_that_stops_reading_does_not_hold_up_shutdown() {
    let pki = Pki::new();
    let mut config = ServerConfig {
        port: 0,
        threads: 1,
        listen: vec!["127.0.0.1".into(), "notls:127.0.0.1:0".into()],
        ..ServerConfig::default()
    };
    config.tls = pki.tls();
    let server = Server::bind(config).unwrap();
    let addrs = server.tcp_addrs();
    let handle = server.start().unwrap();
    let (tls_addr, plain_addr) = (addrs[0].0, addrs[1].0);

    let mut c = TlsClient::connect(tls_addr, pki.client(None)).unwrap();
    let mut set = b"set big 0 0 1000000\r\n".to_vec();
    set.extend_from_slice(&vec![b'b'; 1_000_000]);
    set.extend_from_slice(b"\r\n");
    c.roundtrip(&set, b"STORED\r\n");
    // Ask for far more than the socket buffers hold, and never read it.
    c.stream.write_all(&b"get big\r\n".repeat(64)).unwrap();
    c.stream.flush().unwrap();

    // Wait until the server is stuck writing to this client.
    let mut plain = common::Client::connect(plain_addr);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        plain.send(b"stats conns\r\n");
        let conns = String::from_utf8_lossy(&plain.read_until(b"END\r\n")).into_owned();
        if conns.contains("conn_mwrite") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never blocked: {conns}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(plain);

    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        handle.shutdown();
        handle.join();
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(60)).is_ok(),
        "the server did not stop while a TLS client was not reading"
    );
    drop(c);
}

/// A client that trusts only `ca`.
fn trusting(ca: &Ca) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert().der().clone()).unwrap();
    Arc::new(
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// memcached's `refresh_certs`, and the reload SIGHUP runs: the files are
/// read again and new handshakes use them; connections made before keep
/// going; files that cannot be used leave the old certificate in place,
/// with memcached's error line.
#[test]
fn refresh_certs_and_a_reload_put_new_certificates_in_use() {
    let pki = Pki::new();
    let (server, addr, plain) = start(&pki, |_| {});
    let mut before = TlsClient::connect(addr, pki.client(None)).unwrap();
    before.roundtrip(b"set k 0 0 1\r\na\r\n", b"STORED\r\n");

    // The certificate is replaced by one from another CA.
    let ca2 = Ca::new("kura test CA, renewed");
    write_server_files(&pki.dir, &ca2);
    let mut admin = common::Client::connect(plain);
    admin.roundtrip(b"refresh_certs\r\n", b"OK\r\n");
    admin.send(b"refresh_certs noreply\r\nmn\r\n");
    assert_eq!(admin.read_until(b"MN\r\n"), b"MN\r\n");
    assert!(
        refused(addr, pki.client(None)),
        "the old CA's clients still accepted"
    );
    let mut after = TlsClient::connect(addr, trusting(&ca2)).unwrap();
    after.roundtrip(b"get k\r\n", b"VALUE k 0 1\r\na\r\nEND\r\n");
    // The connection made before goes on with its session.
    before.roundtrip(b"get k\r\n", b"VALUE k 0 1\r\na\r\nEND\r\n");

    // Unusable files: an error line (even with noreply), the certificate in
    // use stays.
    std::fs::write(pki.path("server.pem"), "not a certificate\n").unwrap();
    admin.send(b"refresh_certs\r\n");
    let line = String::from_utf8(admin.read_until(b"\r\n")).unwrap();
    assert!(
        line.starts_with("Error loading the certificates: ") && line.contains("server.pem"),
        "{line}"
    );
    admin.send(b"refresh_certs noreply\r\n");
    let line = String::from_utf8(admin.read_until(b"\r\n")).unwrap();
    assert!(
        line.starts_with("Error loading the certificates: "),
        "{line}"
    );
    TlsClient::connect(addr, trusting(&ca2))
        .unwrap()
        .roundtrip(b"get k\r\n", b"VALUE k 0 1\r\na\r\nEND\r\n");

    // SIGHUP's reload says what it read and what it kept.
    let shared = server.handle().shared();
    let kept = kura_server::reload::reload(shared);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].outcome.is_err(), "{kept:?}");
    let ca3 = Ca::new("kura test CA, third");
    write_server_files(&pki.dir, &ca3);
    let done = kura_server::reload::reload(shared);
    assert!(done[0].outcome.is_ok(), "{done:?}");
    assert!(refused(addr, trusting(&ca2)));
    TlsClient::connect(addr, trusting(&ca3))
        .unwrap()
        .roundtrip(b"get k\r\n", b"VALUE k 0 1\r\na\r\nEND\r\n");
}

#[test]
fn refresh_certs_without_tls_says_so() {
    let server = TestServer::start();
    server
        .connect()
        .roundtrip(b"refresh_certs\r\n", b"Error TLS not enabled\r\n");
}
