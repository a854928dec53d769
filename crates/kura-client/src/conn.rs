//! One pipelined connection to a server: a writer task and a reader task
//! over the two halves of the socket, and the queue of requests written
//! but not yet answered between them.
//!
//! Requests from any number of tasks go into a channel; the writer takes
//! every request queued at that moment, appends them to one buffer, puts
//! them on the pending queue (before writing, so the reader always finds
//! the request a reply belongs to) and writes the buffer with one call.
//! The reader frames replies in order and hands each request its own:
//! a meta reply must carry the request's opaque (`O`) token, a quiet
//! batch's replies a token of the batch, up to its `MN`. Anything else
//! (bytes that are not a reply, a wrong token, a reply nobody asked for,
//! EOF) closes the connection and fails every request on it: a reply never
//! reaches the wrong request. Reading and writing are separate tasks so a
//! large batch can be written while its replies are already arriving.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::binary;
use crate::config::Protocol;
use crate::error::{Error, Result};
use crate::near::NearCache;
use crate::reply::{self, Reply, Status};

/// Requests below this size are copied into the writer's buffer; larger
/// ones are written from their own buffer.
const COALESCE_MAX: usize = 64 * 1024;
/// The writer stops gathering queued requests past this many bytes.
const WRITE_MAX: usize = 1024 * 1024;

/// What replies a request expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// One meta reply carrying `O<opaque>` (binary: the opaque field).
    Meta(u32),
    /// Meta replies with opaques below `n`, ended by `MN` (binary: `NOOP`).
    MetaBatch(u32),
    /// `n` text replies: each one line, or `VALUE`s ended by `END`.
    Text(u32),
}

/// Where a queued request's replies come.
pub(crate) type Replies = oneshot::Receiver<Result<Vec<Reply>>>;

/// A request on its way to the writer.
struct Job {
    bytes: Bytes,
    expect: Expect,
    reply: oneshot::Sender<Result<Vec<Reply>>>,
}

/// A request written and waiting for its replies.
struct Pending {
    expect: Expect,
    got: Vec<Reply>,
    /// Text: replies complete so far.
    done: u32,
    reply: oneshot::Sender<Result<Vec<Reply>>>,
}

struct Shared {
    server: String,
    /// The near cache this connection's invalidations (`IV`) go to, when
    /// the server took its `mt`.
    near: Option<Arc<NearCache>>,
    pending: Mutex<VecDeque<Pending>>,
    closed: AtomicBool,
    tasks: OnceLock<[AbortHandle; 2]>,
}

impl Shared {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the connection: every request on it gets `err`.
    fn fail(&self, err: Error) {
        let drained: Vec<Pending> = {
            let mut q = self.queue();
            self.closed.store(true, Ordering::Release);
            q.drain(..).collect()
        };
        if !drained.is_empty() {
            tracing::debug!(server = %self.server, %err, "connection closed");
        }
        for p in drained {
            let _ = p.reply.send(Err(err.clone()));
        }
        // Invalidations for what was read here can no longer arrive.
        if let Some(near) = &self.near {
            near.clear();
        }
        if let Some(tasks) = self.tasks.get() {
            for t in tasks {
                t.abort();
            }
        }
    }
}

/// A connection shared by many requests.
pub(crate) struct Conn {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
    protocol: Protocol,
}

impl Conn {
    /// Wraps a connected socket speaking `protocol`; `near` when the
    /// connection is subscribed to invalidations for that near cache.
    pub fn start(
        stream: TcpStream,
        server: &str,
        protocol: Protocol,
        near: Option<Arc<NearCache>>,
    ) -> Conn {
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::channel(4096);
        let shared = Arc::new(Shared {
            server: server.to_string(),
            near,
            pending: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            tasks: OnceLock::new(),
        });
        let w = tokio::spawn(writer(wr, rx, shared.clone()));
        let r = tokio::spawn(reader(rd, shared.clone(), protocol));
        let _ = shared.tasks.set([w.abort_handle(), r.abort_handle()]);
        Conn {
            jobs: tx,
            shared,
            protocol,
        }
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire) || self.jobs.is_closed()
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Closes the connection, failing what is in flight with `err`.
    pub fn close(&self, err: Error) {
        self.shared.fail(err);
    }

    /// Sends `bytes` and waits for the replies `expect` describes.
    ///
    /// # Errors
    /// The connection fails or closes before the replies are complete.
    pub async fn call(&self, bytes: Bytes, expect: Expect) -> Result<Vec<Reply>> {
        let rx = self.enqueue(bytes, expect).await?;
        rx.await
            .map_err(|_| Error::ConnectionClosed(self.shared.server.clone()))?
    }

    /// Queues `bytes` for the writer and returns where its replies will
    /// come. Requests queued one after another by one task are written
    /// (and answered) in that order.
    ///
    /// # Errors
    /// The connection is closed.
    pub async fn enqueue(&self, bytes: Bytes, expect: Expect) -> Result<Replies> {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            bytes,
            expect,
            reply: tx,
        };
        self.jobs
            .send(job)
            .await
            .map_err(|_| Error::ConnectionClosed(self.shared.server.clone()))?;
        Ok(rx)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared
            .fail(Error::ConnectionClosed(self.shared.server.clone()));
    }
}

async fn writer(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Job>, shared: Arc<Shared>) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut big: Vec<Bytes> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        let mut size = 0;
        {
            let mut q = shared.queue();
            while let Some(job) = next.take() {
                if shared.closed.load(Ordering::Acquire) {
                    let err = Error::ConnectionClosed(shared.server.clone());
                    let _ = job.reply.send(Err(err));
                } else {
                    size += job.bytes.len();
                    if job.bytes.len() < COALESCE_MAX && big.is_empty() {
                        buf.extend_from_slice(&job.bytes);
                    } else {
                        if !buf.is_empty() {
                            big.push(buf.split().freeze());
                        }
                        big.push(job.bytes);
                    }
                    q.push_back(Pending {
                        expect: job.expect,
                        got: Vec::new(),
                        done: 0,
                        reply: job.reply,
                    });
                }
                if size < WRITE_MAX {
                    next = rx.try_recv().ok();
                }
            }
        }
        if !buf.is_empty() {
            big.push(buf.split().freeze());
        }
        for chunk in big.drain(..) {
            if let Err(e) = wr.write_all(&chunk).await {
                shared.fail(Error::io(&shared.server, e));
                return;
            }
        }
    }
}

async fn reader(mut rd: OwnedReadHalf, shared: Arc<Shared>, protocol: Protocol) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        match rd.read_buf(&mut buf).await {
            Ok(0) => {
                let what = if buf.is_empty() {
                    Error::ConnectionClosed(shared.server.clone())
                } else {
                    Error::protocol(&shared.server, "connection closed inside a reply")
                };
                return shared.fail(what);
            }
            Ok(_) => {}
            Err(e) => return shared.fail(Error::io(&shared.server, e)),
        }
        loop {
            if let Some(near) = &shared.near {
                match invalidation(&mut buf) {
                    Ok(Some(Iv::Key(k))) => {
                        near.invalidated(Some(&k));
                        continue;
                    }
                    Ok(Some(Iv::All)) => {
                        near.invalidated(None);
                        continue;
                    }
                    Ok(None) => {}
                    Err(()) => break,
                }
            }
            let framed = match protocol {
                Protocol::Meta => reply::meta(&mut buf),
                Protocol::Text => reply::text(&mut buf),
                Protocol::Binary => binary::frame(&mut buf),
            };
            let r = match framed {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(what) => return shared.fail(Error::protocol(&shared.server, what)),
            };
            if let Err(what) = deliver(&shared, r) {
                return shared.fail(Error::protocol(&shared.server, what));
            }
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
    }
}

/// A server's invalidation line.
enum Iv {
    Key(BytesMut),
    All,
}

/// An `IV` line at the front of `buf`, taken out: `Ok(None)` when the
/// front is not one, `Err` when it may be but is not complete yet. A key
/// in base64 (`IV <key> b`) drops everything: this client's keys are text.
fn invalidation(buf: &mut BytesMut) -> std::result::Result<Option<Iv>, ()> {
    const IV: &[u8] = b"IV ";
    if buf.len() < IV.len() {
        return if IV.starts_with(buf) && !buf.is_empty() {
            Err(())
        } else {
            Ok(None)
        };
    }
    if !buf.starts_with(IV) {
        return Ok(None);
    }
    let Some(end) = memchr::memmem::find(buf, b"\r\n") else {
        // A line longer than any key's is no invalidation: the reply
        // framer refuses it and the connection closes.
        return if buf.len() > 1024 { Ok(None) } else { Err(()) };
    };
    let mut line = buf.split_to(end + 2);
    line.truncate(end);
    let _ = line.split_to(IV.len());
    if &line[..] == b"*" || line.contains(&b' ') {
        Ok(Some(Iv::All))
    } else {
        Ok(Some(Iv::Key(line)))
    }
}

/// Gives `r` to the oldest pending request; Err when it cannot be its.
fn deliver(shared: &Shared, r: Reply) -> std::result::Result<(), String> {
    let mut q = shared.queue();
    let Some(p) = q.front_mut() else {
        return Err(format!("a reply nobody asked for: {:?}", r.status));
    };
    if take_reply(p.expect, &mut p.got, &mut p.done, r)? {
        if let Some(p) = q.pop_front() {
            let _ = p.reply.send(Ok(p.got));
        }
    }
    Ok(())
}

/// Adds `r` to the replies `got` of a request expecting `expect` (`done`
/// counts the text replies complete so far): `Ok(true)` when the request
/// is complete with it, `Err` when `r` cannot be this request's (wrong
/// opaque, a reply outside the batch).
pub(crate) fn take_reply(
    expect: Expect,
    got: &mut Vec<Reply>,
    done: &mut u32,
    r: Reply,
) -> std::result::Result<bool, String> {
    Ok(match expect {
        Expect::Meta(opaque) => {
            if r.status != Status::Error && r.opaque_token() != Some(opaque) {
                return Err(format!(
                    "reply with opaque {:?} to the request with O{opaque}",
                    r.opaque_token()
                ));
            }
            got.push(r);
            true
        }
        Expect::MetaBatch(n) => {
            if r.status == Status::Noop {
                true
            } else {
                if r.status != Status::Error && r.opaque_token().is_none_or(|o| o >= n) {
                    return Err(format!(
                        "a batch reply without an opaque of the batch: {:?}",
                        r.status
                    ));
                }
                got.push(r);
                false
            }
        }
        Expect::Text(n) => {
            let ends = r.status != Status::Value || r.tokens.is_empty();
            got.push(r);
            if ends {
                *done += 1;
            }
            *done >= n
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{invalidation, Iv};
    use bytes::BytesMut;

    fn take(bytes: &[u8]) -> (std::result::Result<Option<Iv>, ()>, usize) {
        let mut b = BytesMut::from(bytes);
        let r = invalidation(&mut b);
        (r, b.len())
    }

    #[test]
    fn invalidation_lines_are_taken_from_the_front_only() {
        assert!(matches!(take(b"IV k1\r\nHD\r\n"), (Ok(Some(Iv::Key(k))), 4) if &k[..] == b"k1"));
        assert!(matches!(take(b"IV *\r\n"), (Ok(Some(Iv::All)), 0)));
        // base64 keys are not this client's: everything goes.
        assert!(matches!(take(b"IV YSBi b\r\n"), (Ok(Some(Iv::All)), 0)));
        // Not yet complete: wait for more.
        assert!(matches!(take(b"I"), (Err(()), 1)));
        assert!(matches!(take(b"IV som"), (Err(()), 6)));
        // Replies are left to the reply framer.
        assert!(matches!(take(b"HD\r\n"), (Ok(None), 4)));
        assert!(matches!(take(b"VA 2\r\nIV\r\n"), (Ok(None), 10)));
        assert!(matches!(take(b""), (Ok(None), 0)));
        // A line longer than any key's without an end is refused by the
        // framer, not buffered for ever.
        let long = [b"IV ".as_slice(), &[b'x'; 2000]].concat();
        assert!(matches!(take(&long), (Ok(None), 2003)));
    }
}
