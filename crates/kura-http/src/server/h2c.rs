//! HTTP/2 over cleartext with prior knowledge (RFC 9113 §3.3): a plain connection whose first
//! bytes are HTTP/2's connection preface is served as HTTP/2, any other as HTTP/1.1. The
//! `Upgrade: h2c` dance of RFC 7540 §3.2 is not supported (RFC 9113 deprecates it): `Upgrade`
//! is a hop-by-hop field, and such a request is answered over HTTP/1.1.

use std::io;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads the first bytes of `stream`, after `seen` (read already: after a PROXY header),
/// until they are, or cannot be, the HTTP/2 preface: true for HTTP/2, and the bytes read
/// (given back to the parser by `framing::Guard`).
pub async fn sniff<S: AsyncRead + Unpin>(
    stream: &mut S,
    mut seen: BytesMut,
) -> io::Result<(bool, BytesMut)> {
    seen.reserve(4096);
    loop {
        let common = seen.len().min(PREFACE.len());
        if seen[..common] != PREFACE[..common] {
            return Ok((false, seen));
        }
        if seen.len() >= PREFACE.len() {
            return Ok((true, seen));
        }
        if stream.read_buf(&mut seen).await? == 0 {
            return Ok((false, seen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::ReadBuf;

    #[tokio::test]
    async fn the_preface_is_told_from_http1_in_any_number_of_reads() {
        let (h2, seen) = sniff(&mut &PREFACE[..], BytesMut::new()).await.unwrap();
        assert!(h2);
        assert_eq!(&seen[..], PREFACE);
        let (h2, seen) = sniff(&mut &b"GET / HTTP/1.1\r\n"[..], BytesMut::new())
            .await
            .unwrap();
        assert!(!h2);
        assert_eq!(&seen[..], b"GET / HTTP/1.1\r\n");
        // A preface cut short by the end of the stream is not HTTP/2.
        let (h2, _) = sniff(&mut &PREFACE[..10], BytesMut::new()).await.unwrap();
        assert!(!h2);
        // Byte by byte.
        let mut slow = tokio_test_reader(PREFACE);
        let (h2, seen) = sniff(&mut slow, BytesMut::new()).await.unwrap();
        assert!(h2 && seen.len() == PREFACE.len());
    }

    /// A reader that returns one byte a read.
    fn tokio_test_reader(bytes: &'static [u8]) -> impl AsyncRead + Unpin {
        struct OneByOne(&'static [u8]);
        impl AsyncRead for OneByOne {
            fn poll_read(
                mut self: Pin<&mut Self>,
                _: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                if let Some((first, rest)) = self.0.split_first() {
                    buf.put_slice(&[*first]);
                    self.0 = rest;
                }
                Poll::Ready(Ok(()))
            }
        }
        OneByOne(bytes)
    }
}
