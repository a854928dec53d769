//! TLS and logins against real servers (issue 43): kura server and
//! Debian's memcached with `-Z` (a throwaway CA from kura_testkit::pki,
//! the server name checked, a client certificate required), memcached's
//! ASCII authentication (`-Y`) on both, and binary SASL PLAIN on
//! memcached `-S` (its sasldb made with saslpasswd2 when installed).

use std::path::Path;
use std::time::Duration;

use kura_client::{Auth, Client, ClientTls, Error, Protocol};
use kura_testkit::pki::Pki;
use kura_testkit::servers::{kura_with, memcached_with};
use kura_testkit::Proc;

fn ssl_options(pki: &Pki, cert: &str, require_client: bool) -> String {
    let mut o = format!(
        "ssl_chain_cert={},ssl_key={}",
        pki.path(&format!("{cert}.pem")).display(),
        pki.path(&format!("{cert}-key.pem")).display()
    );
    if require_client {
        o.push_str(&format!(
            ",ssl_ca_cert={},ssl_verify_mode=2",
            pki.path("ca.pem").display()
        ));
    }
    o
}

fn tls(pki: &Pki, ca: &str, client_cert: bool) -> ClientTls {
    ClientTls {
        ca_cert: Some(pki.path(ca)),
        cert: client_cert.then(|| pki.path("client.pem")),
        key: client_cert.then(|| pki.path("client-key.pem")),
        ..ClientTls::default()
    }
}

fn client(
    server: &Proc,
    protocol: Protocol,
    tls: Option<&ClientTls>,
    auth: Option<Auth>,
) -> Client {
    let mut b = Client::builder([server.addr()])
        .protocol(protocol)
        .timeouts(Duration::from_secs(5), Duration::from_secs(10));
    if let Some(t) = tls {
        b = b.tls(t).expect("TLS files");
    }
    if let Some(a) = auth {
        b = b.auth(a);
    }
    b.build().expect("client")
}

async fn round_trip(c: &Client, key: &str) {
    assert!(c.set(key, "value", 0).await.unwrap());
    let v = c.get(key).await.unwrap().expect("hit");
    assert_eq!(&v.data[..], b"value");
    // Many at once: the connection's writer and reader tasks under TLS.
    let keys: Vec<String> = (0..200).map(|i| format!("{key}{i}")).collect();
    let items: Vec<(String, Vec<u8>)> = keys
        .iter()
        .map(|k| (k.clone(), k.as_bytes().to_vec()))
        .collect();
    for r in c.set_multi(&items, 0).await {
        r.unwrap();
    }
    let got = c.get_multi(&keys).await;
    assert_eq!(got.len(), keys.len());
    for (k, v) in keys.iter().zip(got) {
        assert_eq!(&v.unwrap().expect("hit").data[..], k.as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_kura_server_with_a_client_certificate() {
    let pki = Pki::new();
    let s = kura_with(&["-Z", "-o", &ssl_options(&pki, "server", true)]);
    for p in [Protocol::Meta, Protocol::Text, Protocol::Binary] {
        let c = client(&s, p, Some(&tls(&pki, "ca.pem", true)), None);
        round_trip(&c, &format!("{p:?}")).await;
    }
    // No client certificate: refused by the server.
    let c = client(&s, Protocol::Meta, Some(&tls(&pki, "ca.pem", false)), None);
    let e = c.set("k", "v", 0).await.unwrap_err();
    assert!(e.is_server_failure(), "{e}");
    // Another CA: the client refuses the server.
    let c = client(
        &s,
        Protocol::Meta,
        Some(&tls(&pki, "other-ca.pem", true)),
        None,
    );
    match c.set("k", "v", 0).await {
        Err(Error::Tls { what, .. }) => assert!(what.contains("UnknownIssuer"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_name_is_checked_and_can_be_given() {
    let pki = Pki::new();
    pki.server_for("named", &["cache1.example"]);
    let s = kura_with(&["-Z", "-o", &ssl_options(&pki, "named", false)]);
    let c = client(&s, Protocol::Meta, Some(&tls(&pki, "ca.pem", false)), None);
    match c.set("k", "v", 0).await {
        Err(Error::Tls { what, .. }) => assert!(what.contains("not valid for name"), "{what}"),
        other => panic!("{other:?}"),
    }
    let named = ClientTls {
        server_name: Some("cache1.example".into()),
        ..tls(&pki, "ca.pem", false)
    };
    let c = client(&s, Protocol::Meta, Some(&named), None);
    round_trip(&c, "named").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_debian_memcached() {
    let pki = Pki::new();
    let o = ssl_options(&pki, "server", true);
    let Some(s) = memcached_with(&["-Z", "-o", &o], &[]) else {
        return;
    };
    for p in [Protocol::Meta, Protocol::Binary] {
        let c = client(&s, p, Some(&tls(&pki, "ca.pem", true)), None);
        round_trip(&c, &format!("mc{p:?}")).await;
    }
}

fn auth_file(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let f = dir.join("auth");
    std::fs::write(&f, "app:s3cret\n").unwrap();
    f.display().to_string()
}

fn ascii(password: &str) -> Auth {
    Auth::Ascii {
        user: "app".into(),
        password: password.into(),
    }
}

async fn ascii_login(s: &Proc) {
    let c = client(s, Protocol::Meta, None, Some(ascii("s3cret")));
    round_trip(&c, "auth").await;
    let c = client(s, Protocol::Text, None, Some(ascii("s3cret")));
    round_trip(&c, "authtext").await;
    let c = client(s, Protocol::Meta, None, Some(ascii("wrong")));
    match c.get("auth").await {
        Err(Error::Auth { what, .. }) => {
            assert!(what.contains("authentication failure"), "{what}")
        }
        other => panic!("{other:?}"),
    }
    // Without a login nothing is served.
    let c = client(s, Protocol::Meta, None, None);
    assert!(c.get("auth").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ascii_auth_on_memcached_and_kura() {
    let dir = std::env::temp_dir().join(format!("kura-client-auth-{}", std::process::id()));
    let file = auth_file(&dir);
    if let Some(m) = memcached_with(&["-Y", &file], &[]) {
        ascii_login(&m).await;
    }
    ascii_login(&kura_with(&["-Y", &file])).await;
    // And under TLS.
    let pki = Pki::new();
    let s = kura_with(&["-Y", &file, "-Z", "-o", &ssl_options(&pki, "server", false)]);
    let c = client(
        &s,
        Protocol::Meta,
        Some(&tls(&pki, "ca.pem", false)),
        Some(ascii("s3cret")),
    );
    round_trip(&c, "tlsauth").await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A sasldb holding app/s3cret for memcached, and the SASL configuration
/// pointing at it; None when saslpasswd2 (sasl2-bin) is missing.
fn sasldb(dir: &Path) -> Option<()> {
    std::fs::create_dir_all(dir).unwrap();
    let db = dir.join("sasldb2");
    let mut child = std::process::Command::new("saslpasswd2")
        .args(["-p", "-c", "-a", "memcached", "-f"])
        .arg(&db)
        .arg("app")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| eprintln!("skipped SASL: saslpasswd2: {e} (apt-get install sasl2-bin)"))
        .ok()?;
    use std::io::Write;
    child.stdin.take()?.write_all(b"s3cret").unwrap();
    assert!(child.wait().unwrap().success());
    let conf = format!("mech_list: plain\nsasldb_path: {}\n", db.display());
    std::fs::write(dir.join("memcached.conf"), conf).unwrap();
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_on_memcached() {
    let dir = std::env::temp_dir().join(format!("kura-client-sasl-{}", std::process::id()));
    if sasldb(&dir).is_none() {
        return;
    }
    let conf = dir.display().to_string();
    let Some(m) = memcached_with(&["-S"], &[("SASL_CONF_PATH", &conf)]) else {
        return;
    };
    let plain = |password: &str| Auth::SaslPlain {
        user: "app".into(),
        password: password.into(),
    };
    let c = client(&m, Protocol::Binary, None, Some(plain("s3cret")));
    round_trip(&c, "sasl").await;
    let c = client(&m, Protocol::Binary, None, Some(plain("wrong")));
    match c.get("sasl").await {
        Err(Error::Auth { what, .. }) => assert!(what.contains("0x0020"), "{what}"),
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}
