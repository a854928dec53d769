//! A replica's log follows its primary's history: a full resync replaces
//! it with the primary's snapshot, and a server that rejoins a primary
//! whose history forked from its own cuts it back to the last record they
//! share. Both happen on the log thread (which owns the writer), between
//! batches, with snapshots held off ([`SnapshotHold`]) and the store's own
//! changes not logged (the server is a replica).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use kura_log::{History, LogWriter, WriterOptions};

use super::log_thread::LogThread;
use super::sink::Owned;
use super::syncer::Syncer;
use super::LogStats;

/// What the log thread is asked to do with the log's history.
pub(crate) enum Reset {
    /// A full resync: the log and snapshots go, the primary's snapshot
    /// (received whole into `tmp`) taken at record `at` takes their place,
    /// and the history becomes the primary's.
    Replace {
        at: u64,
        tmp: PathBuf,
        history: History,
        reply: mpsc::Sender<anyhow::Result<()>>,
    },
    /// Cut the log back so that record `to` is its last; answers the
    /// record of the snapshot the store is to be rebuilt from (0: the log
    /// from its start), or an error when the records before `to` are gone.
    Rewind {
        to: u64,
        reply: mpsc::Sender<anyhow::Result<u64>>,
    },
}

/// Keeps snapshots from being taken while held (a snapshot of a store
/// being replaced would name records of another history).
pub struct SnapshotHold<'a>(&'a LogStats);

impl<'a> SnapshotHold<'a> {
    /// Waits for a snapshot under way to end (a minute at most), then
    /// holds them off.
    ///
    /// # Errors
    /// A snapshot that runs for over a minute.
    pub(super) fn take(stats: &'a LogStats) -> anyhow::Result<SnapshotHold<'a>> {
        let until = Instant::now() + Duration::from_secs(60);
        while stats.snapshot_running.swap(true, Ordering::AcqRel) {
            if Instant::now() > until {
                return Err(anyhow!("a snapshot has been under way for over a minute"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(SnapshotHold(stats))
    }
}

impl Drop for SnapshotHold<'_> {
    fn drop(&mut self) {
        self.0.snapshot_running.store(false, Ordering::Release);
    }
}

impl LogThread {
    /// Carries out `reset`. An error here leaves the directory in a state
    /// the log thread cannot go on from: the server stops (the directory is
    /// consistent for the next start, see kura-log's rewind.rs).
    pub(super) fn reset(
        &mut self,
        pending: &mut BTreeMap<u64, (Owned, usize)>,
        syncer: &Syncer,
        reset: Reset,
    ) -> anyhow::Result<()> {
        // What was queued belongs to the history being replaced or cut.
        self.write(pending)?;
        let dropped: usize = pending.values().map(|(_, len)| len).sum();
        pending.clear();
        self.lag.paid(self.lag.written(), dropped as u64);
        self.writer.sync()?;
        // A sync under way would note a record of the old history as on
        // disk after the note was lowered.
        while syncer.busy() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let dir = self.config.dir.clone();
        let options = WriterOptions {
            segment_size: self.config.segment_size,
            fsync: self.config.fsync,
        };
        match reset {
            Reset::Replace {
                at,
                tmp,
                history,
                reply,
            } => {
                kura_log::clear_dir(&dir)?;
                // A crash from here on leaves a dir without a log: it
                // comes back empty and resyncs whole.
                history.save(&dir)?;
                let path = kura_log::snapshot_path(&dir, at);
                std::fs::rename(&tmp, &path)
                    .map_err(|e| anyhow!("cannot rename {}: {e}", tmp.display()))?;
                std::fs::File::open(&dir).and_then(|d| d.sync_all())?;
                self.writer = LogWriter::open_after(&dir, options, at)?;
                self.restart_at(at);
                let _ = reply.send(Ok(()));
            }
            Reset::Rewind { to, reply } => {
                let Some(base) = kura_log::rewind_base(&dir, to)? else {
                    let _ = reply.send(Err(anyhow!(
                        "the log no longer holds the records up to {to} (pruned): a full resync is needed"
                    )));
                    return Ok(());
                };
                kura_log::truncate_after(&dir, to)?;
                self.writer = LogWriter::open_after(&dir, options, base)?;
                let last = self.writer.next_seq() - 1;
                if last != to {
                    return Err(anyhow!(
                        "the log cut back to record {to} goes on from {last}"
                    ));
                }
                self.restart_at(to);
                let _ = reply.send(Ok(base));
            }
        }
        Ok(())
    }

    /// The log's last record is now `last`.
    fn restart_at(&mut self, last: u64) {
        self.lag.restart(last);
        self.synced.restart(last);
        self.sink.next.store(last + 1, Ordering::Release);
        self.backlog.restart(last);
        self.since_snapshot = 0;
    }
}
