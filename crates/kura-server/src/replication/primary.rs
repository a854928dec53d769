//! The primary's side: a connection that sent `replicate` becomes a
//! replication stream. The primary decides between a partial resync (the
//! replica's history is a prefix of ours and the log still holds the
//! records after its last one) and a full one (a snapshot taken now, sent
//! whole, then the records after it), then follows its own log with a
//! [`LogTail`] and sends what is written, a heartbeat every second when
//! there is nothing, and reads the replica's acknowledgements.
//!
//! The log on disk is the backlog: a replica that reads slowly only makes
//! its stream wait (one read buffer of memory, bounded), never the primary's
//! writers; the log's segments are pruned as snapshots allow whatever a
//! replica still needs, and a replica that falls behind them gets a full
//! resync when it comes back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kura_log::{LogError, LogTail, TailError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::wire::{self, Handshake};
use super::StreamInfo;
use crate::durable::Durable;
use crate::shared::Shared;

/// Bytes of records read from the log for one frame at most.
const FRAME_BYTES: usize = 256 * 1024;

/// Records behind the log's end within which the stream reads the log on
/// the event loop (they are in the page cache).
const NEAR_END: u64 = 4096;

/// A heartbeat goes out when nothing else has for this long.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Serves a replica at `peer` that asked for the records after `after` of
/// history `history` (`-`: none) until it goes or the server stops.
pub(crate) async fn serve<S>(
    stream: &mut S,
    shared: &Shared,
    peer: &str,
    history: &[u8],
    after: u64,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Some(durable) = shared.durable.clone() else {
        let no = Handshake::Refused(
            "replication needs --data-dir on the primary (its log is what replicas follow)".into(),
        );
        let _ = stream.write_all(no.line().as_bytes()).await;
        return;
    };
    let history = String::from_utf8_lossy(history).into_owned();
    let counters = &shared.replication;
    let info = Arc::new(StreamInfo {
        peer: peer.to_string(),
        acked: AtomicU64::new(0),
        sent: AtomicU64::new(0),
    });
    counters.streams.lock().push(info.clone());
    counters.replicas.fetch_add(1, Ordering::Relaxed);
    match stream_to(stream, shared, &durable, &info, &history, after).await {
        Ok(()) => {}
        Err(e) => tracing::warn!("replication stream to {peer} ended: {e:#}"),
    }
    counters.replicas.fetch_sub(1, Ordering::Relaxed);
    counters.streams.lock().retain(|s| !Arc::ptr_eq(s, &info));
}

/// How a replica that asked for the records after `after` of `theirs`
/// goes on from this server's history `ours`, whose last written record is
/// `written`.
#[derive(Debug, PartialEq, Eq)]
enum Resync {
    /// From its next record (if the log still holds it).
    Partial,
    /// It holds records after this one that this history does not.
    Rewind(u64),
    Full,
}

fn resync(ours: &kura_log::History, theirs: &str, after: u64, written: u64) -> Resync {
    if theirs == ours.id {
        // Ahead of us: records we lost (a primary restarted after a crash
        // that cost it unsynced records, and numbers them again).
        return if after > written {
            Resync::Rewind(written)
        } else {
            Resync::Partial
        };
    }
    match &ours.previous {
        Some((prev, end)) if prev == theirs && after <= *end => Resync::Partial,
        // The old primary (or a replica of it) wrote on after the
        // promotion: those records are not ours.
        Some((prev, end)) if prev == theirs => Resync::Rewind(*end),
        _ => Resync::Full,
    }
}

async fn stream_to<S>(
    stream: &mut S,
    shared: &Shared,
    durable: &Arc<Durable>,
    info: &StreamInfo,
    history: &str,
    after: u64,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let dir = durable.dir().to_owned();
    let ours = durable.history();
    let written = durable.lag().written();
    let partial = match resync(&ours, history, after, written) {
        Resync::Partial => match LogTail::from_seq(&dir, after + 1, written) {
            Ok(tail) => Some(tail),
            Err(LogError::Tail(TailError::Gone { .. } | TailError::Ahead { .. })) => None,
            Err(e) => return Err(e.into()),
        },
        Resync::Rewind(to) => {
            let line = Handshake::Rewind {
                id: history.to_string(),
                to,
            };
            stream.write_all(line.line().as_bytes()).await?;
            return Ok(());
        }
        Resync::Full => None,
    };
    let counters = &shared.replication;
    let tail = match partial {
        Some(tail) => {
            counters.partial_resyncs.fetch_add(1, Ordering::Relaxed);
            let line = Handshake::Continue {
                history: ours,
                after,
            };
            stream.write_all(line.line().as_bytes()).await?;
            tail
        }
        None => {
            counters.full_resyncs.fetch_add(1, Ordering::Relaxed);
            full_resync(stream, shared, durable, ours).await?
        }
    };
    info.sent.store(tail.next_seq() - 1, Ordering::Relaxed);
    follow(stream, shared, durable, info, tail).await
}

/// Sends a snapshot whole (the newest on disk when the log still goes on
/// from it, else one taken now) and returns a tail from after it.
async fn full_resync<S>(
    stream: &mut S,
    shared: &Shared,
    durable: &Arc<Durable>,
    history: kura_log::History,
) -> anyhow::Result<LogTail>
where
    S: AsyncWrite + Unpin,
{
    let (d, store) = (durable.clone(), shared.store.clone());
    let (path, at, tail) = tokio::task::spawn_blocking(move || {
        // Reusing the newest snapshot keeps a client that asks again and
        // again from making the primary write snapshot after snapshot.
        let written = d.lag().written();
        if let Some(newest) = kura_log::snapshot_files(d.dir())?.pop() {
            if let Ok(tail) = LogTail::from_seq(d.dir(), newest.seq + 1, written) {
                return Ok::<_, anyhow::Error>((newest.path, newest.seq, tail));
            }
        }
        // Another snapshot may be under way (the log's own): wait for it,
        // a minute at most.
        let mut tries = 0;
        loop {
            match d.snapshot_at(&store) {
                Ok((path, at)) => {
                    let tail = LogTail::from_seq(d.dir(), at + 1, d.lag().written())?;
                    return Ok((path, at, tail));
                }
                Err(e) if tries < 600 && e.is::<crate::durable::SnapshotBusy>() => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    })
    .await??;
    let mut file = tokio::fs::File::open(&path).await?;
    let bytes = file.metadata().await?.len();
    let line = Handshake::FullResync { history, at, bytes };
    stream.write_all(line.line().as_bytes()).await?;
    let sent = tokio::io::copy(&mut file, stream).await?;
    anyhow::ensure!(
        sent == bytes,
        "snapshot {} changed while sent",
        path.display()
    );
    Ok(tail)
}

/// Sends what the log holds after the tail's position, then what is
/// written, until the replica goes or the server stops.
async fn follow<S>(
    stream: &mut S,
    shared: &Shared,
    durable: &Arc<Durable>,
    info: &StreamInfo,
    mut tail: LogTail,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    // The replica's `ack` lines, as they come (a read is cancel safe: a
    // select branch that loses reads nothing).
    let mut line = Vec::new();
    let mut chunk = [0u8; 256];
    let mut written = durable.lag().watch_written();
    let mut stop = shared.watch();
    let mut frame = Vec::new();
    loop {
        // Whatever is written after this is seen by `changed` below.
        written.borrow_and_update();
        // Read what the log has. Near the log's end the bytes were just
        // written and are in the page cache: read them here, a copy of a
        // few microseconds. Farther behind (a replica catching up) they may
        // be on disk: read them off the event loop.
        let behind = durable.lag().written().saturating_sub(tail.next_seq());
        let (back, bytes) = if behind < NEAR_END {
            let bytes = read_frame(&mut tail);
            (tail, bytes)
        } else {
            tokio::task::spawn_blocking(move || {
                let bytes = read_frame(&mut tail);
                (tail, bytes)
            })
            .await?
        };
        tail = back;
        let bytes = bytes?;
        if !bytes.is_empty() {
            frame.clear();
            wire::records(&mut frame, &bytes);
            writer.write_all(&frame).await?;
            info.sent.store(tail.next_seq() - 1, Ordering::Relaxed);
            continue;
        }
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s == crate::shared::RunState::Stopping) => return Ok(()),
            r = written.changed() => r?,
            r = reader.read(&mut chunk) => {
                let n = r?;
                if n == 0 {
                    return Ok(());
                }
                line.extend_from_slice(&chunk[..n]);
                while let Some(end) = line.iter().position(|&b| b == b'\n') {
                    let text = String::from_utf8_lossy(&line[..end]);
                    if let Some(n) = text.trim_end().strip_prefix("ack ").and_then(|n| n.parse().ok()) {
                        shared.replication.acked.fetch_max(n, Ordering::Relaxed);
                        info.acked.store(n, Ordering::Relaxed);
                    }
                    line.drain(..=end);
                }
                // A replica sends short `ack` lines; anything longer is not
                // one, and is not kept growing.
                anyhow::ensure!(line.len() <= 64, "a replica sent a line of {}+ bytes", line.len());
            }
            () = tokio::time::sleep(HEARTBEAT) => {
                frame.clear();
                wire::heartbeat(&mut frame, durable.lag().written(), unix_millis());
                writer.write_all(&frame).await?;
            }
        }
    }
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
pub(crate) fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
