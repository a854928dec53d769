//! TLS for TCP connections (`-Z`), with rustls. Owns the `[tls]` settings
//! (memcached's `-o ssl_*` options), loading the PEM files into one
//! acceptor at startup, and the handshake a worker runs before it serves a
//! connection from a TLS listener.
//!
//! As in memcached, with `-Z` every TCP listener speaks TLS except those
//! given as `-l notls:HOST[:PORT]`; Unix sockets and UDP stay plain.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::shared::{RunState, Shared};

/// The prefix of a `-l` address that stays plain under `-Z`.
pub const NOTLS_PREFIX: &str = "notls:";

/// Splits a `-l` entry into whether it opted out of TLS and the address.
pub fn strip_notls(listen: &str) -> (bool, &str) {
    match listen.strip_prefix(NOTLS_PREFIX) {
        Some(addr) => (true, addr),
        None => (false, listen),
    }
}

/// memcached's `ssl_verify_mode`: whether clients must present a
/// certificate signed by `ssl_ca_cert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "u8")]
pub enum VerifyMode {
    /// 0: no client certificate is asked for.
    #[default]
    None,
    /// 1: a certificate is asked for and verified if the client sends one.
    Request,
    /// 2: a verified certificate is required.
    Require,
    /// 3: memcached's "require, verify once"; kura treats it as 2 (rustls
    /// never renegotiates, so every handshake is the only one).
    Once,
}

impl TryFrom<u8> for VerifyMode {
    type Error = String;
    fn try_from(n: u8) -> Result<Self, String> {
        match n {
            0 => Ok(VerifyMode::None),
            1 => Ok(VerifyMode::Request),
            2 => Ok(VerifyMode::Require),
            3 => Ok(VerifyMode::Once),
            other => Err(format!(
                "ssl_verify_mode {other}: valid values are 0 (none), 1 (request), 2 (require) or 3 (once)"
            )),
        }
    }
}

impl VerifyMode {
    /// The `ssl_verify_mode` number this mode is given as.
    pub fn number(self) -> u8 {
        match self {
            VerifyMode::None => 0,
            VerifyMode::Request => 1,
            VerifyMode::Require => 2,
            VerifyMode::Once => 3,
        }
    }

    /// The number memcached's `stats settings` shows: OpenSSL's verify
    /// flags (PEER = 1, FAIL_IF_NO_PEER_CERT = 2, CLIENT_ONCE = 4).
    pub fn stats_value(self) -> u8 {
        match self {
            VerifyMode::None => 0,
            VerifyMode::Request => 1,
            VerifyMode::Require => 3,
            VerifyMode::Once => 7,
        }
    }
}

/// memcached's `ssl_min_version`: 0 TLS 1.0, 1 TLS 1.1, 2 TLS 1.2, 3 TLS 1.3.
/// rustls speaks only TLS 1.2 and 1.3, so 0 and 1 mean 1.2 in kura.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "u8")]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

impl TryFrom<u8> for MinVersion {
    type Error = String;
    fn try_from(n: u8) -> Result<Self, String> {
        match n {
            0..=2 => Ok(MinVersion::Tls12),
            3 => Ok(MinVersion::Tls13),
            other => Err(format!(
                "ssl_min_version {other}: valid values are 0 (tlsv1.0), 1 (tlsv1.1), 2 (tlsv1.2) or 3 (tlsv1.3)"
            )),
        }
    }
}

impl MinVersion {
    /// The name `stats settings` shows, as memcached does.
    pub fn stats_name(self) -> &'static str {
        match self {
            MinVersion::Tls12 => "tlsv1.2",
            MinVersion::Tls13 => "tlsv1.3",
        }
    }
}

/// The `[tls]` section: `-Z` and memcached's `-o ssl_*` options.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Serve TLS on every TCP listener not marked `notls:` (`-Z`).
    pub enabled: bool,
    /// The server's certificate chain, PEM, leaf first (`ssl_chain_cert`).
    pub chain_cert: Option<PathBuf>,
    /// The certificate's private key, PEM (`ssl_key`).
    pub key: Option<PathBuf>,
    /// CA certificates client certificates must chain to, PEM (`ssl_ca_cert`).
    pub ca_cert: Option<PathBuf>,
    /// Client certificate checking (`ssl_verify_mode`).
    pub verify_mode: VerifyMode,
    /// Oldest protocol version accepted (`ssl_min_version`).
    pub min_version: MinVersion,
    /// Seconds a client has to finish its handshake before it is dropped.
    pub handshake_timeout: u64,
}

/// Seconds a client has to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT_SECS: u64 = 10;

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            enabled: false,
            chain_cert: None,
            key: None,
            ca_cert: None,
            verify_mode: VerifyMode::None,
            min_version: MinVersion::Tls12,
            handshake_timeout: HANDSHAKE_TIMEOUT_SECS,
        }
    }
}

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
    #[error("ssl_key file {0} holds no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey(PathBuf),
    #[error("ssl_key file {key} cannot be used with the certificate in {chain}: {source}")]
    KeyMismatch {
        chain: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
    #[error("ssl_ca_cert file {path} holds a certificate that cannot be a trust anchor: {source}")]
    BadCa {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("cannot verify client certificates with the CA certificates of {path}: {detail}")]
    Verifier { path: PathBuf, detail: String },
    #[error("cannot set up TLS: {0}")]
    Setup(rustls::Error),
    #[error("-Z needs a certificate and key: -o ssl_chain_cert=FILE,ssl_key=FILE")]
    Missing,
}

fn read(option: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        option,
        path: path.to_owned(),
        source,
    })
}

fn certificates(
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

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read("ssl_key", path)?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(key) => Ok(key),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => Err(TlsError::NoKey(path.to_owned())),
        Err(e) => Err(TlsError::BadPem {
            option: "ssl_key",
            path: path.to_owned(),
            detail: e.to_string(),
        }),
    }
}

fn client_verifier(
    config: &TlsConfig,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, TlsError> {
    let Some(path) = &config.ca_cert else {
        return Ok(None);
    };
    // Read and checked even with verify mode 0, so a bad file is caught at
    // startup rather than when someone turns verification on.
    let mut roots = RootCertStore::empty();
    for cert in certificates("ssl_ca_cert", path)? {
        roots.add(cert).map_err(|source| TlsError::BadCa {
            path: path.clone(),
            source,
        })?;
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let builder = match config.verify_mode {
        VerifyMode::None => return Ok(None),
        VerifyMode::Request => builder.allow_unauthenticated(),
        VerifyMode::Require | VerifyMode::Once => builder,
    };
    let verifier = builder.build().map_err(|e| TlsError::Verifier {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    Ok(Some(verifier))
}

/// A loaded certificate and key, ready to accept TLS connections.
#[derive(Clone)]
pub struct TlsContext {
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
    /// Store clock time the certificates were loaded (for memcached's
    /// `time_since_server_cert_refresh`).
    pub loaded_at: u32,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl TlsContext {
    /// Reads the certificate chain, key and CA files of `config`.
    ///
    /// # Errors
    /// A file that is missing, unreadable, not PEM, holds nothing usable,
    /// or a key that does not belong to the certificate.
    pub fn load(config: &TlsConfig, now: u32) -> Result<TlsContext, TlsError> {
        let (Some(chain_path), Some(key_path)) = (&config.chain_cert, &config.key) else {
            return Err(TlsError::Missing);
        };
        let chain = certificates("ssl_chain_cert", chain_path)?;
        let key = private_key(key_path)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] = match config.min_version {
            MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            MinVersion::Tls13 => &[&rustls::version::TLS13],
        };
        let verifier = client_verifier(config, &provider)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(TlsError::Setup)?;
        let builder = match verifier {
            Some(v) => builder.with_client_cert_verifier(v),
            None => builder.with_no_client_auth(),
        };
        let server =
            builder
                .with_single_cert(chain, key)
                .map_err(|source| TlsError::KeyMismatch {
                    chain: chain_path.clone(),
                    key: key_path.clone(),
                    source,
                })?;
        Ok(TlsContext {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            handshake_timeout: Duration::from_secs(config.handshake_timeout.max(1)),
            loaded_at: now,
        })
    }

    /// Runs the server side of the handshake on `stream`. None when the
    /// client fails it, takes longer than the handshake timeout, or the
    /// server stops meanwhile; failures are counted in
    /// `ssl_handshake_errors` and logged at debug level.
    pub async fn accept(
        &self,
        stream: TcpStream,
        shared: &Shared,
        peer: &str,
    ) -> Option<TlsStream<TcpStream>> {
        let mut rx = shared.watch();
        let handshake = tokio::time::timeout(self.handshake_timeout, self.acceptor.accept(stream));
        let why = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => return None,
            r = handshake => match r {
                Ok(Ok(tls)) => return Some(tls),
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("not finished within {:?}", self.handshake_timeout),
            },
        };
        shared
            .counters
            .ssl_handshake_errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(conn = %peer, "TLS handshake failed: {why}");
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_numbers() {
        assert_eq!(VerifyMode::try_from(2), Ok(VerifyMode::Require));
        assert_eq!(VerifyMode::Once.stats_value(), 7);
        assert!(VerifyMode::try_from(4).is_err());
        assert_eq!(MinVersion::try_from(1), Ok(MinVersion::Tls12));
        assert_eq!(MinVersion::try_from(3), Ok(MinVersion::Tls13));
        assert!(MinVersion::try_from(9).is_err());
    }

    #[test]
    fn notls_prefix() {
        assert_eq!(
            strip_notls("notls:127.0.0.1:11212"),
            (true, "127.0.0.1:11212")
        );
        assert_eq!(strip_notls("0.0.0.0"), (false, "0.0.0.0"));
    }

    #[test]
    fn missing_files_are_named() {
        let config = TlsConfig {
            enabled: true,
            chain_cert: Some("/nonexistent/kura-chain.pem".into()),
            key: Some("/nonexistent/kura-key.pem".into()),
            ..TlsConfig::default()
        };
        let e = TlsContext::load(&config, 0).unwrap_err().to_string();
        assert!(
            e.contains("ssl_chain_cert") && e.contains("/nonexistent/kura-chain.pem"),
            "{e}"
        );
        let e = TlsContext::load(&TlsConfig::default(), 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssl_chain_cert=FILE"), "{e}");
    }
}
