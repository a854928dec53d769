//! TLS for TCP connections (`-Z`), with rustls: loading the PEM files into
//! one acceptor at startup, and the handshake a worker runs before it
//! serves a connection from a TLS listener.
//!
//! As in memcached, with `-Z` every TCP listener speaks TLS except those
//! given as `-l notls:HOST[:PORT]`; Unix sockets and UDP stay plain.

mod client;
mod settings;

pub use client::replica_config;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

pub use settings::{
    strip_notls, MinVersion, TlsConfig, TlsSettingError, VerifyMode, HANDSHAKE_TIMEOUT_SECS,
    NOTLS_PREFIX,
};

use crate::shared::{RunState, Shared};

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
    #[error("the certificate in ssl_chain_cert file {chain} and the key in ssl_key file {key} cannot be used together: {source}")]
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

/// A TLS acceptor for `config`'s files.
fn acceptor(config: &TlsConfig) -> Result<TlsAcceptor, TlsError> {
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
    let server = builder
        .with_single_cert(chain, key)
        .map_err(|source| TlsError::KeyMismatch {
            chain: chain_path.clone(),
            key: key_path.clone(),
            source,
        })?;
    Ok(TlsAcceptor::from(Arc::new(server)))
}

/// The listeners' certificate and key, ready to accept TLS connections;
/// loaded again by [`TlsContext::reload`] (SIGHUP, `refresh_certs`).
pub struct TlsContext {
    current: crate::reload::Reloadable<Loaded>,
    handshake_timeout: Duration,
}

/// One loading of the files.
struct Loaded {
    acceptor: TlsAcceptor,
    /// Store clock time the files were read (for memcached's
    /// `time_since_server_cert_refresh`).
    at: u32,
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
        Ok(TlsContext {
            current: crate::reload::Reloadable::new(Loaded {
                acceptor: acceptor(config)?,
                at: now,
            }),
            handshake_timeout: Duration::from_secs(config.handshake_timeout.max(1)),
        })
    }

    /// Reads `config`'s files again; the handshakes that follow use them.
    /// On error the files loaded before stay in use.
    ///
    /// # Errors
    /// As [`TlsContext::load`].
    pub fn reload(&self, config: &TlsConfig, now: u32) -> Result<(), TlsError> {
        let acceptor = acceptor(config)?;
        self.current.replace(Loaded { acceptor, at: now });
        Ok(())
    }

    /// When the files in use were read (store clock).
    pub fn loaded_at(&self) -> u32 {
        self.current.current().at
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
        let acceptor = self.current.current().acceptor.clone();
        let handshake = crate::timer::timeout(self.handshake_timeout, acceptor.accept(stream));
        let why = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => return None,
            r = handshake => match r {
                Some(Ok(tls)) => return Some(tls),
                Some(Err(e)) => e.to_string(),
                None => format!("not finished within {:?}", self.handshake_timeout),
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
