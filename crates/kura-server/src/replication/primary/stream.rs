//! Streaming records to a replica: from the backlog in memory while it
//! holds them, else (a server with a data dir) from the log's files; a
//! heartbeat each second when there is nothing; the replica's `ack` lines
//! read as they come.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::bail;
use kura_log::{LogError, LogTail};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Source;
use crate::replication::backlog::Read;
use crate::replication::wire;
use crate::replication::StreamInfo;

/// Bytes of records sent in one frame at most (about).
const FRAME_BYTES: usize = 256 * 1024;

/// Records behind the log's end within which the stream reads the log's
/// files on the event loop (they are in the page cache).
const NEAR_END: u64 = 4096;

/// A heartbeat goes out when nothing else has for this long.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Sends the records from `next` on, then what is written, until the
/// replica goes or the server stops.
pub(super) async fn follow<S>(
    stream: &mut S,
    source: &Source<'_>,
    info: &StreamInfo,
    mut next: u64,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let shared = source.shared;
    let (mut reader, writer) = tokio::io::split(stream);
    // A frame's head, its chunks and the heartbeat after it leave in one
    // write (a chunk larger than the buffer goes straight through).
    let mut writer = tokio::io::BufWriter::with_capacity(64 * 1024, writer);
    // The replica's `ack` lines, as they come (a read is cancel safe: a
    // select branch that loses reads nothing).
    let mut line = Vec::new();
    let mut chunk = [0u8; 256];
    let mut written = source.durable.map(|d| d.lag().watch_written());
    let mut stop = shared.watch();
    let mut tail: Option<LogTail> = None;
    // Writes wait for replicas' acknowledgements: ask for them at once.
    let wants_acks = shared.config.min_replicas_ack > 0;
    let mut head = Vec::with_capacity(5);
    loop {
        // Whatever is written after this is seen by `changed` (what is
        // pushed, by `wait_past`).
        if let Some(w) = written.as_mut() {
            w.borrow_and_update();
        }
        let mut sent = false;
        match source.backlog.read(next, FRAME_BYTES) {
            Read::Records { bytes, last } => {
                let len: usize = bytes.iter().map(|b| b.len()).sum();
                head.clear();
                wire::records_head(&mut head, len);
                writer.write_all(&head).await?;
                for b in &bytes {
                    writer.write_all(b).await?;
                }
                next = last + 1;
                tail = None;
                sent = true;
            }
            Read::Behind { .. } | Read::Wait if source.durable.is_some() => {
                // Farther behind than the backlog goes (or not yet in it):
                // the log's files.
                if next <= source.written() {
                    let bytes = read_files(source, &mut tail, next).await?;
                    if !bytes.is_empty() {
                        let mut frame = Vec::with_capacity(bytes.len() + 5);
                        wire::records(&mut frame, &bytes);
                        writer.write_all(&frame).await?;
                        next = tail.as_ref().map_or(next, LogTail::next_seq);
                        sent = true;
                    }
                }
            }
            Read::Behind { first } => bail!(
                "the replica fell behind the backlog (it wants record {next}, the backlog starts at {first}): it will resync whole"
            ),
            Read::Wait => {}
        }
        if sent {
            info.sent.store(next - 1, Ordering::Relaxed);
            // Behind: the replica hears how far, so its lag is true under
            // load too, not only when the stream is idle.
            let written = source.written();
            let mut frame = Vec::with_capacity(18);
            if written >= next {
                wire::heartbeat(&mut frame, written, unix_millis());
            }
            if wants_acks {
                wire::ack_now(&mut frame);
            }
            writer.write_all(&frame).await?;
            writer.flush().await?;
            continue;
        }
        let file_grew = async {
            match written.as_mut() {
                Some(w) => w.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s == crate::shared::RunState::Stopping) => return Ok(()),
            () = source.backlog.wait_past(next - 1) => {
                // Let the writers that woke this stream go on a moment, so
                // that what they write leaves in one frame, not one each.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            }
            r = file_grew => r?,
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
                        info.acked.store(n, Ordering::Release);
                        shared.replication.acks.notify_waiters();
                        super::retain(source);
                    }
                    line.drain(..=end);
                }
                // A replica sends short `ack` lines; anything longer is not
                // one, and is not kept growing.
                anyhow::ensure!(line.len() <= 64, "a replica sent a line of {}+ bytes", line.len());
            }
            () = tokio::time::sleep(HEARTBEAT) => {
                let mut frame = Vec::with_capacity(17);
                wire::heartbeat(&mut frame, source.written(), unix_millis());
                writer.write_all(&frame).await?;
                writer.flush().await?;
            }
        }
    }
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
pub(crate) fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
