//! TLS to a backend server (`https://` URLs): the CAs its certificate is checked against
//! (`tls_ca`, else `backend_tls_ca`, else the system's roots) and the name sent by SNI and
//! checked in the certificate (`tls_sni`, else the URL's host). Files are read when the
//! configuration is, so that a missing or bad file stops the start or the reload.

use std::path::PathBuf;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::RootCertStore;

/// The TLS settings of an `https://` server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendTls {
    /// CAs trusted instead of the system's.
    pub ca: Option<CaFile>,
    /// The name sent by SNI and verified, instead of the URL's host.
    pub sni: Option<String>,
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

/// The TLS settings of a server at a URL with `scheme`, from its own and its pool's
/// `tls_ca`/`tls_sni` (its own first).
///
/// # Errors
/// A message for TLS settings on an `http://` server, or a bad file or name.
pub fn settings(
    https: bool,
    ca: [Option<&String>; 2],
    sni_name: [Option<&String>; 2],
) -> Result<Option<BackendTls>, String> {
    let ca = ca[0].or(ca[1]);
    let sni_name = sni_name[0].or(sni_name[1]);
    if !https {
        if ca.is_some() || sni_name.is_some() {
            return Err("tls_ca and tls_sni are for https:// servers".into());
        }
        return Ok(None);
    }
    Ok(Some(BackendTls {
        ca: ca.map(|p| CaFile::read(p)).transpose()?,
        sni: sni_name.map(|n| sni(n)).transpose()?,
    }))
}
