//! A connection's two halves, plain TCP or TLS. A plain connection's write
//! half is written without locking by whoever holds the right to write
//! (the writer task or a direct caller, never both: `caller_writing`), and
//! its read half can be asked whether the server sent anything while the
//! connection was idle. A TLS connection's halves share the TLS session:
//! it has no direct path (every request goes through the writer and
//! reader tasks) and no idle check.

use std::pin::Pin;
use std::task::{Context, Poll};

use kura_tls::ClientStream;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

pub(super) enum Rd {
    Tcp(OwnedReadHalf),
    Tls(ReadHalf<ClientStream>),
}

pub(super) enum Wr {
    Tcp(OwnedWriteHalf),
    Tls {
        wr: tokio::sync::Mutex<WriteHalf<ClientStream>>,
        /// The same socket, to shut it down when the connection fails.
        socket: Option<socket2::Socket>,
    },
}

/// Splits `stream` into its halves.
pub(super) fn split(stream: ClientStream) -> (Rd, Wr) {
    match stream {
        ClientStream::Plain(tcp) => {
            let (rd, wr) = tcp.into_split();
            (Rd::Tcp(rd), Wr::Tcp(wr))
        }
        tls @ ClientStream::Tls(_) => {
            let socket = socket2::SockRef::from(tls.tcp()).try_clone().ok();
            let (rd, wr) = tokio::io::split(tls);
            let wr = tokio::sync::Mutex::new(wr);
            (Rd::Tls(rd), Wr::Tls { wr, socket })
        }
    }
}

impl AsyncRead for Rd {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Rd::Tcp(rd) => Pin::new(rd).poll_read(cx, buf),
            Rd::Tls(rd) => Pin::new(rd).poll_read(cx, buf),
        }
    }
}

impl Wr {
    /// The plain write half, for the direct path.
    pub(super) fn tcp(&self) -> Option<&OwnedWriteHalf> {
        match self {
            Wr::Tcp(wr) => Some(wr),
            Wr::Tls { .. } => None,
        }
    }

    /// Writes all of `bytes` (never at the same time as another writer:
    /// see `caller_writing`).
    pub(super) async fn write_all(&self, mut bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Wr::Tcp(wr) => {
                while !bytes.is_empty() {
                    match wr.try_write(bytes) {
                        Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                        Ok(n) => bytes = &bytes[n..],
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            wr.writable().await?
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Wr::Tls { wr, .. } => {
                let mut wr = wr.lock().await;
                wr.write_all(bytes).await?;
                wr.flush().await
            }
        }
    }

    /// Shuts the socket down both ways: a caller reading it gets EOF, the
    /// server sees the connection end.
    pub(super) fn shutdown(&self) {
        let _ = match self {
            Wr::Tcp(wr) => socket2::SockRef::from(wr.as_ref()).shutdown(std::net::Shutdown::Both),
            Wr::Tls {
                socket: Some(s), ..
            } => s.shutdown(std::net::Shutdown::Both),
            Wr::Tls { socket: None, .. } => Ok(()),
        };
    }
}
