//! A worker thread's pipelined connections to the backends. Each worker
//! owns its own connections (`connections_per_backend` to each backend,
//! made on first use), so a request never leaves the thread its client is
//! served on: routing appends the request's bytes to the connection's
//! output buffer and its place to the queue of requests waiting for
//! replies (no channel, no lock); the connection's writer task, woken
//! once, writes everything the worker's clients appended in that round of
//! the event loop with one write; its reader task frames the replies and
//! puts each request's into that request's slot, waking the client task
//! that waits on it. Replies are framed with kura-proto's client codec
//! (`raw::frame`; a multi-get's `VALUE` entries as one run,
//! `kura_proto::client::values`).
//!
//! A reply is matched to its request by order and opaque token (kura-client's
//! rules, `raw::take_reply`). Anything else, EOF, an I/O error or a request
//! unanswered past the request timeout closes the connection and fails
//! every request on it with that error: a late reply can reach no other
//! request. The next request makes a new connection. One timer per
//! connection watches the oldest request's deadline.
//!
//! A request times out only when the backend is silent: past its deadline
//! (the request timeout after it was queued) and with nothing read from
//! the backend for a request timeout. Replies queued behind others that
//! the backend is busy sending (a client's many big values) wait for the
//! backend's progress, not for a clock started before it could begin on
//! them, so a healthy backend is not taken for down (issue 43).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use kura_client::raw::{frame, take_reply, Expect};
use kura_client::ClientStream;
use kura_client::{Error, Protocol};
use kura_proto::client::{values, Reply, Status};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

mod conns;

#[cfg(test)]
pub use conns::send;
pub use conns::{close_retired, preconnect, recycle, retire, send_with};

/// Requests queued on one connection at most; past that, senders wait.
pub const QUEUE_MAX: usize = 4096;

/// A request's replies, once they came (or the connection failed).
#[derive(Default)]
struct Slot {
    result: RefCell<Option<Result<Vec<Reply>, Error>>>,
    waker: RefCell<Option<Waker>>,
    /// Kept until the request is answered (or failed) and its replies
    /// taken or dropped ([`Pending::hold`]).
    held: RefCell<Option<Box<dyn std::any::Any>>>,
    /// From its queueing to the read that completed its reply.
    took: Cell<Option<Duration>>,
}

impl Slot {
    fn fill(&self, r: Result<Vec<Reply>, Error>) {
        *self.result.borrow_mut() = Some(r);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

/// The replies of a request queued on a connection.
pub struct Pending {
    slot: Rc<Slot>,
}

impl Pending {
    /// Keeps `what` until the request is answered or its connection fails,
    /// even when this `Pending` is dropped first (its client went away).
    pub fn hold(&self, what: impl std::any::Any) {
        *self.slot.held.borrow_mut() = Some(Box::new(what));
    }

    /// How long the backend took to answer, once it has.
    pub fn took(&self) -> Option<Duration> {
        self.slot.took.get()
    }
}

impl Future for Pending {
    type Output = Result<Vec<Reply>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(r) = self.slot.result.borrow_mut().take() {
            return Poll::Ready(r);
        }
        let mut w = self.slot.waker.borrow_mut();
        match w.as_ref() {
            Some(old) if old.will_wake(cx.waker()) => {}
            _ => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// A request written (or to be) and waiting for its replies.
struct Waiting {
    expect: Expect,
    got: Vec<Reply>,
    done: u32,
    queued: Instant,
    slot: Rc<Slot>,
}

#[derive(Default)]
struct State {
    /// Bytes appended and not yet taken by the writer.
    out: BytesMut,
    queue: VecDeque<Waiting>,
    /// Requests appended since the writer last took `out`.
    appended: usize,
    /// Set once the connection failed: why.
    closed: Option<Error>,
}

/// A one-task wake-up: `notify` before or while the task waits.
#[derive(Default)]
struct Signal {
    set: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Signal {
    fn notify(&self) {
        self.set.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    fn wait(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.set.replace(false) {
                return Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
    }
}

/// One pipelined connection of this worker to a backend.
pub struct Conn {
    addr: String,
    state: RefCell<State>,
    /// Wakes the writer: there are bytes to write.
    written: Signal,
    /// Senders waiting for room in a full queue.
    room: RefCell<Vec<Waker>>,
    request_timeout: Duration,
    /// When bytes last came from the backend.
    progress: Cell<Instant>,
    tasks: RefCell<Vec<JoinHandle<()>>>,
    /// Out of the worker's table (its node's settings changed): closes
    /// once nothing waits on it.
    retiring: Cell<bool>,
}

/// Settings of a backend's connections: the timeouts, and the TLS and
/// login of `client` (kura-client's, which connects them).
#[derive(Clone)]
pub struct Timeouts {
    pub connect: Duration,
    pub request: Duration,
    pub client: Arc<kura_client::Config>,
}

impl Conn {
    /// Starts connecting to `addr`; requests may be queued at once.
    fn open(addr: &str, t: &Timeouts) -> Rc<Conn> {
        let conn = Rc::new(Conn {
            addr: addr.to_string(),
            state: RefCell::new(State {
                out: BytesMut::with_capacity(16 * 1024),
                ..State::default()
            }),
            written: Signal::default(),
            room: RefCell::new(Vec::new()),
            request_timeout: t.request,
            progress: Cell::new(Instant::now()),
            tasks: RefCell::new(Vec::new()),
            retiring: Cell::new(false),
        });
        let w = tokio::task::spawn_local(connect(conn.clone(), t.clone()));
        conn.tasks.borrow_mut().push(w);
        conn
    }

    fn is_closed(&self) -> bool {
        self.state.borrow().closed.is_some()
    }

    /// Closes it now if nothing waits on it, else once the reader finds
    /// its queue empty (at its next idle tick).
    fn retire(&self) {
        if self.state.borrow().queue.is_empty() {
            self.fail(Error::ConnectionClosed(self.addr.clone()));
        } else {
            self.retiring.set(true);
        }
    }

    fn is_full(&self) -> bool {
        self.state.borrow().queue.len() >= QUEUE_MAX
    }

    /// Waits until the queue has room (or the connection closed).
    async fn room(&self) {
        std::future::poll_fn(|cx| {
            if !self.is_full() || self.is_closed() {
                return Poll::Ready(());
            }
            self.room.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await;
    }

    /// Appends the request `write` writes; its replies come in the
    /// returned [`Pending`].
    fn enqueue(&self, write: impl FnOnce(&mut BytesMut), expect: Expect) -> Result<Pending, Error> {
        let slot = Rc::new(Slot::default());
        {
            let mut s = self.state.borrow_mut();
            if s.closed.is_some() {
                return Err(Error::ConnectionClosed(self.addr.clone()));
            }
            let was_empty = s.out.is_empty();
            write(&mut s.out);
            s.appended += 1;
            s.queue.push_back(Waiting {
                expect,
                got: Vec::new(),
                done: 0,
                queued: Instant::now(),
                slot: slot.clone(),
            });
            if !was_empty {
                return Ok(Pending { slot });
            }
        }
        self.written.notify();
        Ok(Pending { slot })
    }

    /// Closes the connection: every request on it gets `err`.
    fn fail(&self, err: Error) {
        let drained = {
            let mut s = self.state.borrow_mut();
            if s.closed.is_some() {
                return;
            }
            s.closed = Some(err.clone());
            s.out.clear();
            std::mem::take(&mut s.queue)
        };
        if matches!(err, Error::Tls { .. } | Error::Auth { .. }) {
            // Nothing more is sent on it: its requests fail and count
            // towards marking the backend down, as for a failed connect.
            tracing::warn!(server = %self.addr, "backend connection refused: {err}");
        } else if !drained.is_empty() {
            tracing::debug!(server = %self.addr, %err, "connection closed");
        }
        for w in drained {
            w.slot.fill(Err(err.clone()));
        }
        for w in self.room.borrow_mut().drain(..) {
            w.wake();
        }
        for t in self.tasks.borrow_mut().drain(..) {
            t.abort();
        }
    }

    /// Gives `r` to the oldest waiting request; Err when it cannot be its.
    fn deliver(&self, r: Reply) -> Result<(), String> {
        let done = {
            let mut s = self.state.borrow_mut();
            let Some(w) = s.queue.front_mut() else {
                return Err(format!("a reply nobody asked for: {:?}", r.status));
            };
            match w.expect {
                // kura-client's rule (`take_reply`), the opaque read faster.
                Expect::Meta(op) => {
                    let token = r.opaque_token();
                    if r.status != Status::Error && token != Some(op) {
                        return Err(format!(
                            "reply with opaque {token:?} to the request with O{op}"
                        ));
                    }
                    w.got.push(r);
                }
                _ => {
                    if !take_reply(w.expect, &mut w.got, &mut w.done, r)? {
                        return Ok(());
                    }
                }
            }
            let was_full = s.queue.len() >= QUEUE_MAX;
            let w = s.queue.pop_front();
            (w, was_full)
        };
        if let (Some(w), was_full) = done {
            // The read that brought the reply set `progress`.
            let took = self.progress.get().saturating_duration_since(w.queued);
            w.slot.took.set(Some(took));
            w.slot.fill(Ok(w.got));
            if was_full {
                for w in self.room.borrow_mut().drain(..) {
                    w.wake();
                }
            }
        }
        Ok(())
    }

    /// Gives a run of `VALUE` entries ([`values::take`]) to the oldest
    /// waiting request, a text retrieval: one reply, `Status::Value` with
    /// the entries in `tokens` and no value (a text `VALUE` or counter
    /// reply always has one). It does not complete the retrieval: its
    /// `END` (or error line) does.
    fn deliver_values(&self, run: bytes::Bytes) -> Result<(), String> {
        let mut s = self.state.borrow_mut();
        match s.queue.front_mut() {
            Some(w) if matches!(w.expect, Expect::Text(_)) => {
                w.got.push(Reply {
                    status: Status::Value,
                    tokens: run,
                    value: None,
                    opaque: None,
                    flags: None,
                    cas: None,
                });
                Ok(())
            }
            _ => Err("a reply nobody asked for: Value".into()),
        }
    }

    /// How the oldest waiting request's replies are framed: text for a
    /// text command (the multi-gets of text clients), meta otherwise.
    /// memcached and kura take either kind of command on one connection.
    fn framing(&self) -> Protocol {
        match self.state.borrow().queue.front().map(|w| w.expect) {
            Some(Expect::Text(_)) => Protocol::Text,
            _ => Protocol::Meta,
        }
    }

    /// The deadline of the oldest waiting request, if any: its own, or a
    /// request timeout after the backend last sent something if later.
    fn oldest_deadline(&self) -> Option<Instant> {
        let heard = self.progress.get() + self.request_timeout;
        self.state
            .borrow()
            .queue
            .front()
            .map(|w| (w.queued + self.request_timeout).max(heard))
    }
}

fn io_error(addr: &str, e: std::io::Error) -> Error {
    // A TLS alert (the backend refused our certificate) is a TLS error.
    Error::io(addr, e)
}

/// Connects (TCP, then TLS and the login when configured), then starts
/// the reader and writes.
async fn connect(conn: Rc<Conn>, t: Timeouts) {
    let open = kura_client::raw::open(&conn.addr, &t.client);
    let stream = match crate::timer::timeout(t.connect, open).await {
        Some(Ok(s)) => s,
        Some(Err(e)) => return conn.fail(e),
        None => {
            return conn.fail(Error::ConnectTimeout {
                server: conn.addr.clone(),
                after: t.connect,
            })
        }
    };
    match stream {
        ClientStream::Plain(tcp) => {
            let (rd, wr) = tcp.into_split();
            start(conn, rd, wr).await;
        }
        tls @ ClientStream::Tls(_) => {
            let (rd, wr) = tokio::io::split(tls);
            start(conn, rd, wr).await;
        }
    }
}

/// Starts the reader on `rd`, then writes whatever was appended, all of
/// it in one write each time it is woken.
async fn start<R, W>(conn: Rc<Conn>, rd: R, wr: W)
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin,
{
    let r = tokio::task::spawn_local(reader(conn.clone(), rd));
    conn.tasks.borrow_mut().push(r);
    writer(conn, wr).await;
}

async fn writer<W: AsyncWrite + Unpin>(conn: Rc<Conn>, mut wr: W) {
    let mut buf = BytesMut::new();
    loop {
        {
            let mut s = conn.state.borrow_mut();
            if s.closed.is_some() {
                return;
            }
            // Swap buffers: the next round appends to the emptied one.
            std::mem::swap(&mut buf, &mut s.out);
            s.appended = 0;
        }
        if buf.is_empty() {
            conn.written.wait().await;
            // Woken after the clients the event loop found ready with the
            // first that appended. When several requests came, or a client
            // of this worker has none pending (it may send one any time),
            // let the clients the event loop finds ready next append too
            // before the write: a yield waits for its next look at the
            // sockets. A request alone while every client waits for a
            // reply is written at once: no one else can send, and yielding
            // would only cost it that look and a turn of the loop.
            if conn.state.borrow().appended > 1 || crate::idle::any() {
                tokio::task::yield_now().await;
            }
            continue;
        }
        // A TLS session's records may wait in it until flushed.
        if let Err(e) = async {
            wr.write_all(&buf).await?;
            wr.flush().await
        }
        .await
        {
            return conn.fail(io_error(&conn.addr, e));
        }
        buf.clear();
    }
}

/// Frames replies and hands each to its request; fails the connection
/// on EOF, an error, a reply that is no request's, or when the oldest
/// request is past its deadline.
async fn reader<R: AsyncRead + Unpin>(conn: Rc<Conn>, mut rd: R) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    // Bytes of `VALUE` entries at the front already looked at (kura_proto::client::values).
    let mut scanned = 0;
    let idle = conn.request_timeout;
    // On the timer thread (`timer.rs`): armed at the oldest request's
    // deadline, moved at most once per request timeout.
    let timer = crate::timer::sleep(idle);
    tokio::pin!(timer);
    loop {
        tokio::select! {
            biased;
            read = rd.read_buf(&mut buf) => {
                match read {
                    Ok(0) => {
                        let e = if buf.is_empty() {
                            Error::ConnectionClosed(conn.addr.clone())
                        } else {
                            protocol_error(&conn.addr, "connection closed inside a reply")
                        };
                        return conn.fail(e);
                    }
                    Ok(_) => conn.progress.set(Instant::now()),
                    Err(e) => return conn.fail(io_error(&conn.addr, e)),
                }
                loop {
                    let framing = conn.framing();
                    if framing == Protocol::Text {
                        // A retrieval's hits, taken as one run.
                        if let Some(run) = values::take(&mut buf, &mut scanned) {
                            if let Err(what) = conn.deliver_values(run) {
                                return conn.fail(protocol_error(&conn.addr, what));
                            }
                            continue;
                        }
                        if scanned > 0 {
                            break;
                        }
                    }
                    match frame(framing, &mut buf) {
                        Ok(Some(r)) => {
                            if let Err(what) = conn.deliver(r) {
                                return conn.fail(protocol_error(&conn.addr, what));
                            }
                        }
                        Ok(None) => break,
                        Err(what) => return conn.fail(protocol_error(&conn.addr, what)),
                    }
                }
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(64 * 1024);
                }
            }
            () = &mut timer => {
                let now = Instant::now();
                match conn.oldest_deadline() {
                    Some(d) if d <= now => {
                        return conn.fail(Error::Timeout {
                            server: conn.addr.clone(),
                            after: conn.request_timeout,
                        });
                    }
                    // Deadlines only grow along the queue, and so does
                    // the backend's progress: the oldest's is the next
                    // that can pass.
                    Some(d) => timer.set(crate::timer::sleep_until(d)),
                    None if conn.retiring.get() => {
                        return conn.fail(Error::ConnectionClosed(conn.addr.clone()));
                    }
                    None => timer.set(crate::timer::sleep_until(now + idle)),
                }
            }
        }
    }
}

fn protocol_error(addr: &str, what: impl Into<String>) -> Error {
    Error::Protocol {
        server: addr.to_string(),
        what: what.into(),
    }
}

#[cfg(test)]
mod tests;
