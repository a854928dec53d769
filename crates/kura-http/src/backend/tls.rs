//! The TLS client side of `https://` backends: rustls with the ring provider (as the
//! listeners), certificates verified against the server's `tls_ca` or the system's roots
//! (read once, by rustls-native-certs), ALPN offering HTTP/2 then HTTP/1.1 (HTTP/1.1 only
//! for pipes: an upgraded connection speaks HTTP/1.1 first).

use std::sync::{Arc, OnceLock};

use rustls_pki_types::ServerName;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::config::BackendTls;

/// What a TLS connection needs: the connector and the name sent by SNI and verified.
#[derive(Clone)]
pub struct TlsTarget {
    /// The connector, or why there is none (every connection fails with it).
    pub connector: Result<TlsConnector, Arc<str>>,
    /// The server's name.
    pub name: ServerName<'static>,
    /// Where to connect, whatever authority a request's URI has (it has the client's host, so
    /// that HTTP/2's `:authority` carries it as HTTP/1.1's `Host` does).
    pub address: http::Uri,
}

impl TlsTarget {
    /// The target for a server with `tls` settings at `address`, offering HTTP/2 by ALPN when
    /// `h2`.
    pub fn new(tls: &BackendTls, address: &http::Uri, h2: bool) -> TlsTarget {
        let host = address.host().unwrap_or_default();
        let wanted = tls.sni.as_deref().unwrap_or(host);
        // A bracketed IPv6 host ("[::1]") is an address without its brackets.
        let wanted = wanted.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(wanted.to_owned())
            .unwrap_or_else(|_| ServerName::try_from("invalid.invalid").expect("a DNS name"));
        TlsTarget {
            connector: config(tls, h2).map(|c| TlsConnector::from(Arc::new(c))),
            name,
            address: address.clone(),
        }
    }
}

/// The client configuration for `tls`.
fn config(tls: &BackendTls, h2: bool) -> Result<ClientConfig, Arc<str>> {
    let roots = match &tls.ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add_parsable_certificates(ca.certs.iter().cloned());
            Arc::new(roots)
        }
        None => system_roots(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Arc::from(format!("TLS setup: {e}")))?
        .with_root_certificates(roots);
    let mut config = match &tls.client {
        Some(client) => config
            .with_client_auth_cert(client.chain.to_vec(), client.key.clone_key())
            .map_err(|e| Arc::from(format!("tls_cert {}: {e}", client.path.display())))?,
        None => config.with_no_client_auth(),
    };
    config.alpn_protocols = if h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

/// The system's trusted roots, read once; those that cannot be read are logged.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::warn!("system CA certificates: {error}");
            }
            let mut roots = RootCertStore::empty();
            let (added, ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                tracing::warn!(
                    "no system CA certificate found: https backends need tls_ca or backend_tls_ca"
                );
            } else if ignored > 0 {
                tracing::debug!("system CA certificates: {ignored} unusable, {added} used");
            }
            Arc::new(roots)
        })
        .clone()
}
