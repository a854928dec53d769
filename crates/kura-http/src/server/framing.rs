//! A guard in front of hyper on HTTP/1.x connections that refuses a request carrying both
//! `Content-Length` and `Transfer-Encoding` with 400 and closes the connection.
//!
//! hyper frames such a request by `Transfer-Encoding` and drops `Content-Length` before the
//! proxy sees it (RFC 9112 §6.1 allows either), so the check has to see the bytes first. The
//! guard reads the connection into a buffer of its own and hands hyper a request head only once
//! it has seen all of it: a head with both fields is replaced by a line hyper rejects (400,
//! connection closed) and nothing after it is read. To find the next head it follows each
//! request's body as hyper will (`Content-Length` bytes, or chunked); whenever it cannot follow
//! (a head it cannot parse, a malformed chunk, a head larger than the limit) it steps aside for
//! the rest of the connection and hyper, the real parser, decides alone.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::stats::Stats;

/// What hyper is given instead of a head with both framing fields: not a request line.
const REFUSED: &[u8] = b"\x01 / HTTP/1.1\r\n\r\n";
const READ_SIZE: usize = 16 * 1024;
const MAX_HEADERS: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Hex digits of a chunk size (`digits` seen so far), then maybe extensions.
    Size {
        size: u64,
        digits: u8,
        ext: bool,
    },
    /// The LF after a size line.
    SizeLf {
        size: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    /// A trailer line, `empty` while nothing but its start has been seen.
    Trailer {
        empty: bool,
    },
    TrailerLf {
        empty: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Fixed(u64),
    Chunked(Chunk),
    /// Not following the framing any more: everything goes to hyper as it comes.
    Aside,
    /// A request was refused: nothing more is read.
    Refused,
}

/// The guarded connection.
pub struct Guard<S> {
    inner: S,
    input: BytesMut,
    ready: BytesMut,
    state: State,
    max_head: usize,
    eof: bool,
    stats: Arc<Stats>,
}

impl<S> Guard<S> {
    /// Guards `inner`; heads larger than `max_head` are left to hyper (which refuses them).
    pub fn new(inner: S, max_head: usize, stats: Arc<Stats>) -> Guard<S> {
        Guard {
            inner,
            input: BytesMut::new(),
            ready: BytesMut::new(),
            state: State::Head,
            max_head,
            eof: false,
            stats,
        }
    }

    /// Guards `inner`, of which `read` was already read (by the HTTP/2 sniffer).
    pub fn with_input(inner: S, read: BytesMut, max_head: usize, stats: Arc<Stats>) -> Guard<S> {
        let mut guard = Guard::new(inner, max_head, stats);
        guard.input = read;
        guard.judge();
        guard
    }

    /// `inner`, of which `read` was already read, passed through untouched: HTTP/2, whose
    /// frames carry their own lengths.
    pub fn passthrough(inner: S, read: BytesMut, stats: Arc<Stats>) -> Guard<S> {
        let mut guard = Guard::new(inner, 0, stats);
        guard.state = State::Aside;
        guard.input = read;
        guard.judge();
        guard
    }

    /// Moves every byte of `input` whose place is known to `ready`.
    fn judge(&mut self) {
        while !self.input.is_empty() {
            match self.state {
                State::Aside => {
                    let all = self.input.split();
                    self.ready.unsplit(all);
                }
                State::Refused => self.input.clear(),
                State::Head => {
                    let Some(end) = find_head_end(&self.input) else {
                        if self.input.len() > self.max_head || self.eof {
                            self.state = State::Aside;
                            continue;
                        }
                        return;
                    };
                    self.state = match framing(&self.input[..end]) {
                        Framing::Conflict => {
                            self.stats.bad_requests.fetch_add(1, Ordering::Relaxed);
                            self.input.clear();
                            self.ready.extend_from_slice(REFUSED);
                            self.state = State::Refused;
                            return;
                        }
                        Framing::Unknown => State::Aside,
                        Framing::None => State::Head,
                        Framing::Length(0) => State::Head,
                        Framing::Length(n) => State::Fixed(n),
                        Framing::Chunked => State::Chunked(Chunk::Size {
                            size: 0,
                            digits: 0,
                            ext: false,
                        }),
                    };
                    let head = self.input.split_to(end);
                    self.ready.unsplit(head);
                }
                State::Fixed(left) => {
                    let take = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(self.input.len());
                    let body = self.input.split_to(take);
                    self.ready.unsplit(body);
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::Head
                    } else {
                        State::Fixed(left)
                    };
                }
                State::Chunked(chunk) => {
                    if let Chunk::Data(left) = chunk {
                        let take = usize::try_from(left)
                            .unwrap_or(usize::MAX)
                            .min(self.input.len());
                        let data = self.input.split_to(take);
                        self.ready.unsplit(data);
                        let left = left - take as u64;
                        self.state = State::Chunked(if left == 0 {
                            Chunk::DataCr
                        } else {
                            Chunk::Data(left)
                        });
                        continue;
                    }
                    let byte = self.input[0];
                    self.state = match step(chunk, byte) {
                        Some(Step::Next(next)) => State::Chunked(next),
                        Some(Step::Done) => State::Head,
                        None => State::Aside,
                    };
                    let one = self.input.split_to(1);
                    self.ready.unsplit(one);
                }
            }
        }
    }
}

enum Step {
    Next(Chunk),
    Done,
}

/// One byte of a chunked body outside chunk data (RFC 9112 §7.1); `None`: malformed.
fn step(chunk: Chunk, byte: u8) -> Option<Step> {
    use Chunk::*;
    Some(Step::Next(match (chunk, byte) {
        (
            Size {
                ext: false,
                size,
                digits,
            },
            b,
        ) if b.is_ascii_hexdigit() => {
            if digits >= 15 {
                return None;
            }
            let digit = u64::from(char::from(b).to_digit(16)?);
            Size {
                size: size * 16 + digit,
                digits: digits + 1,
                ext: false,
            }
        }
        (Size { size, digits, .. }, b'\r') if digits > 0 => SizeLf { size },
        (Size { size, digits, .. }, b';' | b' ' | b'\t') if digits > 0 => Size {
            size,
            digits,
            ext: true,
        },
        (
            Size {
                ext: true,
                size,
                digits,
            },
            b,
        ) if b != b'\n' => Size {
            size,
            digits,
            ext: true,
        },
        (SizeLf { size: 0 }, b'\n') => Trailer { empty: true },
        (SizeLf { size }, b'\n') => Data(size),
        (DataCr, b'\r') => DataLf,
        (DataLf, b'\n') => Size {
            size: 0,
            digits: 0,
            ext: false,
        },
        (Trailer { empty }, b'\r') => TrailerLf { empty },
        (Trailer { .. }, b'\n') => return None,
        (Trailer { .. }, _) => Trailer { empty: false },
        (TrailerLf { empty: true }, b'\n') => return Some(Step::Done),
        (TrailerLf { empty: false }, b'\n') => Trailer { empty: true },
        _ => return None,
    }))
}

/// The end of the head (after its empty line) at the start of `input`.
fn find_head_end(input: &[u8]) -> Option<usize> {
    input
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

enum Framing {
    None,
    Length(u64),
    Chunked,
    /// Both `Content-Length` and `Transfer-Encoding`.
    Conflict,
    /// Anything this guard does not follow: hyper alone decides.
    Unknown,
}

fn framing(head: &[u8]) -> Framing {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(_)) = request.parse(head) else {
        return Framing::Unknown;
    };
    let mut length: Option<u64> = None;
    let mut lengths = 0;
    let mut codings: Option<Vec<u8>> = None;
    for header in request.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            lengths += 1;
            let Some(value) = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
            else {
                return Framing::Unknown;
            };
            if length.is_some_and(|l| l != value) {
                return Framing::Unknown;
            }
            length = Some(value);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            let all = codings.get_or_insert_with(Vec::new);
            if !all.is_empty() {
                all.push(b',');
            }
            all.extend_from_slice(header.value);
        }
    }
    match (lengths, codings) {
        (0, None) => Framing::None,
        (_, None) => length.map_or(Framing::Unknown, Framing::Length),
        (0, Some(codings)) => {
            let last = codings.rsplit(|&b| b == b',').next().unwrap_or_default();
            if last.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                Framing::Chunked
            } else {
                Framing::Unknown
            }
        }
        (_, Some(_)) => Framing::Conflict,
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
            if this.state == State::Refused || this.eof {
                return Poll::Ready(Ok(()));
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

impl<S: AsyncWrite + Unpin> AsyncWrite for Guard<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
