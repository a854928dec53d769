//! The server side: a rustls server configuration from the `[tls]`
//! settings, and the acceptor a reload replaces.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::pem::{certificates, private_key, roots, TlsError};
use crate::settings::{MinVersion, TlsConfig, VerifyMode};

fn client_verifier(
    config: &TlsConfig,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, TlsError> {
    let Some(path) = &config.ca_cert else {
        return Ok(None);
    };
    // Read and checked even with verify mode 0, so a bad file is caught at
    // startup rather than when someone turns verification on.
    let roots = roots("ssl_ca_cert", path)?;
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

static TLS12_AND_13: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];
static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// The protocol versions `min` allows.
pub(crate) fn versions(min: MinVersion) -> &'static [&'static rustls::SupportedProtocolVersion] {
    match min {
        MinVersion::Tls12 => TLS12_AND_13,
        MinVersion::Tls13 => TLS13_ONLY,
    }
}

/// A rustls server configuration for `config`'s files.
///
/// # Errors
/// No certificate or key given, a file that is missing, unreadable, not
/// PEM or holds nothing usable, or a key that is not the certificate's.
pub fn server_config(config: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let (Some(chain_path), Some(key_path)) = (&config.chain_cert, &config.key) else {
        return Err(TlsError::Missing);
    };
    let chain = certificates("ssl_chain_cert", chain_path)?;
    let key = private_key("ssl_key", key_path)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = client_verifier(config, &provider)?;
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(config.min_version))
        .map_err(TlsError::Setup)?;
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let server = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::mismatch("ssl_chain_cert", chain_path, "ssl_key", key_path, e))?;
    Ok(Arc::new(server))
}

/// A TLS acceptor for `config`'s files.
///
/// # Errors
/// As [`server_config`].
pub fn acceptor(config: &TlsConfig) -> Result<TlsAcceptor, TlsError> {
    Ok(TlsAcceptor::from(server_config(config)?))
}

/// A listener's certificate and key, ready to accept TLS connections, and
/// read again by [`ServerTls::reload`] (SIGHUP, `refresh_certs`): the
/// handshakes that start after a reload use the new files, connections
/// already open keep theirs.
pub struct ServerTls {
    current: ArcSwap<TlsAcceptor>,
    handshake_timeout: Duration,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads the certificate chain, key and CA files of `config`.
    ///
    /// # Errors
    /// As [`server_config`].
    pub fn load(config: &TlsConfig) -> Result<ServerTls, TlsError> {
        Ok(ServerTls {
            current: ArcSwap::from_pointee(acceptor(config)?),
            handshake_timeout: Duration::from_secs(config.handshake_timeout.max(1)),
        })
    }

    /// Reads `config`'s files again; on error the files loaded before stay
    /// in use.
    ///
    /// # Errors
    /// As [`server_config`].
    pub fn reload(&self, config: &TlsConfig) -> Result<(), TlsError> {
        self.current.store(Arc::new(acceptor(config)?));
        Ok(())
    }

    /// The acceptor for the next handshake.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::clone(&self.current.load())
    }

    /// How long a client has to finish its handshake.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
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
        let e = ServerTls::load(&config).unwrap_err().to_string();
        assert!(
            e.contains("ssl_chain_cert") && e.contains("/nonexistent/kura-chain.pem"),
            "{e}"
        );
        let e = ServerTls::load(&TlsConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssl_chain_cert=FILE"), "{e}");
    }
}
