//! TLS to a backend server (`https://` URLs): the CAs its certificate is checked against
//! (`tls_ca`, else `backend_tls_ca`, else the system's roots) and the name sent by SNI and
//! checked in the certificate (`tls_sni`, else the URL's host), and a client certificate
//! (`tls_cert` and `tls_key`) for servers that ask for one. Files are read when the
//! configuration is, so that a missing or bad file stops the start or the reload.

use std::path::PathBuf;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::RootCertStore;

/// The TLS settings of an `https://` server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendTls {
    /// CAs trusted instead of the system's.
    pub ca: Option<CaFile>,
    /// The name sent by SNI and verified, instead of the URL's host.
    pub sni: Option<String>,
    /// The client certificate sent when the server asks for one.
    pub client: Option<ClientCert>,
}

/// A client certificate chain and its key, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// Where the chain was read from.
    pub path: PathBuf,
    /// The chain, the client's certificate first.
    pub chain: Arc<Vec<CertificateDer<'static>>>,
    /// Its key.
    pub key: Arc<PrivateKeyDer<'static>>,
}

impl ClientCert {
    /// The chain in the PEM file `cert` and the key in `key`.
    ///
    /// # Errors
    /// A message naming the file that cannot be read or holds no usable certificate or key.
    pub fn read(cert: &str, key: &str) -> Result<ClientCert, String> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| format!("tls_cert {cert:?}: {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("tls_cert {cert:?}: {e}"))?;
        if chain.is_empty() {
            return Err(format!("tls_cert {cert:?}: no certificate in it"));
        }
        let private =
            PrivateKeyDer::from_pem_file(key).map_err(|e| format!("tls_key {key:?}: {e}"))?;
        tokio_rustls::rustls::crypto::ring::sign::any_supported_type(&private)
            .map_err(|e| format!("tls_key {key:?}: {e}"))?;
        Ok(ClientCert {
            path: PathBuf::from(cert),
            chain: Arc::new(chain),
            key: Arc::new(private),
        })
    }
}

/// A server's or a pool's TLS keys as written (flattened into both tables).
#[derive(Debug, Default, serde::Deserialize)]
pub struct TlsFields {
    /// CAs to trust instead of the system's (a PEM file).
    pub tls_ca: Option<String>,
    /// The name sent by SNI and checked in the certificate.
    pub tls_sni: Option<String>,
    /// A client certificate chain (a PEM file), with `tls_key`.
    pub tls_cert: Option<String>,
    /// The client certificate's key (a PEM file).
    pub tls_key: Option<String>,
}

/// A CA file as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its certificates (at least one usable as a trust anchor).
    pub certs: Arc<Vec<CertificateDer<'static>>>,
}

impl CaFile {
    /// The certificates of the PEM file `path`.
    ///
    /// # Errors
    /// A message naming the file when it cannot be read or holds no usable CA certificate.
    pub fn read(path: &str) -> Result<CaFile, String> {
        let bad = |why: String| format!("tls_ca {path:?}: {why}");
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(certs.iter().cloned());
        if added == 0 {
            return Err(bad("no usable CA certificate in it".into()));
        }
        Ok(CaFile {
            path: PathBuf::from(path),
            certs: Arc::new(certs),
        })
    }
}

/// Checks a `tls_sni` name (a DNS name; an IP address is checked against the certificate's
/// IP addresses and sent without SNI, as RFC 6066 says).
///
/// # Errors
/// A message when it is neither.
pub fn sni(name: &str) -> Result<String, String> {
    ServerName::try_from(name)
        .map(|_| name.to_owned())
        .map_err(|_| format!("tls_sni {name:?} is not a DNS name or an IP address"))
}

/// The TLS settings of a server (`https` or not) from its own keys and its pool's (its own
/// first; a certificate and its key are taken together).
///
/// # Errors
/// A message for TLS settings on an `http://` server, a certificate without its key, or a bad
/// file or name.
pub fn settings(
    https: bool,
    own: &TlsFields,
    pool: &TlsFields,
) -> Result<Option<BackendTls>, String> {
    let ca = own.tls_ca.as_ref().or(pool.tls_ca.as_ref());
    let sni_name = own.tls_sni.as_ref().or(pool.tls_sni.as_ref());
    let (cert, key) = match (&own.tls_cert, &own.tls_key) {
        (None, None) => (pool.tls_cert.as_ref(), pool.tls_key.as_ref()),
        (cert, key) => (cert.as_ref(), key.as_ref()),
    };
    if !https {
        if ca.is_some() || sni_name.is_some() || cert.is_some() || key.is_some() {
            return Err("tls_ca, tls_sni, tls_cert and tls_key are for https:// servers".into());
        }
        return Ok(None);
    }
    let client = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some(ClientCert::read(cert, key)?),
        _ => return Err("tls_cert and tls_key go together".into()),
    };
    Ok(Some(BackendTls {
        ca: ca.map(|p| CaFile::read(p)).transpose()?,
        sni: sni_name.map(|n| sni(n)).transpose()?,
        client,
    }))
}

/// Gives the top-level `backend_tls_ca` to every `https://` server of `backends` that has no
/// `tls_ca` of its own.
///
/// # Errors
/// The file's line when it cannot be read or holds no usable CA certificate.
pub(super) fn top_ca(
    backends: &mut [super::BackendSpec],
    ca: Option<&toml::Spanned<String>>,
    src: super::file::Source<'_>,
) -> Result<(), super::ConfigError> {
    let Some(ca) = ca else {
        return Ok(());
    };
    let at = src.at(Some(ca.span().start));
    let ca = CaFile::read(ca.get_ref())
        .map_err(|e| super::ConfigError::Invalid(format!("{at}backend_{e}")))?;
    let servers = backends.iter_mut().flat_map(|b| &mut b.servers);
    for tls in servers.filter_map(|s| s.tls.as_mut()) {
        tls.ca.get_or_insert_with(|| ca.clone());
    }
    Ok(())
}
