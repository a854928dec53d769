//! One client connection: a reader that frames requests (text and meta,
//! or binary when the first byte is 0x80, as the server decides), routes
//! each at once in arrival order and queues a future of its reply, and a
//! writer that awaits those futures in the same order and writes the
//! replies, gathering every reply already complete into one write.
//!
//! Memory is bounded per connection: at most `INFLIGHT` requests are
//! routed and unanswered (the reader stops reading past that), and the
//! read buffer holds at most one request (the parsers cap its size). A
//! client that never reads stalls its own writer, then its own reader,
//! and nothing else.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::ctx::Ctx;

/// Requests routed but not yet written back, per connection.
const INFLIGHT: usize = 1024;
/// Replies gathered into one write at most.
const WRITE_MAX: usize = 256 * 1024;

/// What a request's reply future gives the writer.
pub enum Out {
    Bytes(Vec<u8>),
    /// Write what came before, then close (quit).
    Close,
}

pub type ReplyFut = Pin<Box<dyn Future<Output = Out> + Send>>;

/// A reply known at once.
pub fn ready(b: Vec<u8>) -> ReplyFut {
    Box::pin(std::future::ready(Out::Bytes(b)))
}

/// What a protocol's step did with the front of the read buffer.
pub enum Step {
    /// Need more bytes.
    Incomplete,
    /// A request (or a bad one) of `len` bytes, `swallow` more to drop as
    /// they come, and its reply (none for `noreply`).
    Done {
        len: usize,
        swallow: usize,
        reply: Option<ReplyFut>,
    },
    /// Close after the reply, if any.
    Close(Option<ReplyFut>),
    /// A request ordered against everything around it (`flush_all`,
    /// `stats`): it runs once every earlier reply is written, and later
    /// requests are routed only after it.
    Barrier { len: usize, run: ReplyFut },
}

impl Step {
    pub fn reply(len: usize, reply: ReplyFut) -> Step {
        Step::Done {
            len,
            swallow: 0,
            reply: Some(reply),
        }
    }
}

#[derive(Clone, Copy)]
enum Proto {
    Text,
    Binary,
}

/// Serves one client until it closes.
pub async fn serve(stream: TcpStream, ctx: Arc<Ctx>, lane: usize) {
    let _ = stream.set_nodelay(true);
    ctx.stats.curr_connections.fetch_add(1, Ordering::Relaxed);
    ctx.stats.total_connections.fetch_add(1, Ordering::Relaxed);
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel(INFLIGHT);
    let writer = tokio::spawn(write_loop(wr, rx));
    read_loop(rd, tx, &ctx, lane).await;
    let _ = writer.await;
    ctx.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
}

async fn read_loop(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    tx: mpsc::Sender<ReplyFut>,
    ctx: &Arc<Ctx>,
    lane: usize,
) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut proto = None;
    let mut swallow = 0usize;
    loop {
        loop {
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
                        if tx.send(r).await.is_err() {
                            return;
                        }
                    }
                }
                Step::Barrier { len, run } => {
                    buf.advance(len);
                    let (done, drained) = tokio::sync::oneshot::channel::<()>();
                    let marker: ReplyFut = Box::pin(async move {
                        let _ = done.send(());
                        Out::Bytes(Vec::new())
                    });
                    if tx.send(marker).await.is_err() || drained.await.is_err() {
                        return;
                    }
                    let out = run.await;
                    if tx.send(Box::pin(std::future::ready(out))).await.is_err() {
                        return;
                    }
                }
                Step::Close(reply) => {
                    if let Some(r) = reply {
                        let _ = tx.send(r).await;
                    }
                    let _ = tx.send(Box::pin(std::future::ready(Out::Close))).await;
                    return;
                }
            }
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(16 * 1024);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

async fn write_loop(mut wr: tokio::net::tcp::OwnedWriteHalf, mut rx: mpsc::Receiver<ReplyFut>) {
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut next: Option<ReplyFut> = None;
    loop {
        let fut = match next.take() {
            Some(f) => f,
            None => match rx.recv().await {
                Some(f) => f,
                None => break,
            },
        };
        let mut close = false;
        match fut.await {
            Out::Bytes(b) => out.extend_from_slice(&b),
            Out::Close => close = true,
        }
        // Gather the replies that are complete already into this write.
        while !close && out.len() < WRITE_MAX {
            let Ok(mut f) = rx.try_recv() else { break };
            match (&mut f).now_or_never() {
                Some(Out::Bytes(b)) => out.extend_from_slice(&b),
                Some(Out::Close) => close = true,
                None => {
                    next = Some(f);
                    break;
                }
            }
        }
        if !out.is_empty() {
            if wr.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if close {
            let _ = wr.shutdown().await;
            return;
        }
    }
    let _ = wr.shutdown().await;
}
