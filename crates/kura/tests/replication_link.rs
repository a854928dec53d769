//! The replica's link to its primary: TLS (`--replica-tls-ca`, the
//! primary's certificate checked; a client certificate when the primary
//! asks for one) and SASL (`--replica-sasl` to a primary with `-S`, over
//! the binary protocol). Wrong trust or credentials keep the link down and
//! nothing is applied.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::cluster::{caught_up, contents, load, same, wait_stat};
use common::{free_port, get, stat, stat_str, tempdir, Server};
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

fn ca(name: &str) -> (rcgen::Certificate, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).unwrap();
    (cert, Issuer::new(params, key))
}

/// Writes `NAME.pem` and `NAME-key.pem` for a certificate signed by
/// `issuer`.
fn leaf(dir: &Path, name: &str, issuer: &Issuer<'static, KeyPair>, server: bool) {
    let key = KeyPair::generate().unwrap();
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let mut params = CertificateParams::new(names).unwrap();
    params.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = params.signed_by(&key, issuer).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
}

struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir = tempdir(name);
        let (ours, issuer) = ca("kura replication test CA");
        std::fs::write(dir.join("ca.pem"), ours.pem()).unwrap();
        leaf(&dir, "primary", &issuer, true);
        leaf(&dir, "replica", &issuer, false);
        let (theirs, _) = ca("some other CA");
        std::fs::write(dir.join("other-ca.pem"), theirs.pem()).unwrap();
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }
}

/// A primary with a plain port for the test's clients and a TLS one for
/// replicas; returns it and the TLS port.
fn tls_primary(pki: &Pki, dir: &Path, extra_ssl: &str) -> (Server, u16) {
    let (plain, tls) = (free_port(), free_port());
    let ssl = format!(
        "ssl_chain_cert={},ssl_key={}{extra_ssl}",
        pki.path("primary.pem"),
        pki.path("primary-key.pem")
    );
    let listen = format!("notls:127.0.0.1:{plain},127.0.0.1:{tls}");
    let server = Server::spawn(
        plain,
        &[
            "--data-dir",
            dir.to_str().unwrap(),
            "-Z",
            "-o",
            &ssl,
            "-l",
            &listen,
        ],
    );
    (server, tls)
}

fn link(server: &Server) -> String {
    stat_str(&mut server.connect(), "repl_link")
}

#[test]
fn a_replica_follows_over_tls_and_only_a_primary_it_trusts() {
    let pki = Pki::new("repl-tls");
    let dir = tempdir("repl-tls-data");
    let (primary, tls) = tls_primary(&pki, &dir, "");
    load(&primary, 0, 1000);
    let target = format!("127.0.0.1:{tls}");
    let good = Server::start_in_memory(&[
        "--replica-of",
        &target,
        "--replica-tls-ca",
        &pki.path("ca.pem"),
    ]);
    let wrong = Server::start_in_memory(&[
        "--replica-of",
        &target,
        "--replica-tls-ca",
        &pki.path("other-ca.pem"),
    ]);
    load(&primary, 1, 1000);
    caught_up(&primary, &good);
    same(
        &contents(&good, 1000),
        &contents(&primary, 1000),
        "over TLS",
    );
    // A primary whose certificate it cannot check is not followed (once
    // it has tried, it says why).
    let mut w = wrong.connect();
    common::cluster::wait_for("the wrong CA's replica to try", 30, || {
        stat_str(&mut w, "repl_last_error") != "-"
    });
    assert_eq!(link(&wrong), "down");
    assert_eq!(stat(&mut w, "repl_applied_seq"), 0);
    assert_eq!(get(&mut w, "k0"), None);
    let why = stat_str(&mut w, "repl_last_error");
    assert!(why.contains("certificate"), "{why}");
    drop(w);
    for s in [wrong, good, primary] {
        s.stop();
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_primary_that_verifies_clients_takes_a_replica_with_a_certificate() {
    let pki = Pki::new("repl-mtls");
    let dir = tempdir("repl-mtls-data");
    let verify = format!(",ssl_verify_mode=2,ssl_ca_cert={}", pki.path("ca.pem"));
    let (primary, tls) = tls_primary(&pki, &dir, &verify);
    load(&primary, 0, 500);
    let target = format!("127.0.0.1:{tls}");
    let without = Server::start_in_memory(&[
        "--replica-of",
        &target,
        "--replica-tls-ca",
        &pki.path("ca.pem"),
    ]);
    let with = Server::start_in_memory(&[
        "--replica-of",
        &target,
        "--replica-tls-ca",
        &pki.path("ca.pem"),
        "--replica-tls-cert",
        &pki.path("replica.pem"),
        "--replica-tls-key",
        &pki.path("replica-key.pem"),
    ]);
    caught_up(&primary, &with);
    same(
        &contents(&with, 500),
        &contents(&primary, 500),
        "with a certificate",
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(link(&without), "down");
    assert_eq!(stat(&mut without.connect(), "repl_applied_seq"), 0);
    for s in [without, with, primary] {
        s.stop();
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// SASL PLAIN then binary sets of `k0`..`k{n}` on a primary with `-S`.
fn binary_writes(primary: &Server, user: &str, pass: &str, n: usize) {
    let mut c = primary.connect();
    let mut auth = vec![0x80, 0x21, 0, 5, 0, 0, 0, 0];
    let data = format!("\0{user}\0{pass}");
    auth.extend_from_slice(&((5 + data.len()) as u32).to_be_bytes());
    auth.extend_from_slice(&[0; 12]);
    auth.extend_from_slice(b"PLAIN");
    auth.extend_from_slice(data.as_bytes());
    c.write_all(&auth).unwrap();
    let mut head = [0u8; 24];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head[6..8], &[0, 0], "SASL auth");
    let body = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    c.read_exact(&mut vec![0; body]).unwrap();
    for i in 0..n {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        let mut p = vec![0x80, 0x01, 0, key.len() as u8, 8, 0, 0, 0];
        p.extend_from_slice(&((8 + key.len() + value.len()) as u32).to_be_bytes());
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(&[0; 8]);
        p.extend_from_slice(key.as_bytes());
        p.extend_from_slice(value.as_bytes());
        c.write_all(&p).unwrap();
        let mut head = [0u8; 24];
        c.read_exact(&mut head).unwrap();
        assert_eq!(&head[6..8], &[0, 0], "binary set {key}");
    }
}

#[test]
fn a_replica_authenticates_with_sasl_to_a_binary_only_primary() {
    let dir = tempdir("repl-sasl");
    let creds = dir.join("auth");
    std::fs::write(&creds, "repl:secret\n").unwrap();
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, "repl:guess\n").unwrap();
    let data = dir.join("data");
    let primary = Server::start(&data, &["-S", "-Y", creds.to_str().unwrap()]);
    binary_writes(&primary, "repl", "secret", 300);
    let target = format!("127.0.0.1:{}", primary.port);
    let replica = |file: &Path| {
        Server::start_in_memory(&[
            "--replica-of",
            &target,
            "--replica-sasl",
            "--replica-auth-file",
            file.to_str().unwrap(),
        ])
    };
    let good = replica(&creds);
    let bad = replica(&wrong);
    wait_stat(&good, "repl_link", "up");
    let mut c = good.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "repl_applied_seq") < 300 {
        assert!(Instant::now() < deadline, "the replica never caught up");
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..300 {
        assert_eq!(get(&mut c, &format!("k{i}")), Some(format!("v{i}")));
    }
    let mut b = bad.connect();
    common::cluster::wait_for("the bad credentials' replica to try", 30, || {
        stat_str(&mut b, "repl_last_error") != "-"
    });
    assert_eq!(link(&bad), "down");
    assert_eq!(stat(&mut b, "repl_applied_seq"), 0);
    let why = stat_str(&mut b, "repl_last_error");
    assert!(why.contains("refused our SASL credentials"), "{why}");
    drop(b);
    drop(c);
    for s in [bad, good, primary] {
        s.stop();
    }
    let _ = std::fs::remove_dir_all(dir);
}
