//! How the backend client connects: TCP through hyper-util's `HttpConnector` (connect timeout,
//! `TCP_NODELAY`), TLS over it (`https://`, `tls.rs`), or a Unix socket (`unix:/path`), as one
//! connector type so that every backend has the same client type.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;

use super::tls::TlsTarget;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A backend connector.
#[derive(Clone)]
pub enum Connector {
    /// TCP to the request URI's authority.
    Tcp(HttpConnector),
    /// TLS over TCP to the target's address; the handshake within the timeout.
    Tls(HttpConnector, TlsTarget, Duration),
    /// A Unix socket at this path, whatever the URI says; with the connect timeout.
    Unix(Arc<PathBuf>, Duration),
}

/// A backend connection.
pub enum Conn {
    /// Over TCP.
    Tcp(TokioIo<TcpStream>),
    /// Over TLS (boxed: rustls's state is large).
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
    /// Over a Unix socket.
    Unix(TokioIo<UnixStream>),
}

impl tower_service::Service<Uri> for Connector {
    type Response = Conn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Conn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Connector::Tcp(http) | Connector::Tls(http, ..) => {
                http.poll_ready(cx).map_err(Into::into)
            }
            Connector::Unix(..) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        match self {
            Connector::Tcp(http) => {
                let connecting = http.call(uri);
                Box::pin(async move { Ok(Conn::Tcp(connecting.await?)) })
            }
            Connector::Tls(http, target, timeout) => {
                drop(uri);
                let connecting = http.call(target.address.clone());
                let (target, timeout) = (target.clone(), *timeout);
                Box::pin(async move {
                    let tcp = connecting.await?.into_inner();
                    let tls = target
                        .connector
                        .map_err(|e| io::Error::other(e.to_string()))?;
                    let name = target.name;
                    let shaking = tls.connect(name.clone(), tcp);
                    let stream = match tokio::time::timeout(timeout, shaking).await {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            // A refused certificate is an operator's problem: say why.
                            tracing::warn!("backend TLS handshake with {}: {error}", name.to_str());
                            return Err(error.into());
                        }
                        Err(_) => {
                            return Err(io::Error::new(
                                io::ErrorKind::TimedOut,
                                "TLS handshake timeout",
                            )
                            .into())
                        }
                    };
                    Ok(Conn::Tls(Box::new(TokioIo::new(stream))))
                })
            }
            Connector::Unix(path, timeout) => {
                let (path, timeout) = (path.clone(), *timeout);
                Box::pin(async move {
                    let stream = tokio::time::timeout(timeout, UnixStream::connect(&*path))
                        .await
                        .map_err(|_| {
                            io::Error::new(io::ErrorKind::TimedOut, "connect timeout")
                        })??;
                    Ok(Conn::Unix(TokioIo::new(stream)))
                })
            }
        }
    }
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        match self {
            Conn::Tcp(tcp) => tcp.connected(),
            Conn::Tls(tls) => {
                let (_, session) = tls.inner().get_ref();
                if session.alpn_protocol() == Some(b"h2") {
                    Connected::new().negotiated_h2()
                } else {
                    Connected::new()
                }
            }
            Conn::Unix(_) => Connected::new(),
        }
    }
}

macro_rules! both {
    ($self:ident, $io:ident => $call:expr) => {
        match $self.get_mut() {
            Conn::Tcp($io) => {
                let $io = Pin::new($io);
                $call
            }
            Conn::Tls($io) => {
                let $io = Pin::new(&mut **$io);
                $call
            }
            Conn::Unix($io) => {
                let $io = Pin::new($io);
                $call
            }
        }
    };
}

impl hyper::rt::Read for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        both!(self, io => io.poll_read(cx, buf))
    }
}

impl hyper::rt::Write for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        both!(self, io => io.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        both!(self, io => io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        both!(self, io => io.poll_shutdown(cx))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(io) => io.is_write_vectored(),
            Conn::Tls(io) => io.is_write_vectored(),
            Conn::Unix(io) => io.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        both!(self, io => io.poll_write_vectored(cx, bufs))
    }
}
