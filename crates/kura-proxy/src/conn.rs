//! One client connection, one task on its worker's event loop: it frames
//! requests (text and meta, or binary when the first byte is 0x80, as the
//! server decides), routes each at once in arrival order (which appends it
//! to a backend connection of the same worker) and queues the future of
//! its reply; it writes the replies in that order, every reply already
//! complete in one write.
//!
//! Memory is bounded per connection: requests are routed only while
//! `limits.rs`'s budget has room (in requests, and in the bytes their
//! replies are expected to run to, per client and per worker; reading
//! stops past that), and the read buffer holds at most one request (the
//! parsers cap its size). A client that never reads stalls its own task in
//! its write, and nothing else: the backend connections keep delivering
//! its replies into their slots, and its budget bounds how many there are.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::ctx::Ctx;
use crate::idle;
use crate::limits::Budget;
use crate::reply::{Out, ReplyFut, Step};

/// Replies gathered into one write at most.
const WRITE_MAX: usize = 256 * 1024;

#[derive(Clone, Copy)]
enum Proto {
    Text,
    Binary,
}

/// The replies routed and not yet written, oldest first, and the bytes of
/// those already complete.
struct Replies {
    /// Each with what it reserved of the budget.
    queue: VecDeque<(ReplyFut, usize)>,
    out: Vec<u8>,
    close: bool,
    budget: Budget,
    /// The reloads seen: a new one brings its `[limits]`.
    reloads: u64,
}

impl Replies {
    fn new(budget: Budget) -> Replies {
        idle::add(1);
        Replies {
            queue: VecDeque::new(),
            out: Vec::with_capacity(16 * 1024),
            close: false,
            budget,
            reloads: 0,
        }
    }

    /// Whether another request may be routed.
    fn room(&self) -> bool {
        self.budget.room(self.queue.len())
    }

    fn push(&mut self, r: ReplyFut) {
        if self.queue.is_empty() {
            idle::add(-1);
        }
        let reserved = self.budget.routed();
        self.queue.push_back((r, reserved));
    }

    /// Moves the complete replies at the front into `out` (`Ready` when at
    /// least the front one was complete, or nothing is queued).
    fn gather(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut any = self.queue.is_empty();
        while !self.close && self.out.len() < WRITE_MAX {
            let Some((front, reserved)) = self.queue.front_mut() else {
                break;
            };
            let len = match front.as_mut().poll(cx) {
                Poll::Ready(Out::Bytes(b)) => {
                    self.out.extend_from_slice(&b);
                    b.len()
                }
                Poll::Ready(Out::Static(b)) => {
                    self.out.extend_from_slice(b);
                    b.len()
                }
                Poll::Ready(Out::Close) => {
                    self.close = true;
                    0
                }
                Poll::Pending => break,
            };
            self.budget.answered(*reserved, len);
            self.queue.pop_front();
            if self.queue.is_empty() {
                idle::add(1);
            }
            any = true;
        }
        if any {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Writes what is complete; false when the client is gone.
    async fn flush<S: AsyncWrite + Unpin>(&mut self, stream: &mut S) -> bool {
        if self.out.is_empty() {
            return true;
        }
        // A TLS session's records may wait in it until flushed.
        let ok = stream.write_all(&self.out).await.is_ok() && stream.flush().await.is_ok();
        self.out.clear();
        if self.out.capacity() > 4 * WRITE_MAX {
            self.out.shrink_to(16 * 1024);
        }
        ok
    }

    /// Waits for every queued reply and writes them all; false when the
    /// client is gone (or a reply closed the connection).
    async fn drain<S: AsyncWrite + Unpin>(&mut self, stream: &mut S) -> bool {
        while !self.queue.is_empty() && !self.close {
            std::future::poll_fn(|cx| self.gather(cx)).await;
            if !self.flush(stream).await {
                return false;
            }
        }
        self.flush(stream).await && !self.close
    }
}

impl Drop for Replies {
    fn drop(&mut self) {
        if self.queue.is_empty() {
            idle::add(-1);
        }
    }
}

/// A client's connection: TCP, TLS over TCP, or a Unix socket.
pub trait ClientIo: AsyncRead + AsyncWrite + Unpin {}
impl<S: AsyncRead + AsyncWrite + Unpin> ClientIo for S {}

/// Serves one client until it closes.
pub async fn serve<S: ClientIo>(mut stream: S, ctx: Arc<Ctx>, lane: usize) {
    ctx.stats.curr_connections.fetch_add(1, Ordering::Relaxed);
    ctx.stats.total_connections.fetch_add(1, Ordering::Relaxed);
    let reloads = ctx.reloads();
    let mut replies = Replies::new(Budget::new(&ctx.limits(), ctx.threads));
    replies.reloads = reloads;
    if run(&mut stream, &mut replies, &ctx, lane).await {
        let _ = replies.drain(&mut stream).await;
    }
    let _ = stream.shutdown().await;
    ctx.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
}

/// Reads, routes and answers until the client closes its side (true: the
/// replies still queued are to be written) or is gone (false).
async fn run<S: ClientIo>(
    stream: &mut S,
    replies: &mut Replies,
    ctx: &Arc<Ctx>,
    lane: usize,
) -> bool {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut proto = None;
    let mut swallow = 0usize;
    loop {
        let reloads = ctx.reloads();
        if reloads != replies.reloads {
            replies.reloads = reloads;
            replies.budget.set_limits(&ctx.limits(), ctx.threads);
        }
        // Route every request buffered, while the budget has room.
        while replies.room() {
            if swallow > 0 {
                let n = swallow.min(buf.len());
                buf.advance(n);
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            let Some(&first) = buf.first() else { break };
            let p = *proto.get_or_insert(if first == kura_proto::binary::REQUEST_MAGIC {
                Proto::Binary
            } else {
                Proto::Text
            });
            let step = match p {
                Proto::Text => crate::text::step(ctx, lane, &buf).await,
                Proto::Binary => crate::binary::step(ctx, lane, &buf).await,
            };
            match step {
                Step::Incomplete => break,
                Step::Done {
                    len,
                    swallow: s,
                    reply,
                } => {
                    buf.advance(len);
                    swallow = s;
                    if let Some(r) = reply {
                        replies.push(r);
                    }
                }
                Step::Barrier { len, run } => {
                    buf.advance(len);
                    if !replies.drain(stream).await {
                        return false;
                    }
                    replies.push(Box::pin(std::future::ready(run.await)));
                }
                Step::Close(reply) => {
                    if let Some(r) = reply {
                        replies.push(r);
                    }
                    replies.push(Box::pin(std::future::ready(Out::Close)));
                    return true;
                }
            }
        }
        // Write what is complete already, then wait for more bytes or
        // the next reply.
        std::future::poll_fn(|cx| {
            let _ = replies.gather(cx);
            Poll::Ready(())
        })
        .await;
        if !replies.flush(stream).await || replies.close {
            return false;
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        let room = replies.room();
        let waiting = !replies.queue.is_empty();
        tokio::select! {
            biased;
            () = std::future::poll_fn(|cx| replies.gather(cx)), if waiting => {}
            read = stream.read_buf(&mut buf), if room => match read {
                Ok(0) => return true,
                Err(_) => return false,
                Ok(_) => {}
            },
        }
    }
}
