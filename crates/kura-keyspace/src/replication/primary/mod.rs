//! The primary's side: a connection that sent `replicate` becomes a
//! replication stream. The primary decides between a partial resync (the
//! replica's history is a prefix of ours and the backlog or the log still
//! holds the records after its last one), a rewind (the replica holds
//! records this history does not), and a full one (a snapshot, then the
//! records after it: full.rs), then streams what is written (stream.rs).
//!
//! A server with a data dir streams from its backlog in memory and, for a
//! replica farther behind, from its log's files; a server without one
//! streams from its journal's backlog only, and a replica that falls behind
//! it resyncs whole. Either way a slow replica costs the primary one frame
//! of memory: its stream waits, never the primary's writers.

mod direct;
mod full;
mod sender;
mod stream;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use kura_log::{History, LogError, LogTail, TailError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::backlog::{Backlog, Read};
use super::wire::Handshake;
use super::StreamInfo;
use crate::durable::Durable;
use crate::Keyspace;

pub(crate) use direct::{appended, batch_done, send_soon, Direct};
pub(crate) use sender::Sender;
pub use stream::unix_millis;

/// Where a stream's records come from.
pub(super) struct Source<'a> {
    pub(super) keyspace: &'a Keyspace,
    pub(super) durable: Option<&'a Arc<Durable>>,
    pub(super) backlog: &'a Arc<Backlog>,
}

impl Source<'_> {
    /// The last record written.
    pub(super) fn written(&self) -> u64 {
        self.durable
            .map_or_else(|| self.backlog.last(), |d| d.lag().written())
    }
}

/// Serves a replica at `peer` that asked for the records after `after` of
/// history `history` (`-`: none) until it goes or the server stops.
pub(crate) async fn serve<S>(
    stream: &mut S,
    direct: Option<std::net::TcpStream>,
    keyspace: &Keyspace,
    peer: &str,
    history: &[u8],
    after: u64,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let counters = &keyspace.replication;
    let backlog = match &keyspace.durable {
        Some(d) => Ok(d.backlog().clone()),
        None => counters.journal(keyspace).map(|j| j.backlog().clone()),
    };
    let backlog = match backlog {
        Ok(b) => b,
        Err(e) => {
            let no = Handshake::Refused(format!("cannot keep a replication backlog: {e}"));
            let _ = stream.write_all(no.line().as_bytes()).await;
            return;
        }
    };
    backlog.activate();
    let source = Source {
        keyspace,
        durable: keyspace.durable.as_ref(),
        backlog: &backlog,
    };
    let history = String::from_utf8_lossy(history).into_owned();
    let info = Arc::new(StreamInfo {
        peer: peer.to_string(),
        acked: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        resyncing: AtomicBool::new(false),
        resync_at: AtomicU64::new(0),
    });
    counters.streams.lock().push(info.clone());
    counters.replicas.fetch_add(1, Ordering::Relaxed);
    match stream_to(stream, direct, &source, &info, &history, after).await {
        Ok(()) => {}
        Err(e) => tracing::warn!("replication stream to {peer} ended: {e:#}"),
    }
    counters.replicas.fetch_sub(1, Ordering::Relaxed);
    counters.streams.lock().retain(|s| !Arc::ptr_eq(s, &info));
    retain(&source);
}

/// Tells the log which records the connected replicas still need: from
/// the one after the lowest acknowledged (snapshots prune no segment that
/// holds them, within `--repl-backlog-size`, and `--repl-resync-buffer`
/// more while a full resync's stream has not reached the backlog).
fn retain(source: &Source<'_>) {
    if let Some(d) = source.durable {
        let streams = source.keyspace.replication.streams.lock();
        let from = streams
            .iter()
            .map(|s| {
                let acked = s.acked.load(Ordering::Relaxed);
                if s.resyncing.load(Ordering::Relaxed) {
                    acked.max(s.resync_at.load(Ordering::Relaxed)) + 1
                } else {
                    acked + 1
                }
            })
            .min()
            .unwrap_or(u64::MAX);
        let config = &source.keyspace.config;
        let resyncing = streams.iter().any(|s| s.resyncing.load(Ordering::Relaxed));
        let bytes = if resyncing {
            config
                .replication
                .backlog_bytes
                .saturating_add(config.replication.resync_buffer_bytes)
        } else {
            config.replication.backlog_bytes
        };
        d.stats.retain_bytes.store(bytes, Ordering::Relaxed);
        d.stats.retain_from.store(from, Ordering::Relaxed);
    }
}

/// A stream that has come within half the backlog of the last record no
/// longer needs the log kept for its full resync.
pub(super) fn resynced(source: &Source<'_>, info: &StreamInfo) {
    if info.resyncing.load(Ordering::Relaxed) && info.resyncing.swap(false, Ordering::Relaxed) {
        retain(source);
    }
}

/// How a replica that asked for the records after `after` of `theirs`
/// goes on from this server's history `ours`, whose last written record is
/// `written`.
#[derive(Debug, PartialEq, Eq)]
enum Resync {
    /// From its next record (if the backlog or the log still holds it).
    Partial,
    /// It holds records after this one that this history does not.
    Rewind(u64),
    Full,
}

fn resync(ours: &History, theirs: &str, after: u64, written: u64) -> Resync {
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

/// Whether the records after `after` can still be sent.
fn still_held(source: &Source<'_>, after: u64, written: u64) -> anyhow::Result<bool> {
    if !matches!(source.backlog.read(after + 1, 1), Read::Behind { .. }) {
        return Ok(true);
    }
    let Some(d) = source.durable else {
        return Ok(false);
    };
    match LogTail::from_seq(d.dir(), after + 1, written) {
        Ok(_) => Ok(true),
        Err(LogError::Tail(TailError::Gone { .. } | TailError::Ahead { .. })) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn stream_to<S>(
    stream: &mut S,
    direct: Option<std::net::TcpStream>,
    source: &Source<'_>,
    info: &Arc<StreamInfo>,
    history: &str,
    after: u64,
) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let keyspace = source.keyspace;
    let Some(ours) = keyspace.replication.current_history(keyspace) else {
        anyhow::bail!("no history yet");
    };
    let written = source.written();
    let partial = match resync(&ours, history, after, written) {
        Resync::Partial => still_held(source, after, written)?,
        Resync::Rewind(to) => {
            let line = Handshake::Rewind {
                id: history.to_string(),
                to,
            };
            stream.write_all(line.line().as_bytes()).await?;
            return Ok(());
        }
        Resync::Full => false,
    };
    let counters = &keyspace.replication;
    let (next, held) = if partial {
        counters.partial_resyncs.fetch_add(1, Ordering::Relaxed);
        let line = Handshake::Continue {
            history: ours,
            after,
        };
        stream.write_all(line.line().as_bytes()).await?;
        (after + 1, None)
    } else {
        counters.full_resyncs.fetch_add(1, Ordering::Relaxed);
        let (at, held) = full::full_resync(stream, source, info, ours).await?;
        (at + 1, held)
    };
    info.sent.store(next - 1, Ordering::Relaxed);
    // Until it acknowledges more, it needs what follows its position.
    info.acked.store(next - 1, Ordering::Relaxed);
    retain(source);
    let wants_acks = keyspace.config.replication.min_replicas_ack > 0;
    let direct = direct
        .and_then(|s| tokio::net::TcpStream::from_std(s).ok())
        .map(|s| Arc::new(Direct::new(s, info.clone(), wants_acks)));
    let Some(d) = direct else {
        return stream::follow(stream, source, info, (next, held), None).await;
    };
    source.backlog.add_direct(d.clone());
    let ended = stream::follow(stream, source, info, (next, held), Some(&d)).await;
    source.backlog.remove_direct(&d);
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_goes_on_rewinds_or_starts_over_by_its_history() {
        let old = History::new().unwrap();
        let new = old.promoted(100).unwrap();
        // Our own history: on from its record, or back to ours if ahead.
        assert_eq!(resync(&old, &old.id, 50, 80), Resync::Partial);
        assert_eq!(resync(&old, &old.id, 90, 80), Resync::Rewind(80));
        // The history we were promoted from: on up to where it changed,
        // back to it beyond.
        assert_eq!(resync(&new, &old.id, 100, 500), Resync::Partial);
        assert_eq!(resync(&new, &old.id, 140, 500), Resync::Rewind(100));
        // Anything else: whole.
        assert_eq!(resync(&new, "-", 0, 500), Resync::Full);
        assert_eq!(resync(&old, &new.id, 10, 500), Resync::Full);
        let other = History::new().unwrap();
        assert_eq!(resync(&new, &other.id, 10, 500), Resync::Full);
    }
}
