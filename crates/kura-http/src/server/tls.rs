//! TLS for client connections (rustls with the ring provider, as `kura server`): a PEM chain and
//! key, ALPN offering HTTP/2 then HTTP/1.1.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use super::StartError;

/// The acceptor for a listener with certificate chain `cert` and key `key`.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, StartError> {
    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        StartError::Tls(format!("{what} {}: {e}", path.display()))
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("certificate", cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad("certificate", cert, &e))?;
    if chain.is_empty() {
        return Err(StartError::Tls(format!(
            "no certificate in {}",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("key", key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StartError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| StartError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
