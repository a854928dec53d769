//! 1xx responses from a backend to an HTTP/1.1 client (RFC 9110 §15.2: a proxy forwards
//! them, never to an HTTP/1.0 client). hyper's server has no way to send one, so they are
//! written by the framing guard, on the connection's write side, before whatever hyper writes
//! next.
//!
//! That is only right while hyper holds no bytes of an earlier response: a 1xx written into the
//! middle of one would corrupt it. hyper flushes its buffer until it is empty or the socket
//! stops taking bytes, and the request's handler (which queues the 1xx) runs in the same task
//! between those flushes, so "hyper's last write was taken whole" means "hyper holds nothing".
//! The guard notes that after every write; a 1xx that arrives while hyper holds bytes (a
//! pipelining client that is not reading) is dropped, as a hint it may be.
//!
//! `100 Continue` is never forwarded (hyper's server sends its own when the request body is
//! read; the backend is never sent `Expect`), nor `101` (an upgrade is answered by `pipe.rs` as the final response).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use http::{HeaderMap, Request, StatusCode};
use parking_lot::Mutex;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc;

use crate::backend::strip_hop_by_hop;

/// A connection's 1xx responses waiting to be written.
#[derive(Debug, Default)]
pub struct Interim {
    /// hyper's last write was not all taken: it holds bytes of a response.
    owed: AtomicBool,
    /// `out` holds something.
    queued: AtomicBool,
    out: Mutex<BytesMut>,
}

/// Whether `status` is a 1xx a proxy forwards (not 100 nor 101).
pub fn forwarded(status: StatusCode) -> bool {
    status.is_informational()
        && status != StatusCode::CONTINUE
        && status != StatusCode::SWITCHING_PROTOCOLS
}

impl Interim {
    /// Queues the 1xx `status` with `fields` (hop-by-hop ones left out); false when it was
    /// dropped because hyper holds bytes of an earlier response, or it is not forwarded.
    pub fn send(&self, status: StatusCode, fields: &HeaderMap) -> bool {
        if !forwarded(status) || self.owed.load(Ordering::Relaxed) {
            return false;
        }
        let mut fields = fields.clone();
        strip_hop_by_hop(&mut fields);
        let mut out = self.out.lock();
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.extend_from_slice(b" ");
        out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in &fields {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        self.queued.store(true, Ordering::Relaxed);
        true
    }

    /// Writes what is queued to `io`; ready once all of it is written.
    pub(super) fn poll_drain<W: AsyncWrite + Unpin>(
        &self,
        mut io: Pin<&mut W>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.queued.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        let mut out = self.out.lock();
        while !out.is_empty() {
            match io.as_mut().poll_write(cx, &out) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => out.advance(n),
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.queued.store(false, Ordering::Relaxed);
        Poll::Ready(Ok(()))
    }

    /// Notes how hyper's write of `offered` bytes went.
    pub(super) fn note_write(&self, offered: usize, result: &Poll<io::Result<usize>>) {
        let owed = match result {
            Poll::Ready(Ok(n)) => *n < offered,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => offered > 0,
        };
        self.owed.store(owed, Ordering::Relaxed);
    }
}

/// A 1xx response from a backend on its way to the client's handler.
pub type Hint = (StatusCode, HeaderMap);

/// The sending side of a request's 1xx responses (registered on its backend request).
pub type Hints = mpsc::Sender<Hint>;

/// 1xx responses forwarded for one request at most: a backend that sends more is not waited
/// on (they are dropped).
pub const MAX_HINTS: usize = 8;

/// A channel for one request's 1xx responses.
pub fn channel() -> (Hints, mpsc::Receiver<Hint>) {
    mpsc::channel(MAX_HINTS)
}

/// Sends the 1xx responses the backend answers `request` with to `to` (from hyper's client).
pub fn forward_to<B>(request: &mut Request<B>, to: Hints) {
    hyper::ext::on_informational(request, move |response| {
        if forwarded(response.status()) {
            let _ = to.try_send((response.status(), response.headers().clone()));
        }
    });
}

/// Runs `work` (waiting for a response head), writing the 1xx responses that arrive
/// meanwhile on `hints` to the client's connection `to`. It runs in the client connection's
/// task, which is what makes writing them safe (module comment).
pub async fn while_forwarding<F: Future>(
    work: F,
    hints: Option<mpsc::Receiver<Hint>>,
    to: Option<&Interim>,
) -> F::Output {
    let (Some(mut hints), Some(to)) = (hints, to) else {
        return work.await;
    };
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            Some((status, fields)) = hints.recv() => {
                to.send(status, &fields);
            }
            done = &mut work => return done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1xx_is_written_before_hyper_s_next_bytes_unless_hyper_owes_some() {
        let interim = Interim::default();
        let mut fields = HeaderMap::new();
        fields.insert("link", "</a.css>; rel=preload".parse().unwrap());
        fields.insert("connection", "x".parse().unwrap());
        assert!(interim.send(StatusCode::from_u16(103).unwrap(), &fields));
        assert!(!interim.send(StatusCode::CONTINUE, &fields));
        let mut written: Vec<u8> = Vec::new();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(
            interim.poll_drain(Pin::new(&mut written), &mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(
            String::from_utf8(written).unwrap(),
            "HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n"
        );
        interim.note_write(10, &Poll::Ready(Ok(4)));
        assert!(!interim.send(StatusCode::from_u16(103).unwrap(), &fields));
        interim.note_write(6, &Poll::Ready(Ok(6)));
        assert!(interim.send(StatusCode::from_u16(103).unwrap(), &fields));
    }
}
