//! TLS for TCP connections (`-Z`), with rustls: loading the PEM files into
//! one acceptor at startup, and the handshake a worker runs before it
//! serves a connection from a TLS listener.
//!
//! As in memcached, with `-Z` every TCP listener speaks TLS except those
//! given as `-l notls:HOST[:PORT]`; Unix sockets and UDP stay plain.

mod client;

pub use client::replica_config;

use std::sync::atomic::{AtomicU32, Ordering};

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

pub use kura_tls::{
    MinVersion, TlsConfig, TlsError, TlsSettingError, VerifyMode, HANDSHAKE_TIMEOUT_SECS,
};

use crate::shared::{RunState, Shared};

/// The prefix of a `-l` address that stays plain under `-Z`.
pub const NOTLS_PREFIX: &str = "notls:";

/// Splits a `-l` entry into whether it opted out of TLS and the address.
pub fn strip_notls(listen: &str) -> (bool, &str) {
    match listen.strip_prefix(NOTLS_PREFIX) {
        Some(addr) => (true, addr),
        None => (false, listen),
    }
}

/// The listeners' certificate and key, ready to accept TLS connections;
/// loaded again by [`TlsContext::reload`] (SIGHUP, `refresh_certs`).
pub struct TlsContext {
    certs: kura_tls::ServerTls,
    /// Store clock time the files in use were read (for memcached's
    /// `time_since_server_cert_refresh`).
    at: AtomicU32,
}

impl std::fmt::Debug for TlsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsContext")
            .field("certs", &self.certs)
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
            certs: kura_tls::ServerTls::load(config)?,
            at: AtomicU32::new(now),
        })
    }

    /// Reads `config`'s files again; the handshakes that follow use them.
    /// On error the files loaded before stay in use.
    ///
    /// # Errors
    /// As [`TlsContext::load`].
    pub fn reload(&self, config: &TlsConfig, now: u32) -> Result<(), TlsError> {
        self.certs.reload(config)?;
        self.at.store(now, Ordering::Relaxed);
        Ok(())
    }

    /// When the files in use were read (store clock).
    pub fn loaded_at(&self) -> u32 {
        self.at.load(Ordering::Relaxed)
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
        let acceptor = self.certs.acceptor();
        let limit = self.certs.handshake_timeout();
        let handshake = crate::timer::timeout(limit, acceptor.accept(stream));
        let why = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => return None,
            r = handshake => match r {
                Some(Ok(tls)) => return Some(tls),
                Some(Err(e)) => e.to_string(),
                None => format!("not finished within {limit:?}"),
            },
        };
        shared
            .counters
            .ssl_handshake_errors
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(conn = %peer, "TLS handshake failed: {why}");
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notls_prefix() {
        assert_eq!(
            strip_notls("notls:127.0.0.1:11212"),
            (true, "127.0.0.1:11212")
        );
        assert_eq!(strip_notls("0.0.0.0"), (false, "0.0.0.0"));
    }
}
