//! TLS for client connections (rustls with the ring provider, as `kura server`): a PEM chain and
//! key, ALPN offering HTTP/2 then HTTP/1.1; a connection served after its handshake.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

use super::framing::Guard;
use super::live::Live;
use super::proxy::Peer;
use super::{head_limits, StartError, HEADER_READ_TIMEOUT};

/// Serves a TLS connection from `client` (the peer, or the client its PROXY header named):
/// the handshake, then HTTP/2 or HTTP/1.1 (behind the framing guard) by ALPN.
pub(super) async fn serve<S>(
    live: Arc<Live>,
    acceptor: &TlsAcceptor,
    stream: S,
    client: SocketAddr,
    stopped: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream));
    let Ok(Ok(stream)) = handshake.await else {
        return;
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let mut peer = Peer::of(client, "https");
    let proxy = live.current();
    let limits = head_limits(&proxy.config);
    if h2 {
        super::serve(live, TokioIo::new(stream), peer, true, limits, stopped).await;
    } else {
        let mut guarded = Guard::new(stream, limits, proxy.stats.clone());
        peer.interim = Some(guarded.interim());
        super::serve(live, TokioIo::new(guarded), peer, false, limits, stopped).await;
    }
}

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
