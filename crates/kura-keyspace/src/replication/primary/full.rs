//! A full resync: the handshake line, then a snapshot, whole. A server with
//! a data dir sends a snapshot file (the newest on disk when the log still
//! goes on from it, so that a replica asking again and again cannot make
//! it write snapshot after snapshot; else one taken now while writers go
//! on). A server without one sends its store as a snapshot made on the
//! fly: the handles of every entry are taken shard by shard (no bytes
//! copied), and encoded as they are sent; entries written meanwhile reach
//! the replica as records from the backlog after the snapshot's record,
//! which the backlog holds for it (backlog/hold.rs) while it is sent.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kura_log::{History, LogTail, MutationRef, SnapshotEncoder};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::Source;
use crate::durable::Durable;
use crate::replication::backlog::Hold;
use crate::replication::wire::Handshake;
use crate::replication::StreamInfo;

/// Bytes encoded before they are written out.
const CHUNK: usize = 256 * 1024;

/// Sends a snapshot whole; returns the record it was taken at, and the
/// hold on what was written meanwhile when it was sent from memory.
pub(super) async fn full_resync<S>(
    stream: &mut S,
    source: &Source<'_>,
    info: &StreamInfo,
    history: History,
) -> anyhow::Result<(u64, Option<Hold>)>
where
    S: AsyncWrite + Unpin,
{
    match source.durable {
        Some(d) => Ok((from_disk(stream, source, info, d, history).await?, None)),
        None => {
            let (at, hold) = from_memory(stream, source, history).await?;
            Ok((at, Some(hold)))
        }
    }
}

async fn from_disk<S>(
    stream: &mut S,
    source: &Source<'_>,
    info: &StreamInfo,
    durable: &Arc<Durable>,
    history: History,
) -> anyhow::Result<u64>
where
    S: AsyncWrite + Unpin,
{
    let (d, store) = (durable.clone(), source.keyspace.store.clone());
    let (path, at) = tokio::task::spawn_blocking(move || {
        let written = d.lag().written();
        if let Some(newest) = kura_log::snapshot_files(d.dir())?.pop() {
            if LogTail::from_seq(d.dir(), newest.seq + 1, written).is_ok() {
                return Ok::<_, anyhow::Error>((newest.path, newest.seq));
            }
        }
        // Another snapshot may be under way (the log's own): wait for it,
        // a minute at most.
        let mut tries = 0;
        loop {
            match d.snapshot_at(&store) {
                Ok(done) => return Ok(done),
                Err(e) if tries < 600 && e.is::<crate::durable::SnapshotBusy>() => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e),
            }
        }
    })
    .await??;
    // The log after the snapshot is what the stream goes on with: kept
    // until the stream nears the last record, beyond --repl-backlog-size
    // (snapshots taken meanwhile would prune it).
    info.resync_at.store(at, Ordering::Relaxed);
    info.resyncing.store(true, Ordering::Relaxed);
    super::retain(source);
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
    Ok(at)
}

async fn from_memory<S>(
    stream: &mut S,
    source: &Source<'_>,
    history: History,
) -> anyhow::Result<(u64, Hold)>
where
    S: AsyncWrite + Unpin,
{
    let store = source.keyspace.store.clone();
    let tables = source.keyspace.tables.clone();
    anyhow::ensure!(
        source.keyspace.replication.journal.get().is_some(),
        "no journal"
    );
    // Every change numbered up to `at` was made under a shard lock that is
    // released by the time the shard's handles are taken below; those
    // after it stay in the backlog while the snapshot is sent.
    // The tables' records are copied (a table is not a store of handles).
    let (hold, at) = source.backlog.hold();
    let (shards, flush, mut enc, table_bytes) = tokio::task::spawn_blocking(move || {
        let mut enc = SnapshotEncoder::new(at);
        let mut table_bytes = Vec::new();
        for (name, t) in tables.iter() {
            t.range(
                &kura_table::RangeSpec::all(),
                usize::MAX,
                |id, value, flags| {
                    let m = MutationRef::TablePut {
                        table: name,
                        id,
                        value,
                        flags,
                    };
                    enc.push(&m, &mut table_bytes);
                },
            );
        }
        let shards: Vec<_> = (0..store.shard_count()).map(|i| store.entries(i)).collect();
        (shards, store.pending_flush(), enc, table_bytes)
    })
    .await?;
    let flush = flush.map(|at| MutationRef::Flush { at });
    let records: u64 = shards
        .iter()
        .flatten()
        .map(|e| set(e).encoded_len() as u64)
        .chain(flush.iter().map(|f| f.encoded_len() as u64))
        .sum();
    let bytes = records + table_bytes.len() as u64 + SnapshotEncoder::OVERHEAD;
    let line = Handshake::FullResync { history, at, bytes };
    let send = async {
        stream.write_all(line.line().as_bytes()).await?;
        stream.write_all(&enc.header()).await?;
        stream.write_all(&table_bytes).await?;
        let mut out = Vec::with_capacity(CHUNK + 4096);
        for shard in shards {
            for e in &shard {
                enc.push(&set(e), &mut out);
                if out.len() >= CHUNK {
                    stream.write_all(&out).await?;
                    out.clear();
                }
            }
        }
        if let Some(f) = &flush {
            enc.push(f, &mut out);
        }
        stream.write_all(&out).await?;
        stream.write_all(&enc.trailer()).await?;
        Ok::<_, std::io::Error>(())
    };
    // A replica that reads too slowly for what is written meanwhile is cut
    // off at once (it would fall behind the backlog anyway), letting go of
    // the entries the snapshot still holds.
    tokio::select! {
        r = send => r?,
        () = hold.until_lost() => anyhow::bail!(
            "the records written while the snapshot was sent outgrew --repl-resync-buffer ({} bytes beyond --repl-backlog-size): the replica will try again",
            source.keyspace.config.replication.resync_buffer_bytes
        ),
    }
    Ok((at, hold))
}

/// An entry as a snapshot record.
fn set(e: &kura_store::Entry) -> MutationRef<'_> {
    MutationRef::Set {
        key: e.item.key(),
        value: e.item.value(),
        flags: e.item.flags(),
        exptime: e.exptime,
        cas: e.cas,
        stale: e.stale,
        binary_key: e.binary_key,
    }
}
