//! TLS from a replica to its primary (`--replica-tls-ca`): the primary's
//! certificate is checked against the given CA and the name the replica
//! was told to follow (or `--replica-tls-name`); a client certificate is
//! offered when the primary asks for one (`ssl_verify_mode`).

use std::path::Path;
use std::sync::Arc;

use kura_tls::{roots, Identity, MinVersion, TlsError};
use tokio_rustls::rustls;

/// A replica's TLS settings, loaded once at startup.
///
/// # Errors
/// Unreadable or malformed files.
pub fn replica_config(
    ca: &Path,
    cert_and_key: Option<(&Path, &Path)>,
) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let identity = cert_and_key.map(|(cert, key)| Identity {
        cert_option: "--replica-tls-cert",
        cert,
        key_option: "--replica-tls-key",
        key,
    });
    kura_tls::client_config(roots("--replica-tls-ca", ca)?, identity, MinVersion::Tls12)
}
