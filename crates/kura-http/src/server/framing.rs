//! The guard in front of hyper on HTTP/1.x connections: it follows the client's bytes with
//! `wire`'s parsers, which read heads and bodies exactly as hyper does, and hands hyper only
//! what it could follow.
//!
//! It holds each request head until it has all of it (`httparse` decides where it ends, bare
//! LF line ends included, as for hyper), judges its framing, and follows its body
//! (`Content-Length` bytes, or chunked) to find the next head. A head with both
//! `Content-Length` and `Transfer-Encoding` (which hyper would frame by `Transfer-Encoding`,
//! dropping `Content-Length` before the proxy sees it), or any head hyper would refuse with
//! 400, is replaced by a line hyper refuses (400, connection closed) and nothing after it is
//! read. A head past the size or field-count limits (hyper's own, configured alike) goes to
//! hyper as it is, for its 431, and nothing after it is read. A malformed chunked body goes to
//! hyper up to its bad byte (the request's body fails: 400), then the connection ends. There
//! is no case where the guard stops following and lets bytes through unjudged.
//!
//! Its write side also carries 1xx responses (`interim.rs`), which hyper's server cannot send.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::interim::Interim;
use crate::stats::Stats;
use crate::wire::{parse_head, BodyFraming, Chunked, HeadLimits, Parsed, Progress};

/// What hyper is given instead of a head it must refuse: not a request line (400).
const REFUSED: &[u8] = b"\x01 / HTTP/1.1\r\n\r\n";
const READ_SIZE: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// A request head; `scanned` bytes of it hold no line end yet.
    Head {
        scanned: usize,
    },
    Fixed(u64),
    Chunked(Chunked),
    /// HTTP/2: frames carry their own lengths, everything goes to hyper as it comes. Also
    /// after a `101` to an upgrade request: the bytes are the other protocol's.
    Passthrough,
    /// After an upgrade request: nothing more is read until the answer is written; a `101`
    /// makes the connection `Passthrough`, any other answer `Closed` (the proxy ends such a
    /// connection: `pipe.rs`).
    Upgrade,
    /// Refused, or the stream ended inside a head: nothing more is read.
    Closed,
}

/// The guarded connection.
pub struct Guard<S> {
    inner: S,
    input: BytesMut,
    ready: BytesMut,
    state: State,
    limits: HeadLimits,
    eof: bool,
    stats: Arc<Stats>,
    interim: Option<Arc<Interim>>,
}

impl<S> Guard<S> {
    /// Guards `inner` under `limits` (hyper's limits too).
    pub fn new(inner: S, limits: HeadLimits, stats: Arc<Stats>) -> Guard<S> {
        Guard {
            inner,
            input: BytesMut::new(),
            ready: BytesMut::new(),
            state: State::Head { scanned: 0 },
            limits,
            eof: false,
            stats,
            interim: None,
        }
    }

    /// Guards `inner`, of which `read` was already read (by the HTTP/2 sniffer).
    pub fn with_input(inner: S, read: BytesMut, limits: HeadLimits, stats: Arc<Stats>) -> Self {
        let mut guard = Guard::new(inner, limits, stats);
        guard.input = read;
        guard.judge();
        guard
    }

    /// `inner`, of which `read` was already read, passed through untouched: HTTP/2, whose
    /// frames carry their own lengths.
    pub fn passthrough(inner: S, read: BytesMut, stats: Arc<Stats>) -> Guard<S> {
        let limits = HeadLimits {
            max_head: 0,
            max_headers: 0,
        };
        let mut guard = Guard::new(inner, limits, stats);
        guard.state = State::Passthrough;
        guard.input = read;
        guard.judge();
        guard
    }

    /// The connection's channel for 1xx responses (HTTP/1.x only).
    pub fn interim(&mut self) -> Arc<Interim> {
        self.interim.get_or_insert_with(Arc::default).clone()
    }

    /// Moves every byte of `input` whose place is known to `ready`.
    fn judge(&mut self) {
        while !self.input.is_empty() {
            match &mut self.state {
                State::Passthrough => {
                    let all = self.input.split();
                    self.ready.unsplit(all);
                }
                State::Closed => self.input.clear(),
                // Held until the answer is written (`switch`).
                State::Upgrade => return,
                State::Head { scanned } => {
                    // A head is parsed again only when a line may have ended since.
                    let fresh = &self.input[*scanned..];
                    let full = self.input.len() >= self.limits.max_head;
                    if !full && !self.eof && !fresh.contains(&b'\n') {
                        *scanned = self.input.len();
                        return;
                    }
                    match parse_head(&self.input, &self.limits) {
                        Parsed::Partial if self.eof => {
                            // Cut short: hyper sees the same end of stream.
                            self.pass_all_then_close();
                        }
                        Parsed::Partial => {
                            *scanned = self.input.len();
                            return;
                        }
                        Parsed::Complete { len, body } => {
                            self.state = match body {
                                BodyFraming::None => State::Head { scanned: 0 },
                                BodyFraming::Upgrade => State::Upgrade,
                                BodyFraming::Length(n) => State::Fixed(n),
                                BodyFraming::Chunked => State::Chunked(Chunked::new(
                                    self.limits.max_head,
                                    self.limits.max_headers,
                                )),
                            };
                            let head = self.input.split_to(len);
                            self.ready.unsplit(head);
                        }
                        Parsed::Refused(why) if why.is_too_large() => {
                            // hyper answers 431 to the same bytes, and reads nothing after.
                            self.pass_all_then_close();
                        }
                        Parsed::Refused(_) => {
                            self.stats.bad_requests.fetch_add(1, Ordering::Relaxed);
                            self.input.clear();
                            self.ready.extend_from_slice(REFUSED);
                            self.state = State::Closed;
                        }
                    }
                }
                State::Fixed(left) => {
                    let take = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(self.input.len());
                    *left -= take as u64;
                    self.state = if *left == 0 {
                        State::Head { scanned: 0 }
                    } else {
                        State::Fixed(*left)
                    };
                    let body = self.input.split_to(take);
                    self.ready.unsplit(body);
                }
                State::Chunked(chunked) => {
                    let (used, progress) = chunked.feed(&self.input);
                    match progress {
                        Progress::More => {}
                        Progress::Done => self.state = State::Head { scanned: 0 },
                        Progress::Malformed => {
                            // hyper gets the body up to its bad byte and fails the request
                            // (400); nothing after it is read.
                            let upto = (used + 1).min(self.input.len());
                            let body = self.input.split_to(upto);
                            self.ready.unsplit(body);
                            self.input.clear();
                            self.state = State::Closed;
                            return;
                        }
                    }
                    let body = self.input.split_to(used);
                    self.ready.unsplit(body);
                }
            }
        }
    }

    fn pass_all_then_close(&mut self) {
        let all = self.input.split();
        self.ready.unsplit(all);
        self.state = State::Closed;
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guard<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if !this.ready.is_empty() {
                let n = this.ready.len().min(buf.remaining());
                buf.put_slice(&this.ready[..n]);
                this.ready.advance(n);
                if this.ready.is_empty() {
                    // Let go of the buffer `input` came from, so that its next `reserve` can
                    // reuse it in place instead of allocating a new one for every request.
                    this.ready = BytesMut::new();
                }
                return Poll::Ready(Ok(()));
            }
            if this.state == State::Closed || this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.state == State::Upgrade {
                // Nothing is read before the answer; writing it wakes the connection's task.
                return Poll::Pending;
            }
            this.input.reserve(READ_SIZE);
            match tokio_util::io::poll_read_buf(Pin::new(&mut this.inner), cx, &mut this.input) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(0)) => this.eof = true,
                Poll::Ready(Ok(_)) => {}
            }
            this.judge();
        }
    }
}

impl<S: AsyncWrite + Unpin> Guard<S> {
    /// Writes the queued 1xx responses first: they go before anything hyper writes next.
    fn poll_interim(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.interim {
            Some(interim) => interim.poll_drain(Pin::new(&mut self.inner), cx),
            None => Poll::Ready(Ok(())),
        }
    }

    /// After an upgrade request, the answer's first bytes decide what the connection is.
    fn switch(&mut self, first: &[u8]) {
        if self.state != State::Upgrade {
            return;
        }
        if first.starts_with(b"HTTP/1.1 101 ") {
            self.state = State::Passthrough;
            self.judge();
        } else {
            self.input.clear();
            self.state = State::Closed;
        }
    }

    /// Notes whether hyper's write of `offered` bytes was all taken (`interim.rs`).
    fn note(&self, offered: usize, result: &Poll<io::Result<usize>>) {
        if let Some(interim) = &self.interim {
            interim.note_write(offered, result);
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.poll_interim(cx)?.is_pending() {
            this.note(data.len(), &Poll::Pending);
            return Poll::Pending;
        }
        this.switch(data);
        let result = Pin::new(&mut this.inner).poll_write(cx, data);
        this.note(data.len(), &result);
        result
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let offered = bufs.iter().map(|b| b.len()).sum();
        if this.poll_interim(cx)?.is_pending() {
            this.note(offered, &Poll::Pending);
            return Poll::Pending;
        }
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            this.switch(first);
        }
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.note(offered, &result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_interim(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
