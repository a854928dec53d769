//! The durable mode of a replica (`--replica-of` with `--data-dir`): its
//! log holds the primary's records under the primary's numbers, so that
//! it resumes after its own restart from its own last record and can serve
//! replicas of its own from the same log. The store's own changes (its
//! evictions, a delayed flush coming due) are not logged while following.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use anyhow::anyhow;
use kura_log::{History, Record};
use kura_store::{Change, Store};

use super::recovery::{load_snapshot, replay_log, Progress};
use super::reset::{Reset, SnapshotHold};
use super::sink::{Msg, Owned};
use super::Durable;

impl Durable {
    /// Which history of writes this log belongs to.
    pub fn history(&self) -> History {
        self.history.lock().clone()
    }

    /// Makes `history` this log's (saved in the data dir first).
    ///
    /// # Errors
    /// It cannot be saved.
    pub fn set_history(&self, history: History) -> anyhow::Result<()> {
        history.save(&self.config.dir)?;
        *self.history.lock() = history;
        Ok(())
    }

    /// The newest records, in memory, for replicas.
    pub fn backlog(&self) -> &Arc<crate::replication::backlog::Backlog> {
        &self.backlog
    }

    /// Starts or stops following: while following, the log takes only the
    /// records given to [`Durable::append_replicated`].
    pub fn set_following(&self, on: bool) {
        self.sink.following.store(on, Ordering::Release);
        if on {
            self.sink.diverged.store(false, Ordering::Release);
        }
    }

    /// Whether a write reached the store while it followed (and clears it).
    pub fn take_diverged(&self) -> bool {
        self.sink.diverged.swap(false, Ordering::AcqRel)
    }

    /// The last record known to be on disk.
    pub fn synced(&self) -> u64 {
        *self.durable.borrow()
    }

    /// What a replica that applied up to `applied` acknowledges: under
    /// `--fsync always`, only what is on disk.
    pub fn acknowledgeable(&self, applied: u64) -> u64 {
        if self.config.fsync == kura_log::FsyncPolicy::Always {
            self.synced().min(applied)
        } else {
            applied
        }
    }

    /// Logs a record of the primary's, already applied to the store, under
    /// its own number (the one after the last logged).
    ///
    /// # Errors
    /// The number is not the next one, or the log thread stopped.
    pub fn append_replicated(&self, rec: Record) -> anyhow::Result<()> {
        let next = self.next_seq();
        if rec.seq != next {
            return Err(anyhow!("record {} where {next} was next", rec.seq));
        }
        let owned = Owned::Copy(rec.mutation);
        let len = owned.as_mutation().encoded_len();
        self.lag.owe(len);
        // Numbered once the store holds it: a snapshot that notes this
        // number finds the change in the store.
        self.sink.next.store(rec.seq + 1, Ordering::Release);
        self.tx
            .send(Msg::Record(rec.seq, owned, len))
            .map_err(|_| anyhow!("the update log stopped"))
    }

    /// Waits while the log owes more than its bounds (the replica's
    /// back-pressure: it reads the stream no faster than it logs), or until
    /// `stop` says so.
    pub fn wait_for_room(&self, stop: impl Fn() -> bool) {
        let next = self.next_seq();
        while self.lag.over(next) && self.lag.written() + 1 < next && !stop() {
            if self.health.refusing() {
                // The log cannot be written: wait for it, a second at a time.
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Holds snapshots off while the store is replaced or rebuilt.
    ///
    /// # Errors
    /// A snapshot runs for over a minute.
    pub fn hold_snapshots(&self) -> anyhow::Result<SnapshotHold<'_>> {
        SnapshotHold::take(&self.stats)
    }

    /// A full resync is done: the snapshot in `tmp`, taken at record `at`
    /// of `history`, replaces the log and its snapshots.
    ///
    /// # Errors
    /// The log thread stopped (it could not do it).
    pub fn replace(&self, at: u64, tmp: PathBuf, history: History) -> anyhow::Result<()> {
        let (reply, rx) = mpsc::channel();
        let h = history.clone();
        self.tx
            .send(Msg::Reset(Reset::Replace {
                at,
                tmp,
                history: h,
                reply,
            }))
            .map_err(|_| anyhow!("the update log stopped"))?;
        rx.recv()
            .map_err(|_| anyhow!("the update log stopped while replacing its history"))??;
        *self.history.lock() = history;
        Ok(())
    }

    /// Cuts the log back so that record `to` is its last, and rebuilds the
    /// store from what is left (it holds what it held at record `to`).
    ///
    /// # Errors
    /// The records up to `to` are no longer all there (the store is left
    /// as it was), or the log thread stopped.
    pub fn rewind(&self, to: u64, store: &Store) -> anyhow::Result<()> {
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Msg::Reset(Reset::Rewind { to, reply }))
            .map_err(|_| anyhow!("the update log stopped"))?;
        let base = rx
            .recv()
            .map_err(|_| anyhow!("the update log stopped while cutting back"))??;
        store.replay(Change::Flush { at: 0 });
        super::clear_tables(self.tables());
        let dir = &self.config.dir;
        let mut progress = Progress::new();
        let mut into = super::tables::Replay::new(store, self.tables(), false);
        if base > 0 {
            load_snapshot(
                &mut into,
                &kura_log::snapshot_path(dir, base),
                &mut progress,
            )?;
        }
        let n = replay_log(dir, &mut into, base, &mut progress)?;
        into.finish();
        tracing::warn!(
            "cut the log back to record {to}: rebuilt the store from record {base} and {n} records after it"
        );
        Ok(())
    }
}
