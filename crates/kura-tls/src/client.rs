//! The client side: a connection's TLS settings (the CA its server's
//! certificate must chain to, or the system's; a client certificate; the
//! name the certificate must carry, sent as SNI), loaded into a rustls
//! client configuration once, and the handshake.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::ServerName;
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use crate::pem::{certificates, private_key, roots, system_roots, TlsError};
use crate::server::versions;
use crate::settings::MinVersion;

/// A client's TLS settings (kura proxy's `[backend_tls]`, kura-client's and
/// kura-record's connection settings).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientTls {
    /// CA certificates the server's certificate must chain to, PEM; the
    /// system's CA bundle without one.
    pub ca_cert: Option<PathBuf>,
    /// A client certificate chain to offer, PEM, leaf first (with `key`).
    pub cert: Option<PathBuf>,
    /// The client certificate's private key, PEM.
    pub key: Option<PathBuf>,
    /// The name the server's certificate must carry, sent as SNI; each
    /// server's host (name or IP address) without one.
    pub server_name: Option<String>,
    /// Oldest protocol version spoken (memcached's `ssl_min_version`
    /// numbers; 0-2 mean TLS 1.2).
    pub min_version: MinVersion,
}

/// [`ClientTls`] loaded: its files read once, ready for handshakes.
#[derive(Clone)]
pub struct ClientTlsConfig {
    pub config: Arc<ClientConfig>,
    pub server_name: Option<String>,
}

impl std::fmt::Debug for ClientTlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTlsConfig")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Reads the files.
    ///
    /// # Errors
    /// A file that cannot be read or used (named), a certificate without
    /// its key or the reverse, a server name that is no DNS name or IP
    /// address.
    pub fn load(&self) -> Result<ClientTlsConfig, TlsError> {
        let roots = match &self.ca_cert {
            Some(path) => roots("ca_cert", path)?,
            None => system_roots()?,
        };
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(Identity {
                cert_option: "cert",
                cert,
                key_option: "key",
                key,
            }),
            (None, None) => None,
            _ => {
                return Err(TlsError::Settings(
                    "a client certificate needs both cert and key".into(),
                ))
            }
        };
        if let Some(name) = &self.server_name {
            parse_name(name)?;
        }
        Ok(ClientTlsConfig {
            config: client_config(roots, identity, self.min_version)?,
            server_name: self.server_name.clone(),
        })
    }
}

/// A client certificate's files and the settings that named them (for
/// the errors).
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub cert_option: &'static str,
    pub cert: &'a Path,
    pub key_option: &'static str,
    pub key: &'a Path,
}

/// A rustls client configuration: servers verified against `roots`,
/// `identity` (certificate chain and key files) offered when a server asks.
///
/// # Errors
/// The identity's files cannot be used.
pub fn client_config(
    roots: RootCertStore,
    identity: Option<Identity<'_>>,
    min: MinVersion,
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(min))
        .map_err(TlsError::Setup)?
        .with_root_certificates(roots);
    let config = match identity {
        Some(id) => builder
            .with_client_auth_cert(
                certificates(id.cert_option, id.cert)?,
                private_key(id.key_option, id.key)?,
            )
            .map_err(|e| TlsError::mismatch(id.cert_option, id.cert, id.key_option, id.key, e))?,
        None => builder.with_no_client_auth(),
    };
    let mut config = config;
    // No session resumption: memcached -Z with ssl_verify_mode set sets no
    // session id context, and a resumed handshake ends in its "internal
    // error" alert; connections are long-lived, so a full handshake on a
    // reconnect costs little.
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

fn parse_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_string()).map_err(|_| {
        TlsError::Settings(format!(
            "server_name {name:?}: not a DNS name or IP address"
        ))
    })
}

/// The host of `addr` ("host:port", "[v6]:port" or a bare host): the name
/// a server's certificate is checked against when none is configured.
pub fn server_name(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => addr,
    }
}

/// Runs the client side of the handshake on `tcp`, to the server at
/// `addr`: its certificate must chain to the configured CA and carry the
/// configured server name, else `addr`'s host.
///
/// # Errors
/// The handshake failed (the error says why: an unknown issuer, a name
/// mismatch, an expired certificate, a client certificate refused...).
pub async fn connect(
    tcp: TcpStream,
    tls: &ClientTlsConfig,
    addr: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let name = tls
        .server_name
        .as_deref()
        .unwrap_or_else(|| server_name(addr));
    let name =
        parse_name(name).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    TlsConnector::from(tls.config.clone())
        .connect(name, tcp)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_an_address() {
        assert_eq!(server_name("cache1.example:11211"), "cache1.example");
        assert_eq!(server_name("127.0.0.1:11211"), "127.0.0.1");
        assert_eq!(server_name("[::1]:11211"), "::1");
        assert_eq!(server_name("cache1"), "cache1");
        assert_eq!(server_name("::1"), "::1");
    }

    #[test]
    fn half_an_identity_is_refused() {
        let t = ClientTls {
            ca_cert: Some("/nonexistent/ca.pem".into()),
            ..ClientTls::default()
        };
        let e = t.load().unwrap_err().to_string();
        assert!(
            e.contains("ca_cert") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let t = ClientTls {
            cert: Some("/nonexistent/c.pem".into()),
            ..ClientTls::default()
        };
        if let Err(e) = t.load() {
            let e = e.to_string();
            assert!(e.contains("cert and key") || e.contains("system CA"), "{e}");
        }
    }
}
