//! The log thread: puts records back in number order, writes each batch
//! with one write, syncs per the fsync policy (one fsync a batch under
//! `always`: group commit), publishes what is written and synced, and
//! starts snapshots.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kura_log::{FsyncPolicy, LogWriter};
use kura_store::Store;
use tokio::sync::watch;

use super::sink::{LogSink, Msg, Owned};
use super::snapshot::take_snapshot;
use super::{DurableConfig, LogStats};

pub(super) struct LogThread {
    pub(super) writer: LogWriter,
    pub(super) rx: mpsc::Receiver<Msg>,
    pub(super) durable: watch::Sender<u64>,
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
            if let Some(stop) = self.on_failure.get() {
                stop();
            }
        }
    }

    fn serve(&mut self) -> anyhow::Result<()> {
        let mut pending: BTreeMap<u64, Owned> = BTreeMap::new();
        let mut since_snapshot = 0u64;
        let mut last_snapshot = Instant::now();
        let mut snapshot: Option<JoinHandle<()>> = None;
        let tick = Duration::from_millis(200);
        loop {
            let mut syncs = Vec::new();
            let mut stop = false;
            let first = match self.rx.recv_timeout(tick) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => Some(Msg::Stop),
            };
            // Everything that has arrived goes into this batch.
            for msg in first
                .into_iter()
                .chain(std::iter::from_fn(|| self.rx.try_recv().ok()))
            {
                match msg {
                    Msg::Record(seq, owned) => {
                        pending.insert(seq, owned);
                    }
                    Msg::Sync(reply) => syncs.push(reply),
                    Msg::Stop => stop = true,
                }
                if pending.len() >= 65536 {
                    break;
                }
            }
            let mut wrote = false;
            while let Some(entry) = pending.first_entry() {
                if *entry.key() != self.writer.next_seq() {
                    break;
                }
                let (seq, owned) = entry.remove_entry();
                let m = owned.as_mutation();
                since_snapshot += m.encoded_len() as u64;
                self.stats
                    .bytes
                    .fetch_add(m.encoded_len() as u64, Ordering::Relaxed);
                self.writer.push(seq, &m)?;
                wrote = true;
            }
            let last = self.writer.next_seq() - 1;
            if wrote {
                // Under `always` this syncs: one fsync for the whole batch.
                self.writer.commit()?;
                self.stats.written.store(last, Ordering::Release);
                if self.config.fsync == FsyncPolicy::Always {
                    self.synced(last);
                }
            }
            if !syncs.is_empty() || stop {
                self.writer.sync()?;
                self.synced(last);
                for s in syncs {
                    let _ = s.send(last);
                }
            } else if self.writer.maybe_sync()? {
                self.synced(last);
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

    fn synced(&self, last: u64) {
        self.stats.synced.store(last, Ordering::Release);
        self.durable.send_replace(last);
    }
}
