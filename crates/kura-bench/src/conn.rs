//! One connection of the load: a writer task that sends requests (in
//! batches, one write each) and a reader that frames the replies against
//! the queue of pending requests, times and checks them.
//!
//! Closed loop: at most `window` requests wait for a reply; the writer
//! takes a permit per request and the reader gives it back. Open loop:
//! request `k` is due at `start + offset + k * interval` and its latency
//! counts from then, not from when it went out, so a server that stalls
//! the generator is charged for the requests that could not be sent
//! (no coordinated omission). Quiet sets take no permit and get no queue
//! entry; the run ends with a no-op whose reply proves they were processed.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{self, error::TryRecvError, UnboundedReceiver, UnboundedSender};
use tokio::sync::{Semaphore, TryAcquireError};

use crate::args::Protocol;
use crate::load::OpSource;
use crate::pacer::Pacer;
use crate::proto::{self, Failure, Op, Outcome, Parsed, Pending, Verifier};
use crate::stats::Tally;

/// Requests sent in one write at most, in bytes (a batch may end past it
/// by one request).
const BATCH_BYTES: usize = 64 * 1024;
/// Requests in flight per connection at most in the open loop.
pub const OPEN_LOOP_WINDOW: usize = 10_000;
/// Completions counted locally before the progress counter is updated.
const PROGRESS_STEP: u64 = 256;

/// Where the server listens.
#[derive(Debug, Clone)]
pub enum Target {
    Tcp(String),
    Unix(PathBuf),
}

impl Target {
    /// A path (anything with a `/`) is a Unix socket, the rest `host:port`.
    pub fn parse(s: &str) -> Target {
        if s.contains('/') {
            Target::Unix(PathBuf::from(s))
        } else {
            Target::Tcp(s.to_string())
        }
    }

    /// Opens a connection.
    ///
    /// # Errors
    /// If the server cannot be reached.
    pub async fn connect(&self) -> io::Result<Stream> {
        match self {
            Target::Tcp(addr) => {
                let s = tokio::net::TcpStream::connect(addr.as_str()).await?;
                s.set_nodelay(true)?;
                Ok(Stream::Tcp(s))
            }
            Target::Unix(path) => Ok(Stream::Unix(tokio::net::UnixStream::connect(path).await?)),
        }
    }
}

/// An open connection.
pub enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

impl Stream {
    fn split(self) -> (Reader, Writer) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.into_split();
                (Box::new(r), Box::new(w))
            }
        }
    }
}

/// How a connection paces its requests.
#[derive(Debug, Clone, Copy)]
pub enum Pacing {
    /// Up to `window` requests in flight, until `deadline` if any.
    Closed {
        window: usize,
        deadline: Option<Instant>,
    },
    /// Request `k` due at `start + offset + k * interval`, none due at or
    /// after `end`.
    Open {
        start: Instant,
        offset: Duration,
        interval: Duration,
        end: Option<Instant>,
    },
}

impl Pacing {
    fn window(&self) -> usize {
        match self {
            Pacing::Closed { window, .. } => *window,
            Pacing::Open { .. } => OPEN_LOOP_WINDOW,
        }
    }

    /// When request `k` is due (open loop).
    fn due(&self, k: u64) -> Option<Instant> {
        match self {
            Pacing::Closed { .. } => None,
            Pacing::Open {
                start,
                offset,
                interval,
                ..
            } => Some(*start + *offset + interval.mul_f64(k as f64)),
        }
    }

    /// True when no request may be sent any more (`due`: the next one's time).
    fn over(&self, now: Instant, due: Option<Instant>) -> bool {
        match self {
            Pacing::Closed { deadline, .. } => deadline.is_some_and(|d| now >= d),
            Pacing::Open { end, .. } => matches!((due, end), (Some(d), Some(e)) if d >= *e),
        }
    }
}

/// What every connection of a run shares.
pub struct Wire {
    pub proto: Protocol,
    pub verifier: Verifier,
    /// Requests completed so far, over all connections (for the progress bar).
    pub progress: Arc<AtomicU64>,
}

/// Runs one connection's load to the end and returns what it counted.
pub async fn drive(stream: Stream, source: OpSource, pacing: Pacing, wire: Arc<Wire>) -> Tally {
    let (reader, writer) = stream.split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let window = Arc::new(Semaphore::new(pacing.window()));
    let quiet_sent = Arc::new(AtomicU64::new(0));
    let sender = tokio::spawn(send(
        writer,
        source,
        pacing,
        Arc::clone(&wire),
        tx,
        Arc::clone(&window),
        Arc::clone(&quiet_sent),
    ));
    let mut tally = Tally::default();
    let read = receive(reader, &mut rx, &window, &wire, &mut tally).await;
    if let Err(e) = &read {
        window.close();
        sender.abort();
        rx.close();
        while let Ok(p) = rx.try_recv() {
            if p.op != Op::Sync {
                tally.requests += 1;
                tally.lost += 1;
            }
        }
        tally.connection_errors += 1;
        tally.sample_error(|| e.clone());
    }
    match sender.await {
        Ok(Err(e)) if read.is_ok() => {
            tally.connection_errors += 1;
            tally.sample_error(|| format!("write failed: {e}"));
        }
        _ => {}
    }
    let quiet = quiet_sent.load(Ordering::Relaxed);
    tally.requests += quiet;
    tally.sets += quiet;
    tally
}

/// The writer: requests from `source`, as `pacing` allows, then a no-op.
async fn send(
    mut w: Writer,
    mut source: OpSource,
    pacing: Pacing,
    wire: Arc<Wire>,
    tx: UnboundedSender<Pending>,
    window: Arc<Semaphore>,
    quiet_sent: Arc<AtomicU64>,
) -> io::Result<()> {
    let keys = &wire.verifier.keys;
    let mut pacer = match pacing {
        Pacing::Open { .. } => Some(Pacer::new()?),
        Pacing::Closed { .. } => None,
    };
    let mut out = Vec::with_capacity(BATCH_BYTES + 4096);
    let mut seq: u32 = 0;
    let mut k: u64 = 0;
    let mut held: Option<Op> = None;
    let mut done = false;
    while !done {
        out.clear();
        let mut quiet = 0;
        if let (Some(p), Some(due)) = (&mut pacer, pacing.due(k)) {
            if pacing.over(due, Some(due)) {
                break;
            }
            p.sleep_until(due).await?;
        }
        loop {
            let now = Instant::now();
            let due = pacing.due(k);
            if pacing.over(now, due) {
                done = true;
                break;
            }
            if due.is_some_and(|d| d > now) {
                break;
            }
            let Some(op) = held.take().or_else(|| source.next_op()) else {
                done = true;
                break;
            };
            if op.expects_reply() {
                match window.try_acquire() {
                    Ok(permit) => permit.forget(),
                    Err(TryAcquireError::NoPermits) if out.is_empty() => {
                        match window.acquire().await {
                            Ok(permit) => permit.forget(),
                            Err(_) => return Ok(()),
                        }
                    }
                    Err(TryAcquireError::NoPermits) => {
                        held = Some(op);
                        break;
                    }
                    Err(TryAcquireError::Closed) => return Ok(()),
                }
            }
            seq = seq.wrapping_add(1);
            proto::encode(wire.proto, &op, seq, keys, &mut out);
            k += 1;
            if op.expects_reply() {
                let sent = due.unwrap_or_else(Instant::now);
                if tx.send(Pending { op, seq, sent }).is_err() {
                    return Ok(());
                }
            } else {
                quiet += 1;
            }
            if out.len() >= BATCH_BYTES {
                break;
            }
        }
        if !out.is_empty() {
            w.write_all(&out).await?;
        }
        if quiet > 0 {
            quiet_sent.fetch_add(quiet, Ordering::Relaxed);
            wire.progress.fetch_add(quiet, Ordering::Relaxed);
        }
    }
    out.clear();
    seq = seq.wrapping_add(1);
    proto::encode(wire.proto, &Op::Sync, seq, keys, &mut out);
    let sync = Pending {
        op: Op::Sync,
        seq,
        sent: Instant::now(),
    };
    if tx.send(sync).is_ok() {
        w.write_all(&out).await?;
    }
    w.flush().await
}

/// The reader: frames and judges replies until the writer is done and
/// every request it sent is answered. `Err` when the connection fails.
async fn receive(
    mut r: Reader,
    rx: &mut UnboundedReceiver<Pending>,
    window: &Semaphore,
    wire: &Wire,
    tally: &mut Tally,
) -> Result<(), String> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut current: Option<Pending> = None;
    let mut unreported = 0;
    let result = loop {
        if current.is_none() {
            match rx.try_recv() {
                Ok(p) => current = Some(p),
                Err(TryRecvError::Disconnected) if buf.is_empty() => break Ok(()),
                Err(_) => {}
            }
        }
        match proto::parse(wire.proto, &buf, current.as_ref(), &wire.verifier) {
            Parsed::Reply { used, outcome } => {
                buf.advance(used);
                if let Some(p) = current.take() {
                    if p.op != Op::Sync {
                        window.add_permits(1);
                        unreported += 1;
                    }
                    account(tally, p, outcome);
                }
                if unreported >= PROGRESS_STEP {
                    wire.progress.fetch_add(unreported, Ordering::Relaxed);
                    unreported = 0;
                }
            }
            Parsed::QuietFailure { used, what } => {
                buf.advance(used);
                tally.quiet_failures += 1;
                tally.sample_error(|| format!("quiet set failed: {what}"));
            }
            Parsed::Garbage(what) => break Err(format!("unframeable reply: {what}")),
            Parsed::Incomplete if current.is_some() => match r.read_buf(&mut buf).await {
                Ok(0) => break Err("the server closed the connection".into()),
                Ok(_) => {}
                Err(e) => break Err(format!("read failed: {e}")),
            },
            Parsed::Incomplete => {
                tokio::select! {
                    biased;
                    next = rx.recv() => match next {
                        Some(p) => current = Some(p),
                        None => break Err("bytes after the last reply".into()),
                    },
                    read = r.read_buf(&mut buf) => match read {
                        Ok(0) => break Err("the server closed the connection".into()),
                        Ok(_) => {}
                        Err(e) => break Err(format!("read failed: {e}")),
                    },
                }
            }
        }
    };
    wire.progress.fetch_add(unreported, Ordering::Relaxed);
    if result.is_err() {
        if let Some(p) = current {
            if p.op != Op::Sync {
                tally.requests += 1;
                tally.lost += 1;
            }
        }
    }
    result
}

/// Counts one answered request.
fn account(tally: &mut Tally, p: Pending, outcome: Outcome) {
    let now = Instant::now();
    tally.last_reply = Some(now);
    match p.op {
        Op::Sync => return,
        Op::Get(_) | Op::MultiGet(_) => {
            tally.gets += 1;
            tally.hits += u64::from(outcome.hits);
            tally.misses += u64::from(outcome.misses);
        }
        Op::Set { .. } => tally.sets += 1,
    }
    tally.requests += 1;
    tally.record_latency(now.saturating_duration_since(p.sent));
    match outcome.failure {
        None => {}
        Some(Failure::WrongValue(what)) => {
            tally.wrong_values += 1;
            tally.sample_error(|| format!("wrong value: {what}"));
        }
        Some(Failure::Server(what)) => {
            tally.server_errors += 1;
            tally.sample_error(|| format!("server error: {what}"));
        }
    }
}
