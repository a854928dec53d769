//! The PROXY protocol on `listen_proxy` listeners and on TLS listeners with
//! `proxy_protocol = true`: each connection must begin with a v1 or v2 header
//! (`wire::proxy_header`) from a `trusted_proxies` address, read here before anything else (on
//! a TLS listener, before the handshake: the balancer passes TLS through and writes the header
//! in clear); the client it names is the connection's client from then on (the purge ACL, the
//! access log, `X-Forwarded-For`). A connection without one, with a broken one, or from an
//! address that is not trusted is answered `400` with the reason and closed; nothing of it
//! reaches hyper (nor rustls).

use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::config::Cidr;
use crate::wire::proxy_header::{parse, Parsed, MAX_V2};

/// Reads the PROXY header of a connection from `from`: the client it names (`from` itself for
/// `LOCAL`/`UNKNOWN`), and the bytes read after the header. A refusal has been answered.
///
/// # Errors
/// The reason the connection was refused (already written to it).
pub async fn read_header<S>(
    stream: &mut S,
    from: SocketAddr,
    trusted: &[Cidr],
    timeout: Duration,
) -> Result<(SocketAddr, BytesMut), &'static str>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if !trusted.iter().any(|net| net.contains(from.ip())) {
        return Err(refuse(
            stream,
            "PROXY protocol from an address not in trusted_proxies",
        )
        .await);
    }
    let mut input = BytesMut::with_capacity(256);
    let reading = async {
        loop {
            match parse(&input) {
                Parsed::Complete { len, source } => {
                    let rest = input.split_off(len);
                    return Ok((source.unwrap_or(from), rest));
                }
                Parsed::Refused(why) => return Err(why),
                Parsed::Partial if input.len() >= MAX_V2 => return Err("PROXY header too long"),
                Parsed::Partial => {}
            }
            match stream.read_buf(&mut input).await {
                Ok(0) | Err(_) => return Err("the connection ended inside the PROXY header"),
                Ok(_) => {}
            }
        }
    };
    let why = match tokio::time::timeout(timeout, reading).await {
        Ok(Ok(read)) => return Ok(read),
        Ok(Err(why)) => why,
        Err(_) => "no PROXY header in time",
    };
    Err(refuse(stream, why).await)
}

/// Answers `400` with `why` and ends the connection.
async fn refuse<S: AsyncWrite + Unpin>(stream: &mut S, why: &'static str) -> &'static str {
    tracing::warn!("listen_proxy: {why}");
    let body = format!("400 {why}: this listener takes connections from trusted load balancers, each beginning with a PROXY protocol header\n");
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
    why
}

/// A connection whose first bytes were read with its PROXY header (a TLS `ClientHello` often
/// comes in the same segment): they are read again first, then the connection's own.
pub struct Replayed<S> {
    read: BytesMut,
    inner: S,
}

impl<S> Replayed<S> {
    /// `inner`, after `read`.
    pub fn new(read: BytesMut, inner: S) -> Replayed<S> {
        Replayed { read, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replayed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.read.is_empty() {
            return Pin::new(&mut self.inner).poll_read(cx, buf);
        }
        let n = self.read.len().min(buf.remaining());
        buf.put_slice(&self.read[..n]);
        self.read.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replayed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_bytes_read_with_the_header_come_first() {
        let (mut near, far) = tokio::io::duplex(64);
        let mut replayed = Replayed::new(BytesMut::from(&b"hello "[..]), far);
        near.write_all(b"world").await.unwrap();
        drop(near);
        let mut all = Vec::new();
        // Read in small pieces: the replayed bytes across two reads.
        let mut piece = [0u8; 4];
        loop {
            let n = replayed.read(&mut piece).await.unwrap();
            if n == 0 {
                break;
            }
            all.extend_from_slice(&piece[..n]);
        }
        assert_eq!(all, b"hello world");
    }
}
