//! One pipelined connection to a server: the queue of requests written
//! but not yet answered, a writer task and a reader task for requests from
//! many tasks, and a direct path for a caller that finds it idle.
//!
//! Requests from any number of tasks go into a channel; the writer takes
//! every request queued at that moment, appends them to one buffer, puts
//! them on the pending queue (before writing, so whoever reads always
//! finds the request a reply belongs to) and writes the buffer with one
//! call. Replies are framed in order and each request gets its own: a
//! meta reply must carry the request's opaque (`O`) token, a quiet batch's
//! replies a token of the batch, up to its `MN`. Anything else (bytes that
//! are not a reply, a wrong token, a reply nobody asked for, EOF) closes
//! the connection and fails every request on it: a reply never reaches the
//! wrong request. Reading and writing are separate tasks so a large batch
//! can be written while its replies are already arriving.
//!
//! A caller that finds the connection idle (nothing pending, nothing
//! queued for the writer, nobody reading) writes its request and reads its
//! reply itself ([`direct`]), without waking either task; requests other
//! tasks queue meanwhile go through the writer behind it, and the reader
//! task takes over reading once the direct caller has its reply (or is
//! cancelled). Only one party reads at a time: the read half and its
//! buffer ([`ReadSide`]) are held by whoever reads, and sit in the shared
//! state while nobody does. A connection subscribed to invalidations
//! keeps its reader task reading, so it has no direct path.

mod direct;
mod io;
mod replies;
mod tasks;

pub(crate) use replies::take_reply;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Waker};

use bytes::{Bytes, BytesMut};
use kura_tls::ClientStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::AbortHandle;

use crate::config::Protocol;
use crate::error::{Error, Result};
use crate::near::NearCache;
use kura_proto::client::Reply;

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

/// Who gets a pending request's replies.
enum Waiter {
    /// A request that went through the writer.
    Task(oneshot::Sender<Result<Vec<Reply>>>),
    /// A direct caller, which reads them itself (or was cancelled: its
    /// replies are then read and dropped).
    Caller,
}

/// A request written and waiting for its replies.
struct Pending {
    expect: Expect,
    got: Vec<Reply>,
    /// Text: replies complete so far.
    done: u32,
    waiter: Waiter,
}

impl Pending {
    fn new(expect: Expect, waiter: Waiter) -> Pending {
        Pending {
            expect,
            got: Vec::new(),
            done: 0,
            waiter,
        }
    }
}

/// The socket's read half and what was read from it but not yet framed.
struct ReadSide {
    rd: io::Rd,
    buf: BytesMut,
}

struct State {
    pending: VecDeque<Pending>,
    /// The read side while nobody reads.
    read: Option<ReadSide>,
    /// A direct caller is finishing a write that did not fit the socket
    /// at once: the writer task waits for it.
    caller_writing: bool,
}

struct Shared {
    server: String,
    protocol: Protocol,
    /// The near cache this connection's invalidations (`IV`) go to, when
    /// the server took its `mt`.
    near: Option<Arc<NearCache>>,
    state: Mutex<State>,
    /// Written by the writer task, and by a direct caller while the
    /// writer has nothing to write.
    wr: io::Wr,
    /// Requests in the writer's channel, not yet on `pending`.
    queued: AtomicUsize,
    closed: AtomicBool,
    /// Wakes the reader task: there are pending requests to read for.
    wake_reader: Notify,
    /// Wakes the writer task: a direct caller finished its write.
    write_free: Notify,
    tasks: OnceLock<[AbortHandle; 2]>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn closed_error(&self) -> Error {
        Error::ConnectionClosed(self.server.clone())
    }

    /// Closes the connection: every request on it gets `err`.
    fn fail(&self, err: Error) {
        let drained: Vec<Pending> = {
            let mut st = self.state();
            self.closed.store(true, Ordering::Release);
            st.pending.drain(..).collect()
        };
        if !drained.is_empty() {
            tracing::debug!(server = %self.server, %err, "connection closed");
        }
        for p in drained {
            if let Waiter::Task(tx) = p.waiter {
                let _ = tx.send(Err(err.clone()));
            }
        }
        // A direct caller waiting for its reply reads EOF and fails; the
        // server sees the connection end.
        self.wr.shutdown();
        // Invalidations for what was read here can no longer arrive.
        if let Some(near) = &self.near {
            near.clear();
        }
        if let Some(tasks) = self.tasks.get() {
            for t in tasks {
                t.abort();
            }
        }
        self.wake_reader.notify_one();
        self.write_free.notify_one();
    }

    /// Whether an idle connection was closed by the server (or sent what
    /// nobody asked for) since it was last used: the reader task does not
    /// watch an idle connection, so this looks at the socket's readiness
    /// (no system call unless the socket became readable).
    fn check_idle(&self) {
        let mut st = self.state();
        if !st.pending.is_empty() {
            return;
        }
        let Some(side) = st.read.as_mut() else {
            return;
        };
        // A TLS session's bytes are not the server's: not looked at.
        let io::Rd::Tcp(rd) = &mut side.rd else {
            return;
        };
        let mut cx = Context::from_waker(Waker::noop());
        if rd.as_ref().poll_read_ready(&mut cx).is_pending() {
            return;
        }
        let err = match rd.try_read_buf(&mut side.buf) {
            Ok(0) => self.closed_error(),
            Ok(_) => Error::protocol(&self.server, "a reply nobody asked for"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) => Error::io(&self.server, e),
        };
        drop(st);
        self.fail(err);
    }
}

/// A connection shared by many requests.
pub(crate) struct Conn {
    jobs: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

impl Conn {
    /// Wraps a connected socket speaking `protocol`; `near` when the
    /// connection is subscribed to invalidations for that near cache.
    pub fn start(
        stream: ClientStream,
        server: &str,
        protocol: Protocol,
        near: Option<Arc<NearCache>>,
    ) -> Conn {
        let _ = stream.tcp().set_nodelay(true);
        let (rd, wr) = io::split(stream);
        let (tx, rx) = mpsc::channel(4096);
        let shared = Arc::new(Shared {
            server: server.to_string(),
            protocol,
            near,
            state: Mutex::new(State {
                pending: VecDeque::new(),
                read: Some(ReadSide {
                    rd,
                    buf: BytesMut::with_capacity(64 * 1024),
                }),
                caller_writing: false,
            }),
            wr,
            queued: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            wake_reader: Notify::new(),
            write_free: Notify::new(),
            tasks: OnceLock::new(),
        });
        let w = tokio::spawn(tasks::writer(rx, shared.clone()));
        let r = tokio::spawn(tasks::reader(shared.clone()));
        let _ = shared.tasks.set([w.abort_handle(), r.abort_handle()]);
        Conn { jobs: tx, shared }
    }

    pub fn is_closed(&self) -> bool {
        if self.shared.is_closed() || self.jobs.is_closed() {
            return true;
        }
        self.shared.check_idle();
        self.shared.is_closed()
    }

    pub fn protocol(&self) -> Protocol {
        self.shared.protocol
    }

    /// Closes the connection, failing what is in flight with `err`.
    pub fn close(&self, err: Error) {
        self.shared.fail(err);
    }

    /// Sends `bytes` and waits for the replies `expect` describes: on an
    /// idle connection the caller writes and reads itself, otherwise the
    /// request goes through the writer and reader tasks.
    ///
    /// # Errors
    /// The connection fails or closes before the replies are complete.
    pub async fn call(&self, bytes: Bytes, expect: Expect) -> Result<Vec<Reply>> {
        if let Some(d) = direct::Direct::start(&self.shared, &bytes, expect)? {
            return d.replies().await;
        }
        let rx = self.enqueue(bytes, expect).await?;
        rx.await.map_err(|_| self.shared.closed_error())?
    }

    /// Queues `bytes` for the writer and returns where its replies will
    /// come. Requests queued one after another by one task are written
    /// (and answered) in that order, and before any it sends later.
    ///
    /// # Errors
    /// The connection is closed.
    pub async fn enqueue(&self, bytes: Bytes, expect: Expect) -> Result<Replies> {
        let permit = self
            .jobs
            .reserve()
            .await
            .map_err(|_| self.shared.closed_error())?;
        let (tx, rx) = oneshot::channel();
        // Counted before it is in the channel: a later direct call by the
        // same task sees it and queues behind it.
        self.shared.queued.fetch_add(1, Ordering::SeqCst);
        permit.send(Job {
            bytes,
            expect,
            reply: tx,
        });
        Ok(rx)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared.fail(self.shared.closed_error());
    }
}
