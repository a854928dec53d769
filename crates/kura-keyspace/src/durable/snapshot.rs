//! Snapshots, taken beside the writers: note the last record number, copy
//! each shard's item handles under its lock (no bytes), write them out, make
//! sure the log up to that number is on disk, rename the file into place and
//! prune what is no longer needed.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use anyhow::anyhow;
use kura_log::{available_bytes, prune_keeping, MutationRef, SnapshotWriter};
use kura_store::Store;

use super::sink::{LogSink, Msg};
use super::LogStats;

/// A snapshot was asked for while another is being taken.
#[derive(Debug, thiserror::Error)]
#[error("a snapshot is already being taken")]
pub struct SnapshotBusy;

/// Bytes a snapshot record takes beyond its key and value.
const SNAPSHOT_RECORD_OVERHEAD: u64 = 48;

/// Room left free beyond a snapshot's estimated size.
const SNAPSHOT_SPARE_BYTES: u64 = 1 << 20;

/// Writes a snapshot of `store` into `dir`, then prunes what it makes
/// unnecessary. Runs beside the writers (see the module documentation).
pub(super) fn take_snapshot(
    store: &Store,
    sink: &LogSink,
    tx: &mpsc::Sender<Msg>,
    dir: &Path,
    stats: &LogStats,
) -> anyhow::Result<(PathBuf, u64)> {
    if stats.snapshot_running.swap(true, Ordering::AcqRel) {
        return Err(SnapshotBusy.into());
    }
    let result = (|| {
        // Every record up to `seq` was made under a shard lock that is
        // released by the time that shard is read below.
        let seq = sink.next.load(Ordering::Acquire) - 1;
        let started = Instant::now();
        // A snapshot needs about the size of the data: rather than fill
        // the disk the log needs, skip it (the log keeps everything).
        let held = store.stats();
        let needed = (held.bytes
            + held.curr_items * SNAPSHOT_RECORD_OVERHEAD
            + super::tables::snapshot_bytes(&sink.tables))
            / 10
            * 11
            + SNAPSHOT_SPARE_BYTES;
        let free = available_bytes(dir)?;
        if free < needed {
            stats.snapshots_skipped.fetch_add(1, Ordering::Relaxed);
            return Err(anyhow!(
                "skipped: {free} bytes free in {}, about {needed} needed; the log keeps everything meanwhile",
                dir.display()
            ));
        }
        let mut w = SnapshotWriter::create(dir, seq)?;
        let mut n = 0u64;
        for shard in 0..store.shard_count() {
            for e in store.entries(shard) {
                w.push(&MutationRef::Set {
                    key: e.item.key(),
                    value: e.item.value(),
                    flags: e.item.flags(),
                    exptime: e.exptime,
                    cas: e.cas,
                    stale: e.stale,
                    binary_key: e.binary_key,
                })?;
                n += 1;
            }
        }
        if let Some(at) = store.pending_flush() {
            w.push(&MutationRef::Flush { at })?;
        }
        n += super::tables::snapshot_tables(&sink.tables, &mut w)?;
        // The log up to `seq` must be on disk before the snapshot counts,
        // or a crash could leave a snapshot after a log with a hole.
        let (reply, synced) = mpsc::channel();
        tx.send(Msg::Sync(reply))
            .map_err(|_| anyhow!("the log thread stopped"))?;
        let on_disk = synced
            .recv()
            .map_err(|_| anyhow!("the log thread stopped"))?;
        if on_disk < seq {
            return Err(anyhow!(
                "the log reached only record {on_disk} of {seq} on disk"
            ));
        }
        let (path, _) = w.finish()?;
        let pruned = prune_keeping(
            dir,
            stats.retain_from.load(Ordering::Relaxed),
            stats.retain_bytes.load(Ordering::Relaxed),
        )?;
        stats.snapshots.fetch_add(1, Ordering::Relaxed);
        stats.snapshot_seq.store(seq, Ordering::Relaxed);
        tracing::info!(
            "snapshot {} ({n} entries, record {seq}) in {:.1} s; removed {} old snapshots and {} log files",
            path.display(),
            started.elapsed().as_secs_f64(),
            pruned.snapshots.len(),
            pruned.segments.len()
        );
        Ok((path, seq))
    })();
    stats.snapshot_running.store(false, Ordering::Release);
    result
}
