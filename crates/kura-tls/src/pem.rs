//! Reading PEM files: certificate chains, private keys and CA bundles,
//! each error naming the setting and the file at fault.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, RootCertStore};

/// Where the system's CA certificates are read from when a client is given
/// no CA file (Debian's and Ubuntu's bundle; `SSL_CERT_FILE` overrides it,
/// as for OpenSSL).
pub const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Why the TLS settings could not be loaded; each names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {option} file {path}: {source}")]
    Read {
        option: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{option} file {path} is not valid PEM: {detail}")]
    BadPem {
        option: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("{option} file {path} holds no PEM certificate")]
    NoCertificate { option: &'static str, path: PathBuf },
    #[error("{option} file {path} holds no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { option: &'static str, path: PathBuf },
    /// `chain` and `key` say which setting and file each is
    /// ([`TlsError::mismatch`]).
    #[error("the certificate in {chain} and the key in {key} cannot be used together: {source}")]
    KeyMismatch {
        chain: String,
        key: String,
        source: Box<rustls::Error>,
    },
    #[error("{option} file {path} holds a certificate that cannot be a trust anchor: {source}")]
    BadCa {
        option: &'static str,
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("cannot verify client certificates with the CA certificates of {path}: {detail}")]
    Verifier { path: PathBuf, detail: String },
    #[error("cannot set up TLS: {0}")]
    Setup(rustls::Error),
    #[error("-Z needs a certificate and key: -o ssl_chain_cert=FILE,ssl_key=FILE")]
    Missing,
    #[error("{0}")]
    Settings(String),
}

impl TlsError {
    /// The certificate chain of setting `chain_option` (file `chain`) and
    /// the key of `key_option` (file `key`) do not go together.
    pub fn mismatch(
        chain_option: &str,
        chain: &Path,
        key_option: &str,
        key: &Path,
        source: rustls::Error,
    ) -> TlsError {
        TlsError::KeyMismatch {
            chain: format!("{chain_option} file {}", chain.display()),
            key: format!("{key_option} file {}", key.display()),
            source: Box::new(source),
        }
    }
}

fn read(option: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        option,
        path: path.to_owned(),
        source,
    })
}

/// The certificates of the PEM file `path` (given as setting `option`),
/// at least one.
///
/// # Errors
/// The file cannot be read, is not PEM, or holds no certificate.
pub fn certificates(
    option: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(option, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadPem {
            option,
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            option,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key of the PEM file `path` (setting `option`).
///
/// # Errors
/// The file cannot be read, is not PEM, or holds no unencrypted key.
pub fn private_key(option: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(option, path)?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(key) => Ok(key),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => Err(TlsError::NoKey {
            option,
            path: path.to_owned(),
        }),
        Err(e) => Err(TlsError::BadPem {
            option,
            path: path.to_owned(),
            detail: e.to_string(),
        }),
    }
}

/// The CA certificates of the PEM file `path` (setting `option`) as trust
/// anchors.
///
/// # Errors
/// As [`certificates`], or a certificate that cannot be an anchor.
pub fn roots(option: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(option, path)? {
        roots.add(cert).map_err(|source| TlsError::BadCa {
            option,
            path: path.to_owned(),
            source,
        })?;
    }
    Ok(roots)
}

/// The system's CA certificates: `SSL_CERT_FILE`, else [`SYSTEM_ROOTS`].
/// Certificates rustls cannot take as anchors are skipped (a system
/// bundle holds a few old ones).
///
/// # Errors
/// The bundle cannot be read or holds no usable certificate.
pub fn system_roots() -> Result<RootCertStore, TlsError> {
    let path = std::env::var_os("SSL_CERT_FILE")
        .map_or_else(|| PathBuf::from(SYSTEM_ROOTS), PathBuf::from);
    let mut roots = RootCertStore::empty();
    let (_added, _skipped) =
        roots.add_parsable_certificates(certificates("the system CA bundle", &path)?);
    if roots.is_empty() {
        return Err(TlsError::NoCertificate {
            option: "the system CA bundle",
            path,
        });
    }
    Ok(roots)
}
