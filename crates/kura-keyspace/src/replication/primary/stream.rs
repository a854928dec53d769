//! Streaming records to a replica: from the backlog in memory while it
//! holds them, else (a server with a data dir) from the log's files; a
//! heartbeat each second when there is nothing; the replica's `ack` lines
//! read as they come.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::bail;
use kura_log::{LogError, LogTail};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::direct::{records_frame, Direct};
use super::Source;
use crate::replication::backlog::{Hold, Read};
use crate::replication::wire;
use crate::replication::StreamInfo;

use super::direct::FRAME_BYTES;

/// Records behind the log's end within which the stream reads the log's
/// files on the event loop (they are in the page cache).
const NEAR_END: u64 = 4096;

/// A heartbeat goes out when nothing else has for this long.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Where the stream's task writes: through its own buffer, or (plain TCP)
/// through the handle other threads send records on, in order with them.
enum Out<'a, W> {
    Buffered(tokio::io::BufWriter<W>),
    Direct(&'a Direct),
}

impl<W: AsyncWrite + Unpin> Out<'_, W> {
    /// Sends `parts` as one piece of the stream.
    async fn send(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        match self {
            Out::Buffered(w) => {
                for p in parts {
                    w.write_all(p).await?;
                }
                w.flush().await
            }
            Out::Direct(d) => d.send(&parts.concat()).await,
        }
    }
}

/// Sends the records from `next` on, then what is written, until the
/// replica goes or the server stops. With `direct`, once the stream has
/// caught up with the backlog, the threads that add records send them
/// (direct.rs), and this task only reads acknowledgements, sends
/// heartbeats and writes what a socket did not take at once. After a full
/// resync from memory, `held` keeps what was written while the snapshot
/// was sent (and, from a data dir, the log is kept for `info`) until the
/// stream is within half the backlog of the last record (or caught up):
/// from there it is a follower like any other.
pub(super) async fn follow<S>(
    stream: &mut S,
    source: &Source<'_>,
    info: &StreamInfo,
    (mut next, mut held): (u64, Option<Hold>),
    direct: Option<&Direct>,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let keyspace = source.keyspace;
    let (mut reader, writer) = tokio::io::split(stream);
    let mut out = match direct {
        Some(d) => Out::Direct(d),
        // A frame's head, its chunks and the heartbeat after it leave in
        // one write (a chunk larger than the buffer goes straight through).
        None => Out::Buffered(tokio::io::BufWriter::with_capacity(64 * 1024, writer)),
    };
    // The replica's `ack` lines, as they come (a read is cancel safe: a
    // select branch that loses reads nothing).
    let mut line = Vec::new();
    let mut chunk = [0u8; 256];
    let mut written = source.durable.map(|d| d.lag().watch_written());
    let mut stop = keyspace.watch();
    let mut tail: Option<LogTail> = None;
    // Writes wait for replicas' acknowledgements: ask for them at once.
    let wants_acks = keyspace.config.replication.min_replicas_ack > 0;
    let mut head = Vec::with_capacity(5);
    let mut was_live = false;
    // The heartbeat's timer lives across turns of the loop and is moved on
    // when it fires before the stream has been quiet for HEARTBEAT (a new
    // one each turn would, on a worker without a time driver, be a trip
    // to the timer thread each: timer.rs).
    let mut beat = kura_timer::sleep(HEARTBEAT);
    let mut quiet_since = Instant::now();
    let mut rearmed = false;
    // First of all, how far this primary has written: the replica says its
    // link is up only once it knows, so a replica that has just come back
    // never reports itself caught up while it is still behind (kura proxy
    // waits for that before it reads from it: docs/proxy.md).
    heartbeat(&mut out, source, None).await?;
    loop {
        if !std::mem::take(&mut rearmed) {
            quiet_since = Instant::now();
        }
        // Whatever is written after this is seen by `changed` (what is
        // pushed, by `wait_past`).
        if let Some(w) = written.as_mut() {
            w.borrow_and_update();
        }
        let mut live = false;
        if let Some(d) = direct {
            let Some(is_live) = direct_turn(d, source).await? else {
                continue;
            };
            if is_live || was_live {
                next = d.next();
            }
            (live, was_live) = (is_live, is_live);
        }
        let read = if live {
            Read::Wait
        } else {
            source.backlog.read(next, FRAME_BYTES)
        };
        // A full resync's stream keeps what follows it (in the backlog, or
        // a data dir's log files) until it is near the last record: within
        // half the backlog, or caught up (a durable server's backlog may
        // not have what is written yet: Wait is the end only when nothing
        // more is written). Only looked at while it does.
        if held.is_some() || info.resyncing.load(Ordering::Relaxed) {
            resyncing(source, info, (&read, live, next), &mut held);
        }
        let trailer = |next: u64| trailer(source, wants_acks, next);
        match read {
            _ if live => {}
            Read::Records { bytes, last } => {
                next = last + 1;
                let caught_up = direct.filter(|_| last >= source.backlog.last());
                let end = if caught_up.is_some() { Vec::new() } else { trailer(next) };
                let mut parts = records_frame(&mut head, &bytes);
                parts.push(&end);
                out.send(&parts).await?;
                tail = None;
                info.sent.store(last, Ordering::Relaxed);
                if let Some(d) = caught_up {
                    go_live(d, source, next);
                }
                continue;
            }
            Read::Behind { .. } | Read::Wait if source.durable.is_some() => {
                // Farther behind than the backlog goes (or not yet in it):
                // the log's files.
                if next <= source.written() {
                    let bytes = read_files(source, &mut tail, next).await?;
                    if !bytes.is_empty() {
                        head.clear();
                        wire::records_head(&mut head, bytes.len());
                        next = tail.as_ref().map_or(next, LogTail::next_seq);
                        out.send(&[&head, &bytes, &trailer(next)]).await?;
                        info.sent.store(next - 1, Ordering::Relaxed);
                        continue;
                    }
                }
            }
            Read::Behind { first } if held.as_ref().is_some_and(Hold::lost) => bail!(
                "the records written while the snapshot was sent outgrew --repl-resync-buffer (it wants record {next}, the backlog starts at {first}): the replica will try again"
            ),
            Read::Behind { first } => bail!(
                "the replica fell behind the backlog (it wants record {next}, the backlog starts at {first}): it will resync whole"
            ),
            Read::Wait => {}
        }
        let file_grew = grown(written.as_mut().filter(|_| !live));
        let more = async {
            match direct {
                Some(d) if live => d.kicked().await,
                _ => source.backlog.wait_past(next - 1).await,
            }
        };
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s == crate::RunState::Stopping) => return Ok(()),
            () = more => let_writers_on(live).await,
            r = file_grew => r?,
            r = reader.read(&mut chunk) => {
                let n = r?;
                if n == 0 {
                    return Ok(());
                }
                line.extend_from_slice(&chunk[..n]);
                take_acks(&mut line, source, info)?;
            }
            () = &mut beat => {
                let due = quiet_since + HEARTBEAT;
                if Instant::now() < due {
                    beat = kura_timer::sleep_until(due);
                    rearmed = true;
                    continue;
                }
                beat = kura_timer::sleep(HEARTBEAT);
                heartbeat(&mut out, source, direct).await?;
            }
        }
    }
}

/// Resolves when the log's files grow (with a data dir, while the stream
/// is not live), else never.
async fn grown(
    written: Option<&mut tokio::sync::watch::Receiver<u64>>,
) -> Result<(), tokio::sync::watch::error::RecvError> {
    match written {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

/// Lets the writers that woke a stream that is not `live` go on a moment,
/// so that what they write leaves in one frame, not one each.
async fn let_writers_on(live: bool) {
    for _ in 0..4 {
        if live {
            break;
        }
        tokio::task::yield_now().await;
    }
}

/// The direct handle at the top of a turn: whether the stream is live, or
/// `None` when bytes a socket did not take were pending (now sent, and
/// what waited behind them: look again).
async fn direct_turn(d: &Direct, source: &Source<'_>) -> anyhow::Result<Option<bool>> {
    let (is_live, pending, failed) = d.status();
    if let Some(e) = failed {
        return Err(e.into());
    }
    if pending {
        d.drain().await?;
        d.flush(source.backlog);
        return Ok(None);
    }
    Ok(Some(is_live))
}

/// Caught up: from now on whoever adds records sends them, beginning
/// with those added meanwhile (from `next`).
fn go_live(d: &Direct, source: &Source<'_>, next: u64) {
    d.set_live(next);
    d.flush(source.backlog);
}

/// A heartbeat, after a second of nothing sent.
async fn heartbeat<W: AsyncWrite + Unpin>(
    out: &mut Out<'_, W>,
    source: &Source<'_>,
    direct: Option<&Direct>,
) -> std::io::Result<()> {
    if let Some(d) = direct {
        // Records added where nobody sends (none are expected) wait at
        // most this long.
        d.flush(source.backlog);
    }
    let mut frame = Vec::with_capacity(17);
    wire::heartbeat(&mut frame, source.written(), unix_millis());
    out.send(&[&frame]).await
}

/// A full resync's stream keeps what follows it (in the backlog, or a data
/// dir's log files) until it is near the last record: within half the
/// backlog, or caught up (a durable server's backlog may not have what is
/// written yet: Wait is the end only when nothing more is written). `read`
/// is what the backlog gave for `next`, while the stream is `live` or not.
fn resyncing(
    source: &Source<'_>,
    info: &StreamInfo,
    (read, live, next): (&Read, bool, u64),
    held: &mut Option<Hold>,
) {
    let near_end = match read {
        Read::Records { last, .. } => source.backlog.within_size(*last),
        Read::Wait => live || next > source.written(),
        Read::Behind { .. } => false,
    };
    if near_end {
        *held = None;
        super::resynced(source, info);
    } else if let (Read::Records { last, .. }, Some(h)) = (read, held) {
        h.advance(last + 1);
    }
}

/// What follows a frame of records sent to a stream that is behind: the
/// replica hears how far, so its lag is true under load too, not only
/// when the stream is idle; and, when writes wait for replicas, a request
/// for an acknowledgement.
fn trailer(source: &Source<'_>, wants_acks: bool, next: u64) -> Vec<u8> {
    let written = source.written();
    let mut frame = Vec::with_capacity(18);
    if written >= next {
        wire::heartbeat(&mut frame, written, unix_millis());
    }
    if wants_acks {
        wire::ack_now(&mut frame);
    }
    frame
}

/// Takes the replica's complete `ack` lines out of `line`: each moves its
/// acknowledged record on (and wakes the writes waiting for replicas).
///
/// # Errors
/// A line too long to be an `ack`.
fn take_acks(line: &mut Vec<u8>, source: &Source<'_>, info: &StreamInfo) -> anyhow::Result<()> {
    let replication = &source.keyspace.replication;
    while let Some(end) = line.iter().position(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(&line[..end]);
        if let Some(n) = text
            .trim_end()
            .strip_prefix("ack ")
            .and_then(|n| n.parse().ok())
        {
            replication.acked.fetch_max(n, Ordering::Relaxed);
            info.acked.store(n, Ordering::Release);
            replication.acks.notify_waiters();
            super::retain(source);
        }
        line.drain(..=end);
    }
    // A replica sends short `ack` lines; anything longer is not one, and
    // is not kept growing.
    anyhow::ensure!(
        line.len() <= 64,
        "a replica sent a line of {}+ bytes",
        line.len()
    );
    Ok(())
}

/// Up to a frame's worth of the records from `next` on, from the log's
/// files: near the log's end on the event loop (the page cache has them),
/// farther behind off it.
async fn read_files(
    source: &Source<'_>,
    tail: &mut Option<LogTail>,
    next: u64,
) -> anyhow::Result<Vec<u8>> {
    let Some(d) = source.durable else {
        return Ok(Vec::new());
    };
    let written = d.lag().written();
    let mut t = match tail.take() {
        Some(t) if t.next_seq() == next => t,
        _ => LogTail::from_seq(d.dir(), next, written)?,
    };
    let (t, bytes) = if written.saturating_sub(next) < NEAR_END {
        let bytes = read_frame(&mut t);
        (t, bytes)
    } else {
        tokio::task::spawn_blocking(move || {
            let bytes = read_frame(&mut t);
            (t, bytes)
        })
        .await?
    };
    *tail = Some(t);
    Ok(bytes?)
}

/// Up to a frame's worth of the records the tail has now.
fn read_frame(tail: &mut LogTail) -> Result<Vec<u8>, LogError> {
    let mut bytes = Vec::new();
    while bytes.len() < FRAME_BYTES {
        if tail.read(&mut bytes, 64)? == 0 {
            break;
        }
    }
    Ok(bytes)
}

/// Milliseconds since the Unix epoch.
pub fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
