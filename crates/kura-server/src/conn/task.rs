//! The task loop of one connection (`serve` in mod.rs): a tokio task
//! that reads, frames and runs what is buffered, writes the replies, and
//! waits where a connection of the readiness loop cannot: for a client
//! that does not read, room in the value budget, the durable log's
//! acknowledgement, replicas' acknowledgements, the idle timeout, the stop.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::io::poll_read_buf;

use super::step::{configured_wire, step_one, wire_of};
use super::{End, PlainTcp, Resume, Wire, KEEP_CAPACITY, READ_CHUNK};
use kura_keyspace::{Keyspace, Replicated, Ticket};

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
    let mut session = Session::new(shared, stats);
    session.cfd = conn.id() as i64;
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut swallow = 0usize;
    let mut wire = configured_wire(shared);
    // Frames already read (a connection moved here from the worker's
    // readiness loop) are run before the next read.
    let mut buffered = false;
    if let Some(r) = resume {
        session = r.session.attach(shared, stats);
        rbuf = r.rbuf;
        swallow = r.swallow;
        wire = r.wire;
        buffered = !rbuf.is_empty();
        if !flush(shared, stream, &mut session.out, stats, stop.as_mut(), conn).await {
            return End::Io;
        }
        if let Some(end) = r.then {
            return finish(end, stream, shared, &mut session, conn).await;
        }
        if let Some(job) = session.stream.take() {
            if let Err(end) =
                super::stream::run(*job, stream, &mut session, stop.as_mut(), conn).await
            {
                return end;
            }
        }
    }
    // Room for the large frame at the front of `rbuf`, if any.
    let mut room = Room::new(&shared.values);
    let no_room = kura_proto::Limits {
        item_size_max: 0,
        ..shared.limits
    };
    let idle = match shared.config.idle_timeout {
        0 => None,
        s => Some(Duration::from_secs(s)),
    };
    let per_event = shared.config.reqs_per_event.max(1) as usize;
    // With `--data-dir`, the ticket of the last record this connection's
    // requests made: replies wait until it is on disk (`--fsync always`),
    // or written when the log has fallen behind (kura-keyspace's
    // durable/lag.rs).
    let keyspace = &*shared.keyspace;
    let durable = keyspace.durable().is_some();
    let mut unsettled = Ticket::NONE;
    // With `--min-replicas-ack`, each write waits for its replicas.
    let min_acks = shared.config.min_replicas_ack as usize;
    loop {
        // A buffer grown for a large frame already has room for the rest.
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 && !room.holds() {
            rbuf.reserve(READ_CHUNK);
        }
        conn.info.set_state(ConnState::Waiting);
        let n = if std::mem::take(&mut buffered) {
            0
        } else {
            let read = match session.tracking.as_ref().map(|t| t.subscriber()) {
                // The common case, no idle timer and no invalidations to send,
                // in one poll function rather than a select over futures (some
                // 150 instructions a request less).
                None if idle.is_none() => {
                    let read = std::future::poll_fn(|cx| {
                        if stop.as_mut().poll(cx).is_ready() {
                            return Poll::Ready(None);
                        }
                        poll_read_buf(Pin::new(&mut *stream), cx, &mut rbuf).map(Some)
                    });
                    match read.await {
                        Some(r) => Some(r),
                        None => return End::Stopping,
                    }
                }
                None => tokio::select! {
                    biased;
                    _ = &mut stop => return End::Stopping,
                    r = read_some(stream, &mut rbuf, idle) => r,
                },
                // A tracking connection also wakes for invalidations to send.
                Some(sub) => tokio::select! {
                    biased;
                    _ = &mut stop => return End::Stopping,
                    () = sub.notify.notified() => {
                        if let Some(t) = session.tracking.as_mut() {
                            t.drain(&mut session.out);
                        }
                        if !flush(shared, stream, &mut session.out, stats, stop.as_mut(), conn).await {
                            return End::Io;
                        }
                        continue;
                    }
                    r = read_some(stream, &mut rbuf, idle) => r,
                },
            };
            match read {
                None => {
                    incr(&stats.idle_kicks);
                    return End::Idle;
                }
                Some(Ok(0)) => return End::Eof,
                Some(Ok(n)) => n,
                Some(Err(_)) => return End::Io,
            }
        };
        add(&stats.bytes_read, n as u64);
        // Under -B auto the first byte decides, once per connection.
        let wire = *wire.get_or_insert_with(|| wire_of(rbuf.first()));
        if swallow > 0 {
            let k = swallow.min(rbuf.len());
            rbuf.advance(k);
            swallow -= k;
            if swallow > 0 {
                conn.info.set_state(ConnState::Swallow);
                continue;
            }
        }
        conn.info.set_state(ConnState::ParseCmd);
        session.now = shared.store.now();
        conn.info.set_last_cmd(session.now);
        let mut pos = 0;
        let mut served = 0;
        let mut end = None;
        let mut shrink = false;
        // Each request's time runs from here or from the previous one's end.
        let mut clock = now_ns();
        while pos < rbuf.len() {
            // A request refused for lack of room is framed as if its value
            // were too large: answered at once, its value skipped.
            let refusing = session.no_room;
            let limits = if refusing { &no_room } else { &shared.limits };
            let mark = session.out.mark();
            let (step, family) =
                step_one(&mut session, wire, &rbuf[pos..], limits, &conn.info.addr);
            session.no_room = false;
            let (len, next) = match step {
                Step::More { needed } => {
                    let have = rbuf.len() - pos;
                    if needed > have && !refusing && !room.try_cover(needed) {
                        // Send what is done before waiting for room.
                        if !unsettled.is_none() && !settled(keyspace, &mut unsettled).await {
                            return End::Io;
                        }
                        if !flush(shared, stream, &mut session.out, stats, stop.as_mut(), conn)
                            .await
                        {
                            return End::Io;
                        }
                        let covered = room.wait_cover(needed).await;
                        clock = now_ns();
                        if !covered {
                            session.no_room = true;
                            continue;
                        }
                    }
                    if needed > have {
                        rbuf.reserve(needed - have);
                    }
                    break;
                }
                Step::Garbage => {
                    end = Some(End::Garbage);
                    break;
                }
                Step::Done { len, next } => {
                    shrink |= room.release();
                    clock = stats.latency.record_since(family, clock);
                    (len, next)
                }
            };
            if min_acks > 0 {
                // A write is acknowledged once its replicas have it: this
                // request's reply waits, or is taken back for an error.
                let ticket = keyspace.take_ticket();
                let text = matches!(wire, Wire::Text);
                // Meta's quiet mode still hears errors; classic noreply not.
                let meta = matches!(
                    family,
                    Family::MetaGet | Family::MetaSet | Family::MetaDelete | Family::MetaArith
                );
                if !ticket.is_none()
                    && !acknowledged(shared, ticket, &mut session.out, mark, (text, meta)).await
                {
                    return End::Io;
                }
            } else if durable {
                unsettled = unsettled.max(keyspace.take_ticket());
            }
            pos += len;
            match next {
                Next::Continue => {}
                Next::Swallow(n) => {
                    let k = n.min(rbuf.len() - pos);
                    pos += k;
                    swallow = n - k;
                }
                Next::Close => {
                    end = Some(End::Quit);
                    break;
                }
                Next::Replicate => {
                    end = Some(End::Replicate);
                    break;
                }
                // Carried out below, once the replies before it are written.
                Next::Stream => break,
            }
            served += 1;
            if session.out.pending() > HIGH_WATER {
                if !unsettled.is_none() && !settled(keyspace, &mut unsettled).await {
                    return End::Io;
                }
                if !flush(shared, stream, &mut session.out, stats, stop.as_mut(), conn).await {
                    return End::Io;
                }
                clock = now_ns();
            }
            if served % per_event == 0 {
                incr(&stats.conn_yields);
                tokio::task::yield_now().await;
                clock = now_ns();
            }
        }
        rbuf.advance(pos.min(rbuf.len()));
        if shrink {
            // The buffer grew for a large frame that is done: its memory
            // goes back with the room.
            rbuf = BytesMut::from(&rbuf[..]);
        }
        if !unsettled.is_none() && !settled(keyspace, &mut unsettled).await {
            return End::Io;
        }
        // Invalidations go between replies: after every reply of the batch.
        if let Some(t) = session.tracking.as_mut() {
            t.drain(&mut session.out);
        }
        if !flush(shared, stream, &mut session.out, stats, stop.as_mut(), conn).await {
            return End::Io;
        }
        if let Some(end) = end {
            return finish(end, stream, shared, &mut session, conn).await;
        }
        if let Some(job) = session.stream.take() {
            if let Err(end) =
                super::stream::run(*job, stream, &mut session, stop.as_mut(), conn).await
            {
                return end;
            }
            // The requests after it, already read, are run next.
            buffered = !rbuf.is_empty();
        }
        if rbuf.is_empty() && rbuf.capacity() > KEEP_CAPACITY {
            rbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        if session.out.capacity() > KEEP_CAPACITY * 4 {
            session.out = Output::with_capacity(READ_CHUNK);
        }
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
    shared: &Shared,
    stream: &mut S,
    out: &mut Output,
    stats: &ThreadStats,
    stop: std::pin::Pin<&mut F>,
    conn: &ConnGuard,
) -> bool
where
    S: AsyncWrite + Unpin,
    F: std::future::Future<Output = ()>,
{
    shared.keyspace.batch_done();
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
