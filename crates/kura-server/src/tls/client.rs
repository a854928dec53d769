//! TLS from a replica to its primary (`--replica-tls-ca`): the primary's
//! certificate is checked against the given CA and the name the replica
//! was told to follow (or `--replica-tls-name`); a client certificate is
//! offered when the primary asks for one (`ssl_verify_mode`).

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::{self, RootCertStore};

use super::{certificates, private_key, TlsError};

/// A replica's TLS settings, loaded once at startup.
///
/// # Errors
/// Unreadable or malformed files.
pub fn replica_config(
    ca: &Path,
    cert_and_key: Option<(&Path, &Path)>,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates("--replica-tls-ca", ca)? {
        roots.add(cert).map_err(|source| TlsError::BadCa {
            path: ca.to_owned(),
            source,
        })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Setup)?
        .with_root_certificates(roots);
    let config = match cert_and_key {
        Some((cert, key)) => builder
            .with_client_auth_cert(certificates("--replica-tls-cert", cert)?, private_key(key)?)
            .map_err(TlsError::Setup)?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}
