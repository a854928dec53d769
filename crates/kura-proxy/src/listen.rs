//! Where clients come in: a TCP address (`127.0.0.1:11311`) or a Unix
//! socket (`unix:/path`, its permissions `unix_mode` as memcached's `-a`),
//! TLS on either when `[tls]` is enabled (the handshake runs on the worker
//! the connection is handed to).

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};

use crate::ctx::Ctx;

/// The prefix of a Unix socket's path in `listen`.
pub const UNIX_PREFIX: &str = "unix:";

/// A connection accepted, on its way to a worker.
pub enum Incoming {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// The listening socket.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// Removes a socket file left by an earlier run (only a socket: never a
/// file someone put there), as memcached does.
fn remove_stale(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(_) => Ok(()),
    }
}

impl Listener {
    /// Binds `listen`: `unix:/path` (with permissions `mode`) or a TCP
    /// address.
    ///
    /// # Errors
    /// The address cannot be bound, or the path is taken by a file that
    /// is not a socket.
    pub async fn bind(listen: &str, mode: u32) -> std::io::Result<Listener> {
        match listen.strip_prefix(UNIX_PREFIX) {
            Some(path) => {
                let path = PathBuf::from(path);
                remove_stale(&path)?;
                let l = UnixListener::bind(&path)?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
                Ok(Listener::Unix(l, path))
            }
            None => Ok(Listener::Tcp(TcpListener::bind(listen).await?)),
        }
    }

    /// Where it listens, for the log.
    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map_or_else(|e| e.to_string(), |a| a.to_string()),
            Listener::Unix(_, p) => format!("{UNIX_PREFIX}{}", p.display()),
        }
    }

    pub async fn accept(&self) -> std::io::Result<Incoming> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok(Incoming::Tcp(s.into_std()?))
            }
            Listener::Unix(l, _) => Ok(Incoming::Unix(l.accept().await?.0.into_std()?)),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves `incoming` on this worker, after the TLS handshake when
/// `[tls]` is enabled (on a Unix socket as on TCP: a socket file's mode
/// says who may connect, TLS who the client is). A failed handshake (or
/// one not finished within the handshake timeout) is counted in
/// `ssl_handshake_errors` and logged at debug level.
pub fn start(incoming: Incoming, ctx: &Arc<Ctx>, lane: usize) {
    match incoming {
        Incoming::Unix(s) => {
            if let Ok(s) = tokio::net::UnixStream::from_std(s) {
                serve(s, "unix".to_string(), ctx, lane);
            }
        }
        Incoming::Tcp(s) => {
            if let Ok(s) = tokio::net::TcpStream::from_std(s) {
                let peer = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                serve(s, peer, ctx, lane);
            }
        }
    }
}

/// Serves the client on `s` (from `peer`), TLS first when enabled.
fn serve<S>(s: S, peer: String, ctx: &Arc<Ctx>, lane: usize)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let Some(tls) = &ctx.tls else {
        tokio::task::spawn_local(crate::conn::serve(s, ctx.clone(), lane));
        return;
    };
    let (acceptor, limit) = (tls.acceptor(), tls.handshake_timeout());
    let ctx = ctx.clone();
    tokio::task::spawn_local(async move {
        let why = match crate::timer::timeout(limit, acceptor.accept(s)).await {
            Some(Ok(tls)) => return crate::conn::serve(tls, ctx, lane).await,
            Some(Err(e)) => e.to_string(),
            None => format!("not finished within {limit:?}"),
        };
        ctx.stats
            .ssl_handshake_errors
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(conn = %peer, "TLS handshake failed: {why}");
    });
}
