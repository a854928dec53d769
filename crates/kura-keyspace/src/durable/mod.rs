//! The durable mode (`--data-dir`): recovery at startup, the update log
//! written off the request threads, group commit, and snapshots.
//!
//! * Every change of the store reaches [`LogSink::record`] under the lock
//!   of the shard that changed, which numbers it (one atomic add) and sends
//!   it, holding the item handle rather than a copy, to the log thread. So
//!   the records of one key are numbered in the order the changes (and
//!   their replies) happened.
//! * The log thread puts records back in number order (two shards may send
//!   theirs out of order), writes whatever has arrived with one write, and
//!   under `--fsync always` syncs once for the whole batch (group commit)
//!   before publishing the new durable sequence number; connections that
//!   made changes wait for it before they send their replies.
//! * Snapshots run on their own thread: they note the last record number,
//!   copy each shard's item handles under its lock (no bytes), write them
//!   out, make sure the log up to that number is on disk, rename the file
//!   into place and prune what is no longer needed.

mod follow;
mod health;
mod lag;
mod log_thread;
mod recovery;
mod reset;
mod sink;
mod snapshot;
mod syncer;
mod tables;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use kura_log::{
    check_dir, remove_partial_snapshots, Damage, DirLock, FsyncPolicy, LogWriter, WriterOptions,
};
use kura_store::Store;
use tokio::sync::watch;

use crate::replication::backlog::Backlog;

pub use health::Health;
pub use lag::{Lag, LagLimits};
use log_thread::{LogThread, OnFailure};
pub(crate) use recovery::apply;
use recovery::{load_snapshot, replay_log, Progress};
pub use reset::SnapshotHold;
use sink::{LogSink, Msg};
use snapshot::take_snapshot;
pub use snapshot::SnapshotBusy;
use syncer::Synced;
pub(crate) use tables::clear_tables;

/// Settings of the durable mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurableConfig {
    pub dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// Bytes per log segment (`--log-file-size`).
    pub segment_size: u64,
    /// Take a snapshot once this many bytes were logged since the last one
    /// (0: never by size).
    pub snapshot_log_bytes: u64,
    /// Take a snapshot this often, if anything was logged (0: never by time).
    pub snapshot_interval: Duration,
    /// How far the log thread may fall behind before writers wait.
    pub lag: LagLimits,
    /// Bytes of the newest records kept in memory for replicas
    /// (`--repl-backlog-size`).
    pub backlog_bytes: usize,
}

/// Counters for `stats`.
#[derive(Debug, Default)]
pub struct LogStats {
    /// The last record known to be on disk.
    pub synced: AtomicU64,
    pub bytes: AtomicU64,
    pub snapshots: AtomicU64,
    /// Snapshots skipped for want of disk space.
    pub snapshots_skipped: AtomicU64,
    pub snapshot_seq: AtomicU64,
    pub snapshot_running: AtomicBool,
    /// The oldest record a connected replica still needs (`u64::MAX`:
    /// none), and the bytes of log segments kept for it at most beyond
    /// what snapshots need (`--repl-backlog-size`).
    pub retain_from: AtomicU64,
    pub retain_bytes: AtomicU64,
}

/// A running durable mode.
pub struct Durable {
    config: DurableConfig,
    sink: Arc<LogSink>,
    durable: watch::Receiver<u64>,
    lag: Arc<Lag>,
    health: Arc<Health>,
    history: parking_lot::Mutex<kura_log::History>,
    backlog: Arc<Backlog>,
    tx: mpsc::Sender<Msg>,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub stats: Arc<LogStats>,
    on_failure: Arc<OnFailure>,
    /// Held for the life of the server: one writer per data directory.
    _lock: DirLock,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Durable {
    /// Takes the data directory's lock, opens the tables (`open_tables`),
    /// recovers the store and the tables from the directory (newest usable
    /// snapshot, then the log after it), attaches the log to them and
    /// starts the log thread; returns it and the tables.
    ///
    /// # Errors
    /// The directory is in use or unreadable; the log is corrupt (the error
    /// names the file and offset); the log has a gap no snapshot covers.
    pub fn open(
        config: DurableConfig,
        store: &Arc<Store>,
        open_tables: impl FnOnce() -> anyhow::Result<crate::Tables>,
    ) -> anyhow::Result<(Durable, crate::Tables)> {
        let dir = &config.dir;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create data dir {}", dir.display()))?;
        let lock = DirLock::take(dir)?;
        // Opened under the lock: a table file in the data dir is this
        // server's alone.
        let tables = &open_tables()?;
        let history = kura_log::History::load_or_create(dir)?;
        for p in remove_partial_snapshots(dir)? {
            tracing::warn!("removed a half-written snapshot {}", p.display());
        }
        let report = check_dir(dir)?;
        match &report.log.damage {
            None => {}
            Some(Damage::TornTail { file, offset, len }) => tracing::warn!(
                "update log {} ends in a torn record (a crash mid-write): cutting {len} bytes at offset {offset}",
                file.display()
            ),
            Some(Damage::Corrupt {
                file,
                offset,
                reason,
            }) => {
                return Err(anyhow!(
                    "corrupt update log: {}, offset {offset}: {reason} (`kura log check {}` tells more; `kura log repair --truncate-corrupt` drops the records from there on)",
                    file.display(),
                    dir.display()
                ))
            }
        }
        for s in &report.snapshots {
            if let Err(why) = &s.check {
                tracing::warn!("skipping damaged snapshot {}: {why}", s.file.path.display());
            }
        }
        if let Some(gap) = &report.gap {
            return Err(anyhow!("cannot recover {}: {gap}", dir.display()));
        }
        let evictions_before = store.stats().evictions;
        let started = Instant::now();
        let mut progress = Progress::new();
        let mut after = 0;
        let mut into = tables::Replay::new(store, tables, true);
        if let Some(snap) = &report.usable {
            let (seq, n) = load_snapshot(&mut into, &snap.path, &mut progress)?;
            tracing::info!("loaded {n} entries from snapshot at record {seq}");
            after = seq;
        }
        let writer = LogWriter::open_after(
            dir,
            WriterOptions {
                segment_size: config.segment_size,
                fsync: config.fsync,
            },
            after,
        )?;
        let replayed = replay_log(dir, &mut into, after, &mut progress)?;
        let tables_unlogged = into.finish();
        let recovered = store.stats();
        tracing::info!(
            "recovered {} items from {} ({replayed} log records after the snapshot) in {:.1} s",
            recovered.curr_items,
            dir.display(),
            started.elapsed().as_secs_f64()
        );
        let evicted_in_recovery = recovered.evictions > evictions_before;
        if evicted_in_recovery {
            tracing::warn!(
                "the data did not fit in -m: {} items were evicted while loading; a snapshot will record it",
                recovered.evictions - evictions_before
            );
        }
        let last = writer.next_seq() - 1;
        let (tx, rx) = mpsc::channel();
        let lag = Arc::new(Lag::new(config.lag, last));
        let sink = Arc::new(LogSink {
            next: AtomicU64::new(writer.next_seq()),
            tx: tx.clone(),
            lag: lag.clone(),
            following: AtomicBool::new(false),
            diverged: AtomicBool::new(false),
            tables: tables.clone(),
        });
        store.attach(sink.clone());
        let (durable_tx, durable) = watch::channel(last);
        let stats = Arc::new(LogStats::default());
        stats.retain_from.store(u64::MAX, Ordering::Relaxed);
        stats
            .retain_bytes
            .store(config.backlog_bytes as u64, Ordering::Relaxed);
        stats.synced.store(last, Ordering::Relaxed);
        let on_failure = Arc::new(OnFailure::new());
        let backlog = Arc::new(Backlog::new(config.backlog_bytes, last));
        let health = Arc::new(Health::default());
        let thread = {
            let ctx = LogThread {
                on_failure: on_failure.clone(),
                writer,
                rx,
                synced: Arc::new(Synced {
                    tx: durable_tx,
                    stats: stats.clone(),
                }),
                lag: lag.clone(),
                health: health.clone(),
                stats: stats.clone(),
                store: store.clone(),
                sink: sink.clone(),
                backlog: backlog.clone(),
                config: config.clone(),
                tx: tx.clone(),
                snapshot_now: evicted_in_recovery || tables_unlogged,
                batched: 0,
                since_snapshot: 0,
            };
            std::thread::Builder::new()
                .name("kura-log".into())
                .spawn(move || ctx.run())?
        };
        let durable = Durable {
            config,
            sink,
            durable,
            lag,
            health,
            history: parking_lot::Mutex::new(history),
            backlog,
            tx,
            thread: Mutex::new(Some(thread)),
            stats,
            on_failure,
            _lock: lock,
        };
        Ok((durable, tables.clone()))
    }

    /// Sets what happens if the log cannot be written (the server stops).
    pub fn on_failure(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_failure.set(Box::new(f));
    }

    /// Before a connection acknowledges the requests that made records up
    /// to `seq`: under `--fsync always`, waits until that record is on
    /// disk; otherwise waits until it is written only when the log thread
    /// owes more than its bounds (lag.rs). False if the record never will
    /// be logged (the log thread stopped on an error).
    pub(crate) async fn settle(&self, seq: u64) -> bool {
        let always = self.config.fsync == FsyncPolicy::Always;
        if !always && !self.lag.must_wait(seq, self.next_seq()) {
            return true;
        }
        let logged = async {
            if always {
                let mut rx = self.durable.clone();
                let ok = rx.wait_for(|&s| s >= seq).await.is_ok();
                return ok;
            }
            self.lag.written_up_to(seq).await
        };
        // A log that cannot be written releases its waiters unacknowledged.
        tokio::select! {
            biased;
            ok = logged => ok,
            () = self.health.refused() => false,
        }
    }

    /// Whether the log can be written.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// What the log thread owes.
    pub fn lag(&self) -> &Lag {
        &self.lag
    }

    /// The number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.sink.next.load(Ordering::Acquire)
    }

    /// Writes and syncs everything logged so far; returns the last record
    /// on disk.
    pub fn sync(&self) -> Option<u64> {
        let (tx, rx) = mpsc::channel();
        self.tx.send(Msg::Sync(tx)).ok()?;
        rx.recv().ok()
    }

    /// Takes a snapshot now, on the calling thread; returns its path.
    ///
    /// # Errors
    /// I/O errors, or the log thread stopped.
    pub fn snapshot(&self, store: &Store) -> anyhow::Result<PathBuf> {
        Ok(self.snapshot_at(store)?.0)
    }

    /// Takes a snapshot now, on the calling thread; returns its path and
    /// the record it was taken at.
    ///
    /// # Errors
    /// I/O errors, a snapshot already being taken, or the log thread
    /// stopped.
    pub fn snapshot_at(&self, store: &Store) -> anyhow::Result<(PathBuf, u64)> {
        take_snapshot(store, &self.sink, &self.tx, &self.config.dir, &self.stats)
    }

    /// The data directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.config.dir
    }

    /// Writes and syncs the rest of the log and stops the log thread (at
    /// shutdown, after the connections are closed).
    pub fn close(&self) {
        let _ = self.tx.send(Msg::Stop);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        self.close();
    }
}
