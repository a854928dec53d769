//! The store's side of `changes.rs`: attaching the sink that hears every
//! change, reporting to it (out of line), replaying what it heard into a
//! store (recovery), and reading a shard's entries out (snapshots).

use std::hash::BuildHasher;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use crate::api::{GetOptions, Hit};
use crate::census::FlagsCensus;
use crate::changes::{Change, ChangeSink, Entry, Report};
use crate::shard::Shard;

use super::Store;

/// The store's one sink: the attached sink and the observer, each told
/// every change once it is set. A store with neither has no `Tee` at all.
#[derive(Default)]
pub(super) struct Tee {
    primary: OnceLock<Arc<dyn ChangeSink>>,
    observer: OnceLock<Arc<dyn ChangeSink>>,
}

impl ChangeSink for Tee {
    #[inline]
    fn record(&self, change: Change<'_>, report: &Report) {
        if let Some(p) = self.primary.get() {
            p.record(change, report);
        }
        if let Some(o) = self.observer.get() {
            o.record(change, report);
        }
    }
}

impl Store {
    /// Attaches the sink that hears every change from now on (see
    /// [`ChangeSink`]). A store has at most one; false if it had one.
    pub fn attach(&self, sink: Arc<dyn ChangeSink>) -> bool {
        self.add_sink(sink, |t| &t.primary)
    }

    /// Adds an observer that hears every change from now on, beside the
    /// attached sink (a server's invalidation subscriptions). A store has
    /// at most one; false if it had one. Until either is set, changes are
    /// reported to nobody and cost nothing.
    pub fn observe(&self, observer: Arc<dyn ChangeSink>) -> bool {
        self.add_sink(observer, |t| &t.observer)
    }

    /// Attaches a census that hears every entry arriving and leaving, by
    /// its flags (see [`FlagsCensus`]). Only an empty store takes one (the
    /// census could not count entries it never saw arrive), and only one:
    /// false otherwise.
    pub fn count_flags(&self, census: Arc<dyn FlagsCensus>) -> bool {
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        if guards.iter().any(|s| s.len() > 0 || s.census.is_some()) {
            return false;
        }
        for shard in &mut guards {
            shard.census = Some(Arc::clone(&census));
        }
        true
    }

    fn add_sink(
        &self,
        sink: Arc<dyn ChangeSink>,
        slot: impl Fn(&Tee) -> &OnceLock<Arc<dyn ChangeSink>>,
    ) -> bool {
        // Hold every lock so no change is half reported.
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        let tee = self.sink.get_or_init(Tee::default);
        if slot(tee).set(sink).is_err() {
            return false;
        }
        for shard in &mut guards {
            if shard.evicted.is_none() {
                shard.evicted = Some(Vec::new());
            }
        }
        true
    }

    #[inline]
    pub(super) fn sink(&self) -> Option<&dyn ChangeSink> {
        self.sink.get().map(|s| s as &dyn ChangeSink)
    }

    /// Applies a change as a sink heard it (recovery from a snapshot and
    /// the log): an entry comes back with its CAS, deadline and marks, a
    /// flush with a time is armed but never carried out by the replay
    /// itself (if it was carried out, the log says so with a flush at 0
    /// where it happened). The attached sink, if any, is not told. False
    /// when an entry did not fit.
    pub fn replay(&self, change: Change<'_>) -> bool {
        let now = self.clock.now();
        match change {
            Change::Put(e) => {
                let key = e.item.key();
                let hash = self.hasher.hash_one(key);
                let mut shard = self.cell(hash).write();
                // An entry expired by now is put back all the same: a later
                // touch in the log may have given it a new deadline. If not,
                // it stays invisible and is reclaimed like any expired one.
                let entry = Entry {
                    item: e.item.clone(),
                    cas: e.cas,
                    exptime: e.exptime,
                    stale: e.stale,
                    binary_key: e.binary_key,
                };
                let done = shard.restore(hash, entry, now);
                if let Some(evicted) = shard.evicted.as_mut() {
                    evicted.clear();
                }
                done
            }
            Change::Touch { key, exptime } => {
                let hash = self.hasher.hash_one(key);
                let mut shard = self.cell(hash).write();
                if let Some(idx) = shard.find(hash, key) {
                    // An entry with no room left for the deadline goes.
                    shard.set_exptime(hash, idx, exptime, now);
                }
                if let Some(evicted) = shard.evicted.as_mut() {
                    evicted.clear();
                }
                true
            }
            Change::Remove { key } | Change::Evict { key } => {
                let hash = self.hasher.hash_one(key);
                let mut shard = self.cell(hash).write();
                if let Some(idx) = shard.find(hash, key) {
                    shard.unlink(hash, idx);
                }
                true
            }
            Change::Flush { at } => {
                let _serial = self.flush_lock.lock();
                let epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32 + 1;
                self.flush
                    .store((u64::from(epoch) << 32) | u64::from(at), Ordering::Release);
                if at == 0 {
                    for cell in self.shards.iter() {
                        let mut shard = cell.0.write();
                        shard.flush();
                        shard.flush_epoch = epoch;
                    }
                    self.flushed_epoch.store(epoch, Ordering::Release);
                }
                true
            }
        }
    }

    /// The live entries of shard `index` (for a snapshot: the shard is
    /// locked, shared, only while the handles are cloned).
    pub fn entries(&self, index: usize) -> Vec<Entry> {
        let now = self.clock.now();
        self.apply_due_flush(now, &Report::default());
        let mut shard = self.shards[index].0.write();
        self.sync_flush(&mut shard, now);
        shard.entries(now)
    }
}

// The reporting is kept out of line, so that a store without a sink runs
// the same code on its hot paths as before it existed, but for the one test
// of an empty `OnceLock`.

#[cold]
#[inline(never)]
pub(super) fn report(
    shard: &mut Shard,
    sink: &dyn ChangeSink,
    r: &Report,
    hash: u64,
    key: &[u8],
    changed: bool,
) {
    shard.report(sink, r, hash, key, changed);
}

#[cold]
#[inline(never)]
pub(super) fn report_get(
    shard: &mut Shard,
    sink: &dyn ChangeSink,
    r: &Report,
    hash: u64,
    key: &[u8],
    opts: &GetOptions,
    hit: Option<&Hit>,
) {
    match hit {
        Some(h) if h.created => shard.report(sink, r, hash, key, true),
        Some(h) if opts.touch.is_some() => {
            shard.report_evictions(sink, r);
            let exptime = h.exptime;
            sink.record(Change::Touch { key, exptime }, r);
        }
        _ => shard.report_evictions(sink, r),
    }
}
