//! The log thread: puts records back in number order, writes each batch
//! with one write, syncs per the fsync policy (one fsync a batch under
//! `always`: group commit), publishes what is written and synced, and
//! starts snapshots.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kura_log::{FsyncPolicy, LogError, LogWriter};
use kura_store::Store;

use super::health::Health;
use super::lag::Lag;
use super::sink::{LogSink, Msg, Owned};
use super::snapshot::take_snapshot;
use super::syncer::{Synced, Syncer};
use super::{DurableConfig, LogStats};

/// Records taken into one batch at most.
const BATCH_RECORDS: usize = 65536;

/// How often a log that could not be written is tried again.
const RETRY: Duration = Duration::from_secs(1);

pub(super) struct LogThread {
    pub(super) writer: LogWriter,
    pub(super) rx: mpsc::Receiver<Msg>,
    pub(super) synced: Arc<Synced>,
    pub(super) lag: Arc<Lag>,
    pub(super) health: Arc<Health>,
    pub(super) stats: Arc<LogStats>,
    pub(super) store: Arc<Store>,
    pub(super) sink: Arc<LogSink>,
    pub(super) backlog: Arc<crate::replication::backlog::Backlog>,
    pub(super) config: DurableConfig,
    pub(super) tx: mpsc::Sender<Msg>,
    pub(super) snapshot_now: bool,
    pub(super) on_failure: Arc<OnFailure>,
    /// Bytes of records in the writer's batch, not yet written.
    pub(super) batched: u64,
    /// Bytes logged since the last snapshot began.
    pub(super) since_snapshot: u64,
}

/// What to do when the log cannot be written: stop the server.
pub(super) type OnFailure = OnceLock<Box<dyn Fn() + Send + Sync>>;

impl LogThread {
    pub(super) fn run(mut self) {
        if let Err(e) = self.serve() {
            tracing::error!(
                "update log failed: {e:#}; the server stops rather than acknowledge writes it cannot log"
            );
            // Connections waiting for the log close without acknowledging;
            // the server is told to stop, and exits with an error.
            self.health.fail();
            if let Some(stop) = self.on_failure.get() {
                stop();
            }
        }
    }

    fn serve(&mut self) -> anyhow::Result<()> {
        let mut pending: BTreeMap<u64, (Owned, usize)> = BTreeMap::new();
        let mut last_snapshot = Instant::now();
        let mut snapshot: Option<JoinHandle<()>> = None;
        let syncer = Syncer::start(
            self.synced.clone(),
            self.writer.end().clone(),
            self.on_failure.clone(),
        )?;
        // The last record numbered when a batch began, and when: once it
        // is written, the debt is younger than that (lag.rs).
        let mut mark = None;
        // When a write to the log last failed, while it keeps failing.
        let mut failing: Option<Instant> = None;
        let tick = Duration::from_millis(200);
        loop {
            let mut syncs = Vec::new();
            let mut resets = Vec::new();
            let mut stop = false;
            let first = match self.rx.recv_timeout(tick) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(Msg::Stop),
            };
            if mark.is_none() {
                mark = Some(self.lag.mark(self.sink.next.load(Ordering::Acquire) - 1));
            }
            // Everything that has arrived goes into this batch.
            for msg in first
                .into_iter()
                .chain(std::iter::from_fn(|| self.rx.try_recv().ok()))
            {
                match msg {
                    Msg::Record(seq, owned, len) => {
                        pending.insert(seq, (owned, len));
                    }
                    Msg::Sync(reply) => syncs.push(reply),
                    Msg::Reset(r) => resets.push(r),
                    Msg::Stop => stop = true,
                }
                if pending.len() >= BATCH_RECORDS {
                    break;
                }
            }
            // After a failed write, try again once a second; until then
            // records wait in `pending` (writes are refused meanwhile).
            let retry_due = failing.is_none_or(|at: Instant| at.elapsed() >= RETRY || stop);
            if retry_due {
                match self.write(&mut pending) {
                    Ok(()) => {
                        if failing.take().is_some() {
                            tracing::warn!("the update log is written again: writes are accepted");
                            self.health.recover();
                        }
                    }
                    Err(LogError::Io { path, source }) if !stop => {
                        if failing.is_none() {
                            tracing::error!(
                                "cannot write the update log {}: {source}; refusing writes, serving reads, trying again every second",
                                path.display()
                            );
                        }
                        self.health.refuse(&source.to_string());
                        failing = Some(Instant::now());
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            for r in resets {
                self.reset(&mut pending, &syncer, r)?;
            }
            let last = self.lag.written();
            if let Some(m) = mark.filter(|m| last >= m.0) {
                self.lag.covered(m);
                mark = None;
            }
            if stop || (!syncs.is_empty() && failing.is_none()) {
                self.writer.sync()?;
                self.synced.publish(self.writer.next_seq() - 1);
            }
            // A snapshot asking while the log cannot be written is told
            // what is on disk, and gives up.
            let on_disk = self.stats.synced.load(Ordering::Acquire);
            for s in syncs {
                let _ = s.send(on_disk);
            }
            if failing.is_none() && !syncer.busy() {
                if let Some(file) = self.writer.sync_due()? {
                    syncer.sync(file, last);
                }
            }
            if stop {
                // A snapshot still running finds the log gone and gives up
                // (its half-written file is removed at the next start).
                return Ok(());
            }
            let due = self.snapshot_now
                || (self.config.snapshot_log_bytes > 0
                    && self.since_snapshot >= self.config.snapshot_log_bytes)
                || (!self.config.snapshot_interval.is_zero()
                    && self.since_snapshot > 0
                    && last_snapshot.elapsed() >= self.config.snapshot_interval);
            if due && snapshot.as_ref().is_none_or(|t| t.is_finished()) {
                self.snapshot_now = false;
                self.since_snapshot = 0;
                last_snapshot = Instant::now();
                let (store, sink, tx, dir, stats) = (
                    self.store.clone(),
                    self.sink.clone(),
                    self.tx.clone(),
                    self.config.dir.clone(),
                    self.stats.clone(),
                );
                snapshot = Some(
                    std::thread::Builder::new()
                        .name("kura-snapshot".into())
                        .spawn(move || {
                            if let Err(e) = take_snapshot(&store, &sink, &tx, &dir, &stats) {
                                tracing::error!("snapshot failed: {e:#}");
                            }
                        })?,
                );
            }
        }
    }

    /// Writes the records of `pending` that follow the last one written,
    /// and a batch a failed write kept, and pays their debt. Under `always`
    /// the write is synced. A record leaves `pending` only once it is in
    /// the writer's batch, so a failed write loses nothing.
    pub(super) fn write(
        &mut self,
        pending: &mut BTreeMap<u64, (Owned, usize)>,
    ) -> Result<(), LogError> {
        // With replicas connected, the batch's bytes go to the backlog too.
        let mut copy = self.backlog.active().then(Vec::new);
        let first = self.writer.next_seq();
        while let Some(entry) = pending.first_entry() {
            if *entry.key() != self.writer.next_seq() {
                break;
            }
            let seq = *entry.key();
            let m = entry.get().0.as_mutation();
            match copy.as_mut() {
                Some(copy) => self.writer.push_copy(seq, &m, copy)?,
                None => self.writer.push(seq, &m)?,
            }
            let (_, len) = entry.remove();
            self.batched += len as u64;
        }
        if self.batched == 0 {
            return Ok(());
        }
        // Under `always` this syncs: one fsync for the whole batch.
        self.writer.commit()?;
        let last = self.writer.next_seq() - 1;
        if let Some(copy) = copy.filter(|c| !c.is_empty()) {
            self.backlog.push(first, last, copy.into());
        }
        let wrote = std::mem::take(&mut self.batched);
        self.since_snapshot += wrote;
        self.stats.bytes.fetch_add(wrote, Ordering::Relaxed);
        // The handles went (and their memory with them) as each record was
        // encoded, before the debt is said to be paid.
        self.lag.paid(last, wrote);
        if self.config.fsync == FsyncPolicy::Always {
            self.synced.publish(last);
        }
        Ok(())
    }
}
