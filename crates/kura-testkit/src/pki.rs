//! A throwaway certificate authority for TLS tests, made at test time
//! with rcgen and written as PEM files into a fresh directory (removed on
//! drop):
//!
//! - `ca.pem`: the test CA;
//! - `server.pem`, `server-key.pem`: a server certificate for 127.0.0.1
//!   and localhost (and the names given to [`Pki::with_names`]);
//! - `client.pem`, `client-key.pem`: a client certificate signed by the CA;
//! - `other-ca.pem`, `stranger.pem`, `stranger-key.pem`: another CA and a
//!   client certificate it signed (to be refused);
//! - [`Pki::server_for`] writes more server certificates (another name,
//!   a renewal for reload tests).
//!
//! [`Ca`] is the CA itself, for tests that make their own certificates.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// See the module documentation.
pub struct Pki {
    pub dir: PathBuf,
    ca: Ca,
}

/// A test certificate authority made with rcgen: its self-signed certificate and the issuer
/// that signs leaf certificates with it. [`Pki`] writes one into files; tests that need more
/// CAs (another for certificates to be refused, a renewed one) make them with [`Ca::new`].
pub struct Ca {
    cert: rcgen::Certificate,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// A CA whose certificate's common name is `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("self-signed CA");
        Ca {
            cert,
            issuer: Issuer::new(params, key),
        }
    }

    /// Its certificate (`.pem()`, `.der()`).
    pub fn cert(&self) -> &rcgen::Certificate {
        &self.cert
    }

    /// Writes its certificate, PEM, to `path`.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.cert.pem()).expect("write ca");
    }

    /// A certificate for `names` (DNS names or IP addresses) signed by the CA, with the
    /// extended key `usage` when given, and its key.
    pub fn sign(
        &self,
        names: &[&str],
        usage: Option<ExtendedKeyUsagePurpose>,
    ) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.extended_key_usages = usage.into_iter().collect();
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert, key)
    }

    /// Writes `FILE.pem` and `FILE-key.pem` into `dir`: a certificate of [`Ca::sign`];
    /// returns its PEM.
    pub fn write_leaf(
        &self,
        dir: &Path,
        file: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> String {
        let (cert, key) = self.sign(names, Some(usage));
        std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).expect("write cert");
        std::fs::write(dir.join(format!("{file}-key.pem")), key.serialize_pem())
            .expect("write key");
        cert.pem()
    }
}

impl Pki {
    /// A CA and the files of the module documentation.
    pub fn new() -> Pki {
        Pki::with_names(&[])
    }

    /// As [`Pki::new`], the server certificate also valid for `names`.
    pub fn with_names(names: &[&str]) -> Pki {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kura-pki-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("pki dir");
        let ca = Ca::new("kura test CA");
        ca.write(&dir.join("ca.pem"));
        let other = Ca::new("some other CA");
        other.write(&dir.join("other-ca.pem"));
        let client = ExtendedKeyUsagePurpose::ClientAuth;
        ca.write_leaf(&dir, "client", &["kura-test-client"], client.clone());
        other.write_leaf(&dir, "stranger", &["kura-test-client"], client);
        let pki = Pki { dir, ca };
        let mut all = vec!["127.0.0.1", "localhost"];
        all.extend_from_slice(names);
        pki.server_for("server", &all);
        pki
    }

    /// Writes `FILE.pem` and `FILE-key.pem`: a server certificate for
    /// `names` signed by the CA; returns the certificate's PEM.
    pub fn server_for(&self, file: &str, names: &[&str]) -> String {
        let usage = ExtendedKeyUsagePurpose::ServerAuth;
        self.ca.write_leaf(&self.dir, file, names, usage)
    }

    /// A file of the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
