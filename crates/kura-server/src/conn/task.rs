//! The task loop of one connection (`serve` in mod.rs): a tokio task
//! that reads, frames and runs what is buffered, writes the replies, and
//! waits where a connection of the readiness loop cannot: for a client
//! that does not read, room in the value budget, the durable log's
//! acknowledgement, replicas' acknowledgements, the idle timeout, the stop.
//! `run` is the loop; `TaskConn` holds the connection between reads and
//! carries out each part: resuming, reading, a batch of requests, what a
//! write waits for.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kura_keyspace::{Keyspace, Replicated, Ticket};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::io::poll_read_buf;

use super::park::{parks, unpark};
use super::step::{configured_wire, step_one, wire_of};
use super::{End, PlainTcp, Resume, Wire, KEEP_CAPACITY, READ_CHUNK};
use crate::budget::Room;
use crate::exec::{Next, Session, Step};
use crate::latency::{now_ns, Family};
use crate::metrics::{add, incr, ConnGuard, ConnState, ThreadStats};
use crate::output::{Output, HIGH_WATER};
use crate::shared::Shared;
use crate::stop::StopSignal;

pub(super) async fn run<S>(
    stream: &mut S,
    shared: &Shared,
    stats: &ThreadStats,
    stop: &Rc<StopSignal>,
    conn: &ConnGuard,
    resume: Option<Resume>,
) -> End
where
    S: AsyncRead + AsyncWrite + Unpin + PlainTcp,
{
    // One wait for the worker's stop signal for the connection's whole
    // life, polled beside every read and write (stop.rs).
    let stop = stop.stopped();
    tokio::pin!(stop);
    let mut c = TaskConn::new(shared, stats, conn);
    if let Some(r) = resume {
        if let Err(end) = c.resume(r, stream, stop.as_mut()).await {
            return end;
        }
    }
    loop {
        // A buffer grown for a large frame already has room for the rest.
        if c.rbuf.capacity() - c.rbuf.len() < READ_CHUNK / 4 && !c.room.holds() {
            c.rbuf.reserve(READ_CHUNK);
        }
        conn.info.set_state(ConnState::Waiting);
        let n = if std::mem::take(&mut c.buffered) {
            0
        } else {
            match c.read(stream, stop.as_mut()).await {
                Ok(Some(n)) => n,
                Ok(None) => continue,
                Err(end) => return end,
            }
        };
        if let Err(end) = c.batch(stream, stop.as_mut(), n).await {
            return end;
        }
    }
}

/// A connection served by its task, between two reads.
struct TaskConn<'a> {
    shared: &'a Shared,
    keyspace: &'a Keyspace,
    stats: &'a ThreadStats,
    conn: &'a ConnGuard,
    session: Session<'a>,
    rbuf: BytesMut,
    /// Payload bytes still to drop (a value too large).
    swallow: usize,
    wire: Option<Wire>,
    /// Frames already read (a connection moved here from the worker's
    /// readiness loop, or the requests after a dump) are run before the
    /// next read.
    buffered: bool,
    /// Room for the large frame at the front of `rbuf`, if any.
    room: Room<'a>,
    no_room: kura_proto::Limits,
    idle: Option<Duration>,
    per_event: usize,
    /// With `--data-dir`, the ticket of the last record this connection's
    /// requests made: replies wait until it is on disk (`--fsync always`),
    /// or written when the log has fallen behind (kura-keyspace's
    /// durable/lag.rs).
    durable: bool,
    unsettled: Ticket,
    /// With `--min-replicas-ack`, each write waits for its replicas.
    min_acks: usize,
    /// The request at the front waited for reads from flash: its values
    /// are let go once it has run.
    unparked: bool,
}

/// How the requests of a batch ended.
struct Ran {
    /// The connection ends once the replies are written.
    end: Option<End>,
    /// The read buffer grew for a large frame that is done.
    shrink: bool,
}

impl<'a> TaskConn<'a> {
    fn new(shared: &'a Shared, stats: &'a ThreadStats, conn: &'a ConnGuard) -> Self {
        let mut session = Session::new(shared, stats);
        session.cfd = conn.id() as i64;
        session.park = parks(shared);
        let keyspace = &*shared.keyspace;
        TaskConn {
            shared,
            keyspace,
            stats,
            conn,
            session,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            swallow: 0,
            wire: configured_wire(shared),
            buffered: false,
            room: Room::new(&shared.values),
            no_room: kura_proto::Limits {
                item_size_max: 0,
                ..shared.limits
            },
            idle: match shared.config.idle_timeout {
                0 => None,
                s => Some(Duration::from_secs(s)),
            },
            per_event: shared.config.reqs_per_event.max(1) as usize,
            durable: keyspace.durable().is_some(),
            unsettled: Ticket::NONE,
            min_acks: shared.config.min_replicas_ack as usize,
            unparked: false,
        }
    }

    /// Takes over a connection from the worker's readiness loop: writes
    /// what it left, ends it or carries its dump or watch if it asked, or
    /// waits for the reads from flash its next request started.
    async fn resume<S, F>(
        &mut self,
        r: Resume,
        stream: &mut S,
        mut stop: Pin<&mut F>,
    ) -> Result<(), End>
    where
        S: AsyncRead + AsyncWrite + Unpin + PlainTcp,
        F: Future<Output = ()>,
    {
        self.session = r.session.attach(self.shared, self.stats);
        self.session.park = parks(self.shared);
        self.rbuf = r.rbuf;
        self.swallow = r.swallow;
        self.wire = r.wire;
        self.buffered = !self.rbuf.is_empty();
        self.reply_then(stream, stop.as_mut(), r.then).await?;
        if self.session.is_parked() {
            unpark(&mut self.session, stop).await?;
            self.unparked = true;
        }
        Ok(())
    }

    /// Writes the replies so far; then ends the connection (`end`), or
    /// carries out the dump or watch a request asked for (true).
    async fn reply_then<S, F>(
        &mut self,
        stream: &mut S,
        mut stop: Pin<&mut F>,
        end: Option<End>,
    ) -> Result<bool, End>
    where
        S: AsyncRead + AsyncWrite + Unpin + PlainTcp,
        F: Future<Output = ()>,
    {
        let (shared, conn) = (self.shared, self.conn);
        if !flush(stream, &mut self.session, stop.as_mut(), conn).await {
            return Err(End::Io);
        }
        if let Some(end) = end {
            return Err(finish(end, stream, shared, &mut self.session, conn).await);
        }
        let Some(job) = self.session.stream.take() else {
            return Ok(false);
        };
        super::stream::run(*job, stream, &mut self.session, stop, conn).await?;
        Ok(true)
    }

    /// Reads what the client sent: the bytes read, `None` when there is
    /// nothing to run (invalidations were sent instead), or how the
    /// connection ends.
    async fn read<S, F>(
        &mut self,
        stream: &mut S,
        mut stop: Pin<&mut F>,
    ) -> Result<Option<usize>, End>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        F: Future<Output = ()>,
    {
        let rbuf = &mut self.rbuf;
        let read = match self.session.tracking.as_ref().map(|t| t.subscriber()) {
            // The common case, no idle timer and no invalidations to send,
            // in one poll function rather than a select over futures (some
            // 150 instructions a request less).
            None if self.idle.is_none() => {
                let read = std::future::poll_fn(|cx| {
                    if stop.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(None);
                    }
                    poll_read_buf(Pin::new(&mut *stream), cx, rbuf).map(Some)
                });
                match read.await {
                    Some(r) => Some(r),
                    None => return Err(End::Stopping),
                }
            }
            None => tokio::select! {
                biased;
                _ = stop.as_mut() => return Err(End::Stopping),
                r = read_some(stream, rbuf, self.idle) => r,
            },
            // A tracking connection also wakes for invalidations to send.
            Some(sub) => tokio::select! {
                biased;
                _ = stop.as_mut() => return Err(End::Stopping),
                () = sub.notify.notified() => {
                    if let Some(t) = self.session.tracking.as_mut() {
                        t.drain(&mut self.session.out);
                    }
                    if !flush(stream, &mut self.session, stop, self.conn).await {
                        return Err(End::Io);
                    }
                    return Ok(None);
                }
                r = read_some(stream, rbuf, self.idle) => r,
            },
        };
        match read {
            None => {
                incr(&self.stats.idle_kicks);
                Err(End::Idle)
            }
            Some(Ok(0)) => Err(End::Eof),
            Some(Ok(n)) => Ok(Some(n)),
            Some(Err(_)) => Err(End::Io),
        }
    }

    /// Runs what `n` new bytes completed, writes the replies, and carries
    /// out what the requests asked for after them.
    async fn batch<S, F>(
        &mut self,
        stream: &mut S,
        mut stop: Pin<&mut F>,
        n: usize,
    ) -> Result<(), End>
    where
        S: AsyncRead + AsyncWrite + Unpin + PlainTcp,
        F: Future<Output = ()>,
    {
        let (shared, stats, conn) = (self.shared, self.stats, self.conn);
        add(&stats.bytes_read, n as u64);
        // Under -B auto the first byte decides, once per connection.
        let wire = *self.wire.get_or_insert_with(|| wire_of(self.rbuf.first()));
        if self.swallow > 0 {
            let k = self.swallow.min(self.rbuf.len());
            self.rbuf.advance(k);
            self.swallow -= k;
            if self.swallow > 0 {
                conn.info.set_state(ConnState::Swallow);
                return Ok(());
            }
        }
        conn.info.set_state(ConnState::ParseCmd);
        self.session.now = shared.store.now();
        conn.info.set_last_cmd(self.session.now);
        let ran = self.frames(stream, stop.as_mut(), wire).await?;
        if ran.shrink {
            // The buffer grew for a large frame that is done: its memory
            // goes back with the room.
            self.rbuf = BytesMut::from(&self.rbuf[..]);
        }
        if !self.unsettled.is_none() && !settled(self.keyspace, &mut self.unsettled).await {
            return Err(End::Io);
        }
        // Invalidations go between replies: after every reply of the batch.
        if let Some(t) = self.session.tracking.as_mut() {
            t.drain(&mut self.session.out);
        }
        if self.reply_then(stream, stop, ran.end).await? {
            // The requests after it, already read, are run next.
            self.buffered = !self.rbuf.is_empty();
        }
        if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_CAPACITY {
            self.rbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        if self.session.out.capacity() > KEEP_CAPACITY * 4 {
            self.session.out = Output::with_capacity(READ_CHUNK);
        }
        Ok(())
    }

    /// Runs every complete frame in the read buffer (replies written early
    /// past the high-water mark, the loop yielding every `-R` requests).
    async fn frames<S, F>(
        &mut self,
        stream: &mut S,
        mut stop: Pin<&mut F>,
        wire: Wire,
    ) -> Result<Ran, End>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        F: Future<Output = ()>,
    {
        let (shared, stats, conn) = (self.shared, self.stats, self.conn);
        let mut pos = 0;
        let mut served = 0;
        let mut ran = Ran {
            end: None,
            shrink: false,
        };
        // Each request's time runs from here or from the previous one's end.
        let mut clock = now_ns();
        while pos < self.rbuf.len() {
            // A request refused for lack of room is framed as if its value
            // were too large: answered at once, its value skipped.
            let refusing = self.session.no_room;
            let limits = if refusing {
                &self.no_room
            } else {
                &shared.limits
            };
            let mark = self.session.out.mark();
            let (step, family) = step_one(
                &mut self.session,
                wire,
                &self.rbuf[pos..],
                limits,
                &conn.info.addr,
            );
            self.session.no_room = false;
            if self.unparked && !matches!(step, Step::Parked) {
                // It ran on the values read: they are done with (unless it
                // stopped again, at a later key on flash).
                self.session.parked_done();
                self.unparked = false;
            }
            let (len, next) = match step {
                Step::More { needed } => {
                    let have = self.rbuf.len() - pos;
                    if needed > have && !refusing && !self.room.try_cover(needed) {
                        // Send what is done before waiting for room.
                        self.write_out(stream, stop.as_mut()).await?;
                        let covered = self.room.wait_cover(needed).await;
                        clock = now_ns();
                        if !covered {
                            self.session.no_room = true;
                            continue;
                        }
                    }
                    if needed > have {
                        self.rbuf.reserve(needed - have);
                    }
                    break;
                }
                Step::Garbage => {
                    ran.end = Some(End::Garbage);
                    break;
                }
                Step::Parked => {
                    // The replies before it go out; then it runs again,
                    // with the values read.
                    self.write_out(stream, stop.as_mut()).await?;
                    self.conn.info.set_state(ConnState::Waiting);
                    unpark(&mut self.session, stop.as_mut()).await?;
                    self.unparked = true;
                    continue;
                }
                Step::Done { len, next } => {
                    ran.shrink |= self.room.release();
                    clock = stats.latency.record_since(family, clock);
                    (len, next)
                }
            };
            self.wrote(wire, family, mark).await?;
            pos += len;
            match next {
                Next::Continue => {}
                Next::Swallow(n) => {
                    let k = n.min(self.rbuf.len() - pos);
                    pos += k;
                    self.swallow = n - k;
                }
                Next::Close => {
                    ran.end = Some(End::Quit);
                    break;
                }
                Next::Replicate => {
                    ran.end = Some(End::Replicate);
                    break;
                }
                // Carried out below, once the replies before it are written.
                Next::Stream => break,
            }
            served += 1;
            if self.session.out.pending() > HIGH_WATER {
                self.write_out(stream, stop.as_mut()).await?;
                clock = now_ns();
            }
            if served % self.per_event == 0 {
                incr(&stats.conn_yields);
                tokio::task::yield_now().await;
                clock = now_ns();
            }
        }
        self.rbuf.advance(pos.min(self.rbuf.len()));
        Ok(ran)
    }

    /// After a request: with `--min-replicas-ack`, a write is acknowledged
    /// once its replicas have it (its reply, since `mark`, waits, or is
    /// taken back for an error); with `--data-dir`, its record is noted for
    /// the batch's replies to wait for.
    async fn wrote(&mut self, wire: Wire, family: Family, mark: (usize, usize)) -> Result<(), End> {
        if self.min_acks > 0 {
            let ticket = self.keyspace.take_ticket(&self.session.report);
            let text = matches!(wire, Wire::Text);
            // Meta's quiet mode still hears errors; classic noreply not.
            let meta = matches!(
                family,
                Family::MetaGet | Family::MetaSet | Family::MetaDelete | Family::MetaArith
            );
            let out = &mut self.session.out;
            if !ticket.is_none()
                && !acknowledged(self.shared, ticket, out, mark, (text, meta)).await
            {
                return Err(End::Io);
            }
        } else if self.durable {
            let ticket = self.keyspace.take_ticket(&self.session.report);
            self.unsettled = self.unsettled.max(ticket);
        }
        Ok(())
    }

    /// Writes the replies so far, once the records they made are settled.
    async fn write_out<S, F>(&mut self, stream: &mut S, stop: Pin<&mut F>) -> Result<(), End>
    where
        S: AsyncWrite + Unpin,
        F: Future<Output = ()>,
    {
        if !self.unsettled.is_none() && !settled(self.keyspace, &mut self.unsettled).await {
            return Err(End::Io);
        }
        if !flush(stream, &mut self.session, stop, self.conn).await {
            return Err(End::Io);
        }
        Ok(())
    }
}

/// Ends a connection whose replies are written: a replica's `replicate`
/// request turns it into a replication stream first.
async fn finish<S>(
    end: End,
    stream: &mut S,
    shared: &Shared,
    session: &mut Session<'_>,
    conn: &ConnGuard,
) -> End
where
    S: AsyncRead + AsyncWrite + Unpin + PlainTcp,
{
    if end == End::Replicate {
        if let Some((history, after)) = session.replicate.take() {
            let direct = stream.plain_tcp();
            let peer = &conn.info.addr;
            (shared.keyspace)
                .serve_replica(stream, direct, peer, &history, after)
                .await;
        }
    }
    end
}

/// Reads what the client sent into `rbuf`; `None` if nothing came within
/// the idle timeout. A worker whose connections time out when idle has a
/// time driver of its own (timer.rs): a timer at every read is cheap there.
async fn read_some<S: AsyncRead + Unpin>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    idle: Option<Duration>,
) -> Option<std::io::Result<usize>> {
    match idle {
        Some(d) => tokio::time::timeout(d, stream.read_buf(rbuf)).await.ok(),
        None => Some(stream.read_buf(rbuf).await),
    }
}

/// Waits until the records this connection made are logged as the fsync
/// policy and the log's bounds ask; false if they never will be (the log
/// failed): the connection then closes without acknowledging them.
/// With `--min-replicas-ack`: waits until `ticket` (the last record a
/// request made) is in the log and acknowledged by enough replicas; on a timeout the
/// request's reply (since `mark`) becomes an error, or, for a classic
/// request that had none (noreply), stays none (meta's quiet mode hears it); a binary request's connection is closed
/// (its reply cannot be taken back into a status). False when the
/// connection is to be closed.
async fn acknowledged(
    shared: &Shared,
    ticket: Ticket,
    out: &mut Output,
    mark: (usize, usize),
    (text, meta): (bool, bool),
) -> bool {
    match shared.keyspace.replicated(ticket).await {
        Replicated::Acknowledged => return true,
        Replicated::LogFailed => return false,
        Replicated::TimedOut => {}
    }
    let n = shared.config.min_replicas_ack;
    let timeout = Duration::from_millis(shared.config.min_replicas_timeout_ms);
    if !text {
        return false;
    }
    if out.mark() != mark || meta {
        out.truncate(mark);
        out.extend_from_slice(
            format!(
                "SERVER_ERROR not acknowledged by {n} replicas within {} ms (applied here)\r\n",
                timeout.as_millis()
            )
            .as_bytes(),
        );
    }
    true
}

/// Waits until the records this connection made (up to `unsettled`) are
/// settled in the log; false if the log failed. Callers test
/// `unsettled.is_none()` first: entering an async fn costs even with
/// nothing to do.
async fn settled(keyspace: &Keyspace, unsettled: &mut Ticket) -> bool {
    keyspace.settle(unsettled.take()).await
}

/// Writes out pending replies; false if the connection is gone or the
/// server stopped (`stop` finished) while the client was not reading.
/// What the requests before it appended to the replication journal goes
/// first, so that a client that does not read holds back no replica.
pub(super) async fn flush<S, F>(
    stream: &mut S,
    session: &mut Session<'_>,
    stop: std::pin::Pin<&mut F>,
    conn: &ConnGuard,
) -> bool
where
    S: AsyncWrite + Unpin,
    F: std::future::Future<Output = ()>,
{
    session.keyspace.batch_done(&session.report);
    let (out, stats) = (&mut session.out, session.stats);
    if out.is_empty() {
        return true;
    }
    conn.info.set_state(ConnState::Write);
    let ok = tokio::select! {
        biased;
        r = out.write_to(stream) => r.is_ok(),
        _ = stop => false,
    };
    add(&stats.bytes_written, out.pending() as u64);
    out.clear();
    ok
}
