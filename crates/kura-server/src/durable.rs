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

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use kura_log::{
    check_dir, prune, read_snapshot, remove_partial_snapshots, Damage, FsyncPolicy, LogReader,
    LogWriter, Mutation, MutationRef, SnapshotWriter, WriterOptions,
};
use kura_store::{Change, ChangeSink, EntryRef, Item, Store};
use tokio::sync::watch;

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
}

thread_local! {
    /// The number of the last record this thread made, for `--fsync always`.
    static LAST_SEQ: Cell<u64> = const { Cell::new(0) };
}

/// The number of the last record made on this thread since the last call
/// (0 if none). A connection calls it after each request it executes.
pub(crate) fn take_last_seq() -> u64 {
    LAST_SEQ.with(|c| c.replace(0))
}

/// A change, owned: what travels to the log thread.
enum Owned {
    Put {
        item: Item,
        cas: u64,
        exptime: u32,
        stale: bool,
        binary_key: bool,
    },
    Touch(Box<[u8]>, u32),
    Remove(Box<[u8]>),
    Evict(Box<[u8]>),
    Flush(u32),
}

impl Owned {
    fn of(change: Change<'_>) -> Owned {
        match change {
            Change::Put(EntryRef {
                item,
                cas,
                exptime,
                stale,
                binary_key,
            }) => Owned::Put {
                item: item.clone(),
                cas,
                exptime,
                stale,
                binary_key,
            },
            Change::Touch { key, exptime } => Owned::Touch(key.into(), exptime),
            Change::Remove { key } => Owned::Remove(key.into()),
            Change::Evict { key } => Owned::Evict(key.into()),
            Change::Flush { at } => Owned::Flush(at),
        }
    }

    fn as_mutation(&self) -> MutationRef<'_> {
        match self {
            Owned::Put {
                item,
                cas,
                exptime,
                stale,
                binary_key,
            } => MutationRef::Set {
                key: item.key(),
                value: item.value(),
                flags: item.flags(),
                exptime: *exptime,
                cas: *cas,
                stale: *stale,
                binary_key: *binary_key,
            },
            Owned::Touch(key, exptime) => MutationRef::Touch {
                key,
                exptime: *exptime,
            },
            Owned::Remove(key) => MutationRef::Delete { key },
            Owned::Evict(key) => MutationRef::Evict { key },
            Owned::Flush(at) => MutationRef::Flush { at: *at },
        }
    }
}

enum Msg {
    Record(u64, Owned),
    /// Write and sync everything received, then answer with the number of
    /// the last record on disk.
    Sync(mpsc::Sender<u64>),
    Stop,
}

/// The store's change sink: numbers changes and sends them to the log
/// thread.
pub struct LogSink {
    next: AtomicU64,
    tx: mpsc::Sender<Msg>,
    /// Whether connections track their record numbers (`--fsync always`).
    track: bool,
}

impl ChangeSink for LogSink {
    fn record(&self, change: Change<'_>) {
        let seq = self.next.fetch_add(1, Ordering::AcqRel);
        if self.track {
            LAST_SEQ.with(|c| c.set(seq));
        }
        // A closed channel means the log thread stopped on an I/O error;
        // it said so, and the server is stopping.
        let _ = self.tx.send(Msg::Record(seq, Owned::of(change)));
    }
}

/// Counters for `stats`.
#[derive(Debug, Default)]
pub struct LogStats {
    /// The last record written to the file.
    pub written: AtomicU64,
    /// The last record known to be on disk.
    pub synced: AtomicU64,
    pub bytes: AtomicU64,
    pub snapshots: AtomicU64,
    pub snapshot_seq: AtomicU64,
    pub snapshot_running: AtomicBool,
}

/// A running durable mode.
pub struct Durable {
    config: DurableConfig,
    sink: Arc<LogSink>,
    durable: watch::Receiver<u64>,
    tx: mpsc::Sender<Msg>,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub stats: Arc<LogStats>,
    on_failure: Arc<OnFailure>,
    /// Held for the life of the server: one server per data directory.
    _lock: File,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Durable {
    /// Recovers `store` from the data directory (newest usable snapshot,
    /// then the log after it), attaches the log to it and starts the log
    /// thread.
    ///
    /// # Errors
    /// The directory is in use or unreadable; the log is corrupt (the error
    /// names the file and offset); the log has a gap no snapshot covers.
    pub fn open(config: DurableConfig, store: &Arc<Store>) -> anyhow::Result<Durable> {
        let dir = &config.dir;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create data dir {}", dir.display()))?;
        let lock_path = dir.join("LOCK");
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        if lock.try_lock().is_err() {
            return Err(anyhow!(
                "data dir {} is in use by another kura server",
                dir.display()
            ));
        }
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
        if let Some(snap) = &report.usable {
            tracing::info!("loading snapshot {}", snap.path.display());
            let (seq, n) = read_snapshot(&snap.path, |r| {
                apply(store, &r.mutation);
                progress.tick("snapshot entries");
            })?;
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
        let mut replayed = 0u64;
        for r in LogReader::from_seq(dir, after + 1)? {
            let r = r?;
            apply(store, &r.mutation);
            replayed += 1;
            progress.tick("log records");
        }
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
        let sink = Arc::new(LogSink {
            next: AtomicU64::new(writer.next_seq()),
            tx: tx.clone(),
            track: config.fsync == FsyncPolicy::Always,
        });
        store.attach(sink.clone());
        let (durable_tx, durable) = watch::channel(last);
        let stats = Arc::new(LogStats::default());
        stats.written.store(last, Ordering::Relaxed);
        stats.synced.store(last, Ordering::Relaxed);
        let on_failure = Arc::new(OnFailure::new());
        let thread = {
            let ctx = LogThread {
                on_failure: on_failure.clone(),
                writer,
                rx,
                durable: durable_tx,
                stats: stats.clone(),
                store: store.clone(),
                sink: sink.clone(),
                config: config.clone(),
                tx: tx.clone(),
                snapshot_now: evicted_in_recovery,
            };
            std::thread::Builder::new()
                .name("kura-log".into())
                .spawn(move || ctx.run())?
        };
        Ok(Durable {
            config,
            sink,
            durable,
            tx,
            thread: Mutex::new(Some(thread)),
            stats,
            on_failure,
            _lock: lock,
        })
    }

    /// Sets what happens if the log cannot be written (the server stops).
    pub fn on_failure(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_failure.set(Box::new(f));
    }

    /// The fsync policy.
    pub fn fsync(&self) -> FsyncPolicy {
        self.config.fsync
    }

    /// Waits until record `seq` is on disk; false if it never will be (the
    /// log thread stopped on an error).
    pub(crate) async fn wait_synced(&self, seq: u64) -> bool {
        let mut rx = self.durable.clone();
        let ok = rx.wait_for(|&s| s >= seq).await.is_ok();
        ok
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
        take_snapshot(store, &self.sink, &self.tx, &self.config.dir, &self.stats)
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

/// Applies a recovered record to the store.
fn apply(store: &Store, m: &Mutation) {
    match m {
        Mutation::Set {
            key,
            value,
            flags,
            exptime,
            cas,
            stale,
            binary_key,
        } => {
            let item = Item::new(key, *flags, value);
            store.replay(Change::Put(EntryRef {
                item: &item,
                cas: *cas,
                exptime: *exptime,
                stale: *stale,
                binary_key: *binary_key,
            }));
        }
        Mutation::Delete { key } => {
            store.replay(Change::Remove { key });
        }
        Mutation::Evict { key } => {
            store.replay(Change::Evict { key });
        }
        Mutation::Touch { key, exptime } => {
            store.replay(Change::Touch {
                key,
                exptime: *exptime,
            });
        }
        Mutation::Flush { at } => {
            store.replay(Change::Flush { at: *at });
        }
    }
}

/// Logs progress about once a second while a large data dir loads.
struct Progress {
    count: u64,
    last: Instant,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            count: 0,
            last: Instant::now(),
        }
    }

    fn tick(&mut self, what: &str) {
        self.count += 1;
        if self.count.is_multiple_of(4096) && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            tracing::info!("loading: {} {what} so far", self.count);
        }
    }
}

struct LogThread {
    writer: LogWriter,
    rx: mpsc::Receiver<Msg>,
    durable: watch::Sender<u64>,
    stats: Arc<LogStats>,
    store: Arc<Store>,
    sink: Arc<LogSink>,
    config: DurableConfig,
    tx: mpsc::Sender<Msg>,
    snapshot_now: bool,
    on_failure: Arc<OnFailure>,
}

/// What to do when the log cannot be written: stop the server.
type OnFailure = OnceLock<Box<dyn Fn() + Send + Sync>>;

impl LogThread {
    fn run(mut self) {
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

/// Writes a snapshot of `store` into `dir`, then prunes what it makes
/// unnecessary. Runs beside the writers (see the module documentation).
fn take_snapshot(
    store: &Store,
    sink: &LogSink,
    tx: &mpsc::Sender<Msg>,
    dir: &Path,
    stats: &LogStats,
) -> anyhow::Result<PathBuf> {
    if stats.snapshot_running.swap(true, Ordering::AcqRel) {
        return Err(anyhow!("a snapshot is already being taken"));
    }
    let result = (|| {
        // Every record up to `seq` was made under a shard lock that is
        // released by the time that shard is read below.
        let seq = sink.next.load(Ordering::Acquire) - 1;
        let started = Instant::now();
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
        let pruned = prune(dir)?;
        stats.snapshots.fetch_add(1, Ordering::Relaxed);
        stats.snapshot_seq.store(seq, Ordering::Relaxed);
        tracing::info!(
            "snapshot {} ({n} entries, record {seq}) in {:.1} s; removed {} old snapshots and {} log files",
            path.display(),
            started.elapsed().as_secs_f64(),
            pruned.snapshots.len(),
            pruned.segments.len()
        );
        Ok(path)
    })();
    stats.snapshot_running.store(false, Ordering::Release);
    result
}
