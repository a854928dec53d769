//! TLS on both hops of kura proxy (issue 43): clients speak TLS to the
//! proxy (`[tls]`, kura server's `-Z` settings), the proxy speaks TLS to
//! kura servers started with `-Z` (`[backend_tls]`: the CA, the name, a
//! client certificate), with a throwaway CA made by the test
//! (kura_testkit::pki). A backend whose certificate is not trusted, not
//! for its name, or that refuses the proxy's certificate is never served
//! plaintext: its requests get SERVER_ERROR, it is marked down, and the
//! log says why. The listener's certificate is read again on SIGHUP and
//! `refresh_certs` without dropping the connections open.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::proxy::{proxy_logged as proxy_with, signal};
use common::{free_port, Server};
use kura_testkit::pki::Pki;
use kura_tls::rustls::pki_types::ServerName;
use kura_tls::rustls::{ClientConfig, ClientConnection, StreamOwned};
use kura_tls::{Identity, MinVersion};

use common::proxy::QUICK_HEALTH as HEALTH;

/// A kura server with `-Z`, its certificate from `pki`, and these `-o`
/// settings added.
fn tls_backend(pki: &Pki, cert: &str, extra_o: &str) -> Server {
    let o = format!(
        "ssl_chain_cert={},ssl_key={}{extra_o}",
        pki.path(&format!("{cert}.pem")).display(),
        pki.path(&format!("{cert}-key.pem")).display(),
    );
    Server::start_in_memory(&["-Z", "-o", &o])
}

/// The `[tls]` section serving `pki`'s server certificate.
fn listener_tls(pki: &Pki, extra: &str) -> String {
    format!(
        "[tls]\nenabled = true\nchain_cert = \"{}\"\nkey = \"{}\"\n{extra}",
        pki.path("server.pem").display(),
        pki.path("server-key.pem").display()
    )
}

/// A client configuration trusting `ca` (a file of `pki`), presenting
/// `pki`'s client certificate `identity` (`client`, `stranger`) if given.
fn client_config(pki: &Pki, ca: &str, identity: Option<&str>) -> Arc<ClientConfig> {
    let roots = kura_tls::roots("ca", &pki.path(ca)).unwrap();
    let (cert, key) = identity
        .map(|i| {
            (
                pki.path(&format!("{i}.pem")),
                pki.path(&format!("{i}-key.pem")),
            )
        })
        .unzip();
    let id = cert
        .as_deref()
        .zip(key.as_deref())
        .map(|(cert, key)| Identity {
            cert_option: "cert",
            cert,
            key_option: "key",
            key,
        });
    kura_tls::client_config(roots, id, MinVersion::Tls12).unwrap()
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// A TLS connection to 127.0.0.1:`port`, its handshake complete.
fn tls_connect(port: u16, config: Arc<ClientConfig>) -> std::io::Result<Tls> {
    tls_connect_as(port, config, "127.0.0.1")
}

/// As [`tls_connect`], the server's certificate checked for `name`.
fn tls_connect_as(port: u16, config: Arc<ClientConfig>, name: &str) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    let name = ServerName::try_from(name.to_string()).unwrap();
    let conn = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// Writes `req`, reads until the reply ends with `until`.
fn ask(s: &mut impl ReadWrite, req: &[u8], until: &[u8]) -> std::io::Result<String> {
    s.write_all(req)?;
    s.flush()?;
    let mut out = Vec::new();
    let mut b = [0u8; 8192];
    while !out.ends_with(until) {
        let n = s.read(&mut b)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        out.extend_from_slice(&b[..n]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// One reply line (a get's whole reply).
fn line(s: &mut impl ReadWrite, req: &str) -> String {
    let until: &[u8] = if req.starts_with("get ") {
        b"END\r\n"
    } else {
        b"\r\n"
    };
    match ask(s, req.as_bytes(), until) {
        Ok(r) => r,
        // A get that failed ends with SERVER_ERROR's line, not END.
        Err(e) => panic!("{req:?}: {e}"),
    }
}

/// A `stats` figure of the proxy.
fn stat(s: &mut impl ReadWrite, name: &str) -> Option<String> {
    let r = ask(s, b"stats\r\n", b"END\r\n").unwrap();
    r.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .map(str::to_string)
}

/// Whether a client with `config` gets nothing from the server at `port`
/// (under TLS 1.3 a refused client certificate shows at the first read).
fn refused(port: u16, config: Arc<ClientConfig>) -> bool {
    match tls_connect(port, config) {
        Err(_) => true,
        Ok(mut c) => ask(&mut c, b"version\r\n", b"\r\n").is_err(),
    }
}

/// Polls `ok` for up to 20 s.
fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The log, once it says `what`.
fn log_says(log: &Path, what: &str) -> String {
    let mut text = String::new();
    wait_for(&format!("the log saying {what:?}"), || {
        text = std::fs::read_to_string(log).unwrap_or_default();
        text.contains(what)
    });
    text
}

#[test]
fn tls_end_to_end_client_to_proxy_to_kura_with_client_certificates() {
    let pki = Pki::new();
    // The backend requires a client certificate from the CA.
    let ca = pki.path("ca.pem");
    let b = tls_backend(
        &pki,
        "server",
        &format!(",ssl_ca_cert={},ssl_verify_mode=2", ca.display()),
    );
    let dir = common::tempdir("proxy-tls-e2e");
    let metrics = free_port();
    let text = format!(
        "metrics_listen = \"127.0.0.1:{metrics}\"\n[pools.main]\nservers = [\"127.0.0.1:{}\"]\n{HEALTH}{}\n[backend_tls]\nca_cert = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
        b.port,
        listener_tls(&pki, &format!("ca_cert = \"{}\"\nverify_mode = 2\n", ca.display())),
        ca.display(),
        pki.path("client.pem").display(),
        pki.path("client-key.pem").display(),
    );
    let (p, _log) = proxy_with(&dir, &text);
    let mut c = tls_connect(p.port, client_config(&pki, "ca.pem", Some("client"))).unwrap();
    assert_eq!(line(&mut c, "set k 0 0 5\r\nhello\r\n"), "STORED\r\n");
    assert_eq!(line(&mut c, "get k\r\n"), "VALUE k 0 5\r\nhello\r\nEND\r\n");
    let r = ask(&mut c, b"mg k v\r\n", b"hello\r\n").unwrap();
    assert_eq!(r, "VA 5\r\nhello\r\n");
    // The value is on the backend, reached over TLS only.
    let mut direct = tls_connect(b.port, client_config(&pki, "ca.pem", Some("client"))).unwrap();
    assert_eq!(
        line(&mut direct, "get k\r\n"),
        "VALUE k 0 5\r\nhello\r\nEND\r\n"
    );
    // The proxy's listener: a client certificate is required, and must be
    // the CA's; a client that does not trust the proxy's CA gives up.
    assert!(refused(p.port, client_config(&pki, "ca.pem", None)));
    assert!(refused(
        p.port,
        client_config(&pki, "ca.pem", Some("stranger"))
    ));
    assert!(refused(
        p.port,
        client_config(&pki, "other-ca.pem", Some("client"))
    ));
    // Plaintext to a TLS listener gets nothing served.
    let mut plain = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let got = ask(&mut plain, b"get k\r\n", b"END\r\n");
    assert!(!got.is_ok_and(|r| r.contains("hello")));
    let mut c = tls_connect(p.port, client_config(&pki, "ca.pem", Some("client"))).unwrap();
    let errors: u64 = stat(&mut c, "ssl_handshake_errors")
        .unwrap()
        .parse()
        .unwrap();
    assert!(errors >= 3, "{errors}");
    // And on /metrics, the same count.
    let raw = common::http_exchange(
        metrics,
        "GET /metrics HTTP/1.1",
        "Host: x\r\nConnection: close\r\n",
    );
    let page = String::from_utf8_lossy(&raw).into_owned();
    let on_page: u64 = page
        .lines()
        .find_map(|l| l.strip_prefix("kura_proxy_ssl_handshake_errors_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no handshake errors on /metrics: {page}"));
    assert!(on_page >= errors, "{on_page} < {errors}");
}

/// The proxy with `[backend_tls]` lines `backend_tls` in front of `b`
/// (whose certificate is for `name`): its requests fail, it is marked
/// down, the log says why (`log_line`), and nothing reached it.
fn refused_backend(pki: &Pki, b: &Server, name: &str, backend_tls: &str, log_line: &str) {
    let dir = common::tempdir(&format!("proxy-tls-refused-{}", b.port));
    let text = format!(
        "[pools.main]\nservers = [\"127.0.0.1:{}\"]\n{HEALTH}[backend_tls]\n{backend_tls}\n",
        b.port
    );
    let (p, log) = proxy_with(&dir, &text);
    let mut c = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let addr = format!("127.0.0.1:{}", b.port);
    for _ in 0..3 {
        let r = ask(&mut c, b"set k 0 0 1\r\nx\r\n", b"\r\n").unwrap();
        assert!(r.starts_with("SERVER_ERROR"), "{r}");
    }
    wait_for("the backend marked down", || {
        let r = ask(&mut c, b"get k\r\n", b"\r\n").unwrap();
        assert!(r.starts_with("SERVER_ERROR"), "{r}");
        stat(&mut c, &format!("backend:{addr}:down")).as_deref() == Some("1")
    });
    let text = log_says(&log, "backend connection refused");
    assert!(text.contains(log_line), "{text}");
    // Never served: the backend got no request.
    let config = client_config(pki, "ca.pem", Some("client"));
    let mut direct = tls_connect_as(b.port, config, name).unwrap();
    assert_eq!(line(&mut direct, "get k\r\n"), "END\r\n");
}

#[test]
fn a_backend_certificate_from_another_ca_is_refused_and_marked_down() {
    let pki = Pki::new();
    let b = tls_backend(&pki, "server", "");
    let ca = pki.path("other-ca.pem");
    let tls = format!("ca_cert = \"{}\"", ca.display());
    refused_backend(&pki, &b, "127.0.0.1", &tls, "UnknownIssuer");
}

#[test]
fn the_backend_certificate_must_carry_its_name_sni() {
    let pki = Pki::new();
    pki.server_for("named", &["cache1.example"]);
    let b = tls_backend(&pki, "named", "");
    let ca = pki.path("ca.pem");
    // Checked against the host (127.0.0.1): not its name.
    let tls = format!("ca_cert = \"{}\"", ca.display());
    refused_backend(&pki, &b, "cache1.example", &tls, "not valid for name");
    // Given its name for this backend, it serves.
    let dir = common::tempdir("proxy-tls-sni");
    let text = format!(
        "[pools.main]\nservers = [\"127.0.0.1:{0}\"]\n{HEALTH}[backend_tls]\nca_cert = \"{1}\"\nserver_names = {{ \"127.0.0.1:{0}\" = \"cache1.example\" }}\n",
        b.port,
        ca.display()
    );
    let (p, _log) = proxy_with(&dir, &text);
    let mut c = p.connect();
    assert_eq!(line(&mut c, "set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(line(&mut c, "get k\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
}

#[test]
fn a_backend_that_requires_a_client_certificate_refuses_a_proxy_without_one() {
    let pki = Pki::new();
    let ca = pki.path("ca.pem");
    let b = tls_backend(
        &pki,
        "server",
        &format!(",ssl_ca_cert={},ssl_verify_mode=2", ca.display()),
    );
    let tls = format!("ca_cert = \"{}\"", ca.display());
    refused_backend(&pki, &b, "127.0.0.1", &tls, "CertificateRequired");
}

#[test]
fn reloaded_certificates_serve_new_handshakes_and_keep_open_connections() {
    let pki = Pki::new();
    let b = Server::start_in_memory(&[]);
    let dir = common::tempdir("proxy-tls-reload");
    let text = format!(
        "[pools.main]\nservers = [\"127.0.0.1:{}\"]\n{HEALTH}{}",
        b.port,
        listener_tls(&pki, "")
    );
    let (p, log) = proxy_with(&dir, &text);
    let config = client_config(&pki, "ca.pem", None);
    let peer = |s: &Tls| s.conn.peer_certificates().unwrap()[0].to_vec();
    let mut old = tls_connect(p.port, config.clone()).unwrap();
    assert_eq!(line(&mut old, "set k 0 0 1\r\n1\r\n"), "STORED\r\n");
    let first = peer(&old);
    // A new certificate in the same files, read on SIGHUP.
    pki.server_for("server", &["127.0.0.1", "localhost"]);
    signal(&p, libc::SIGHUP);
    log_says(&log, "configuration reloaded");
    let mut new = tls_connect(p.port, config.clone()).unwrap();
    let second = peer(&new);
    assert_ne!(
        first, second,
        "the new handshake still got the old certificate"
    );
    assert_eq!(line(&mut new, "get k\r\n"), "VALUE k 0 1\r\n1\r\nEND\r\n");
    // The connection made before the reload still works.
    assert_eq!(line(&mut old, "set k 0 0 1\r\n2\r\n"), "STORED\r\n");
    // refresh_certs, as memcached's: a third certificate.
    pki.server_for("server", &["127.0.0.1", "localhost"]);
    assert_eq!(line(&mut old, "refresh_certs\r\n"), "OK\r\n");
    let third = peer(&tls_connect(p.port, config.clone()).unwrap());
    assert!(third != second && third != first);
    // A broken file: refused, the certificate in use stays.
    std::fs::write(pki.path("server-key.pem"), "not a key").unwrap();
    let r = line(&mut old, "refresh_certs\r\n");
    assert!(
        r.starts_with("ERROR ") && r.contains("server-key.pem"),
        "{r}"
    );
    let still = peer(&tls_connect(p.port, config).unwrap());
    assert_eq!(still, third);
    assert_eq!(line(&mut old, "get k\r\n"), "VALUE k 0 1\r\n2\r\nEND\r\n");
}

/// `[tls]` with `listen = "unix:/path"`: the Unix socket speaks TLS too
/// (before, it served plaintext there whatever `[tls]` said).
#[test]
fn tls_on_the_unix_socket_listener() {
    let pki = Pki::new();
    let b = Server::start_in_memory(&[]);
    let dir = common::tempdir("proxy-tls-unix");
    let sock = dir.join("proxy.sock");
    let cfg = dir.join("proxy.toml");
    let text = format!(
        "listen = \"unix:{}\"\n[pools.main]\nservers = [\"127.0.0.1:{}\"]\n{}",
        sock.display(),
        b.port,
        listener_tls(&pki, "")
    );
    std::fs::write(&cfg, text).unwrap();
    let mut child = common::proxy::spawn_with_config(&cfg);
    let connect = || {
        let s = UnixStream::connect(&sock)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok::<_, std::io::Error>(s)
    };
    wait_for("the socket", || connect().is_ok());
    // Plaintext gets nothing served.
    let mut plain = connect().unwrap();
    let got = ask(&mut plain, b"set k 0 0 2\r\nhi\r\n", b"\r\n");
    assert!(!got.is_ok_and(|r| r == "STORED\r\n"));
    // A TLS client is served.
    let name = ServerName::try_from("127.0.0.1".to_string()).unwrap();
    let conn = ClientConnection::new(client_config(&pki, "ca.pem", None), name).unwrap();
    let mut c = StreamOwned::new(conn, connect().unwrap());
    assert_eq!(line(&mut c, "set k 0 0 2\r\nhi\r\n"), "STORED\r\n");
    assert_eq!(line(&mut c, "get k\r\n"), "VALUE k 0 2\r\nhi\r\nEND\r\n");
    let errors: u64 = stat(&mut c, "ssl_handshake_errors")
        .unwrap()
        .parse()
        .unwrap();
    assert!(errors >= 1, "{errors}");
    let _ = child.kill();
    let _ = child.wait();
}
