//! The log thread: puts records back in number order, writes each batch
//! with one write, syncs per the fsync policy (one fsync a batch under
//! `always`: group commit), publishes what is written and synced, and
//! starts snapshots.

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kura_log::{FsyncPolicy, LogEnd, LogWriter};
use kura_store::Store;
use tokio::sync::watch;

use super::lag::Lag;
use super::sink::{LogSink, Msg, Owned};
use super::snapshot::take_snapshot;
use super::{DurableConfig, LogStats};

/// Records taken into one batch at most.
const BATCH_RECORDS: usize = 65536;

/// Publishes the last record known to be on disk; both the log thread and
/// the background syncer do, so it only ever moves forward.
pub(super) struct Synced {
    pub(super) tx: watch::Sender<u64>,
    pub(super) stats: Arc<LogStats>,
}

impl Synced {
    fn publish(&self, last: u64) {
        self.stats.synced.fetch_max(last, Ordering::AcqRel);
        self.tx.send_if_modified(|s| {
            let newer = last > *s;
            if newer {
                *s = last;
            }
            newer
        });
    }
}

/// The `everysec` fsync, on a thread of its own so that the log thread goes
/// on writing while the disk catches up (a sync of a second of large values
/// can take longer than a second).
struct Syncer {
    tx: mpsc::Sender<(File, u64)>,
    busy: Arc<AtomicBool>,
}

impl Syncer {
    fn start(
        synced: Arc<Synced>,
        end: LogEnd,
        on_failure: Arc<OnFailure>,
    ) -> std::io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<(File, u64)>();
        let busy = Arc::new(AtomicBool::new(false));
        let flag = busy.clone();
        std::thread::Builder::new()
            .name("kura-fsync".into())
            .spawn(move || {
                for (file, last) in rx {
                    let done = file.sync_data().map_err(|e| e.to_string());
                    if let Err(e) = done.and_then(|()| end.note(last).map_err(|e| e.to_string())) {
                        tracing::error!(
                            "fsync of the update log failed: {e}; what the log holds since the last good sync may not be on disk, so the server stops"
                        );
                        if let Some(stop) = on_failure.get() {
                            stop();
                        }
                        return;
                    }
                    synced.publish(last);
                    flag.store(false, Ordering::Release);
                }
            })?;
        Ok(Syncer { tx, busy })
    }

    /// Whether the last sync handed over is still running.
    fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    fn sync(&self, file: File, last: u64) {
        self.busy.store(true, Ordering::Release);
        let _ = self.tx.send((file, last));
    }
}

pub(super) struct LogThread {
    pub(super) writer: LogWriter,
    pub(super) rx: mpsc::Receiver<Msg>,
    pub(super) synced: Arc<Synced>,
    pub(super) lag: Arc<Lag>,
    pub(super) stats: Arc<LogStats>,
    pub(super) store: Arc<Store>,
    pub(super) sink: Arc<LogSink>,
    pub(super) config: DurableConfig,
    pub(super) tx: mpsc::Sender<Msg>,
    pub(super) snapshot_now: bool,
    pub(super) on_failure: Arc<OnFailure>,
}

/// What to do when the log cannot be written: stop the server.
pub(super) type OnFailure = OnceLock<Box<dyn Fn() + Send + Sync>>;

impl LogThread {
    pub(super) fn run(mut self) {
        if let Err(e) = self.serve() {
            tracing::error!(
                "update log failed: {e:#}; the server stops rather than acknowledge writes it cannot log"
            );
            // Connections waiting under `always` see the sender go and
            // close without acknowledging; the server is told to stop.
            self.lag.close();
            if let Some(stop) = self.on_failure.get() {
                stop();
            }
        }
    }

    fn serve(&mut self) -> anyhow::Result<()> {
        let mut pending: BTreeMap<u64, (Owned, usize)> = BTreeMap::new();
        let mut since_snapshot = 0u64;
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
        let tick = Duration::from_millis(200);
        loop {
            let mut syncs = Vec::new();
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
                    Msg::Stop => stop = true,
                }
                if pending.len() >= BATCH_RECORDS {
                    break;
                }
            }
            let mut wrote = 0u64;
            while let Some(entry) = pending.first_entry() {
                if *entry.key() != self.writer.next_seq() {
                    break;
                }
                let (seq, (owned, len)) = entry.remove_entry();
                self.writer.push(seq, &owned.as_mutation())?;
                wrote += len as u64;
            }
            let last = self.writer.next_seq() - 1;
            if wrote > 0 {
                since_snapshot += wrote;
                self.stats.bytes.fetch_add(wrote, Ordering::Relaxed);
                // Under `always` this syncs: one fsync for the whole batch.
                self.writer.commit()?;
                // The handles go (and their memory with them) before the
                // debt is said to be paid.
                self.lag.paid(last, wrote);
                if self.config.fsync == FsyncPolicy::Always {
                    self.synced.publish(last);
                }
            }
            if let Some(m) = mark.filter(|m| last >= m.0) {
                self.lag.covered(m);
                mark = None;
            }
            if !syncs.is_empty() || stop {
                self.writer.sync()?;
                self.synced.publish(last);
                for s in syncs {
                    let _ = s.send(last);
                }
            } else if !syncer.busy() {
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
                    && since_snapshot >= self.config.snapshot_log_bytes)
                || (!self.config.snapshot_interval.is_zero()
                    && since_snapshot > 0
                    && last_snapshot.elapsed() >= self.config.snapshot_interval);
            if due && snapshot.as_ref().is_none_or(|t| t.is_finished()) {
                self.snapshot_now = false;
                since_snapshot = 0;
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
}
