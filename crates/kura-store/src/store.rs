//! [`Store`]: the sharded cache. A key's hash picks its shard; each shard has
//! its own lock, eviction order and share of the memory limit, so threads
//! working on different keys rarely wait for each other (seed 001's
//! HashLruCache). `flush_all` with a delay is applied lazily: every shard
//! checks the flush state when it is locked and drops its entries once the
//! flush time has passed, before doing anything else.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use foldhash::fast::{FixedState, RandomState};
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

use crate::changes::{Change, ChangeSink, Entry};
use crate::clock::Clock;
use crate::eviction::EvictionKind;
use crate::expiry::Expiry;
use crate::item::{Item, KEY_MAX};
use crate::ops::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, GetOptions, Hit, SetMode, SetOutcome,
    SetRequest,
};
use crate::shard::{Shard, ShardStats, SharedRead};

/// Values at least this long are copied into their block without the
/// shard's lock held.
const COPY_UNLOCKED: usize = 16 * 1024;

/// How a [`Store`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// The memory limit in bytes, counting keys, values and per-entry
    /// bookkeeping. Default 64 MiB (memcached's `-m 64`).
    pub capacity: usize,
    /// Number of shards, rounded up to a power of two; 0 picks
    /// [`default_shards`] for the machine's parallelism.
    pub shards: usize,
    /// The eviction policy of every shard.
    pub eviction: EvictionKind,
    /// Evict when full (default). When false, a store that does not fit
    /// fails with [`SetOutcome::NoMemory`] (memcached's `-M`).
    pub evict: bool,
    /// Give items CAS uniques (default). When false every CAS is 0 (`-C`).
    pub cas: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            capacity: 64 * 1024 * 1024,
            shards: 0,
            eviction: EvictionKind::Lru,
            evict: true,
            cas: true,
        }
    }
}

impl StoreConfig {
    /// The default configuration with a memory limit of `bytes`.
    pub fn with_capacity(bytes: usize) -> Self {
        StoreConfig {
            capacity: bytes,
            ..Default::default()
        }
    }
}

/// Shards for `threads` threads: four per thread, as a power of two, so
/// that two threads rarely want the same lock.
pub fn default_shards(threads: usize) -> usize {
    (threads.max(1) * 4).next_power_of_two().min(1024)
}

/// Totals over all shards, for `stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub curr_items: u64,
    pub bytes: u64,
    pub limit_maxbytes: u64,
    pub total_items: u64,
    pub evictions: u64,
    pub evicted_nonzero: u64,
    pub evicted_unfetched: u64,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub crawler_reclaimed: u64,
    pub get_expired: u64,
    pub out_of_memory: u64,
    pub shards: u64,
    /// Bytes of the shards' hash indexes (memcached's `hash_bytes`).
    pub hash_bytes: u64,
    /// Slots of the shards' hash indexes, all together.
    pub hash_slots: u64,
    /// Whether any shard's index is moving to a larger table.
    pub hash_is_expanding: bool,
    /// Bytes the eviction policies hold outside the entries (S3-FIFO's
    /// ghost queue and small queue's ring of ids), which are charged per
    /// entry (`EvictionKind::entry_bytes`), so not part of `bytes`.
    pub policy_bytes: u64,
}

/// A shard and its lock, on a cache line of its own. Plain reads that
/// change nothing but the eviction policy's atomic bits share the lock;
/// everything else takes it exclusively.
#[repr(align(128))]
struct ShardCell(RwLock<Shard>);

/// The embeddable cache: safe to share between threads (`Arc<Store>`).
pub struct Store {
    shards: Box<[ShardCell]>,
    shard_mask: u64,
    hasher: FixedState,
    clock: Clock,
    /// `epoch << 32 | deadline` of the newest flush.
    flush: AtomicU64,
    flush_lock: Mutex<()>,
    /// With a sink: the newest flush epoch carried out in every shard.
    flushed_epoch: AtomicU32,
    capacity: AtomicU64,
    config: StoreConfig,
    /// Hears every change once attached (a durable server's update log).
    sink: OnceLock<Arc<dyn ChangeSink>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new(StoreConfig::default())
    }
}

impl Store {
    /// Builds a store. Each shard reserves 1 GiB of address space for its
    /// arena (memory is used only as items fill it); a capacity above what
    /// the shards' arenas hold gets more shards.
    ///
    /// # Panics
    /// When the operating system refuses the address space (a process
    /// limited with `ulimit -v`, for instance).
    pub fn new(config: StoreConfig) -> Store {
        let n = if config.shards == 0 {
            default_shards(std::thread::available_parallelism().map_or(1, |p| p.get()))
        } else {
            config.shards.next_power_of_two()
        };
        // Enough shards that each one's share fits in its arena.
        let n = n.max(
            config
                .capacity
                .div_ceil(crate::shard::max_limit())
                .next_power_of_two(),
        );
        let bits = n.trailing_zeros();
        // A random seed keeps an attacker from choosing colliding keys.
        let hasher = FixedState::with_seed(RandomState::default().hash_one(0xc0ffee_u64));
        let per_shard = config.capacity / n;
        let shards = (0..n)
            .map(|i| {
                ShardCell(RwLock::new(Shard::new(
                    config.eviction,
                    hasher,
                    per_shard,
                    config.evict,
                    i,
                    bits,
                    config.cas,
                )))
            })
            .collect();
        Store {
            shards,
            shard_mask: (n - 1) as u64,
            hasher,
            clock: Clock::new(),
            flush: AtomicU64::new(0),
            flush_lock: Mutex::new(()),
            flushed_epoch: AtomicU32::new(0),
            capacity: AtomicU64::new(config.capacity as u64),
            config,
            sink: OnceLock::new(),
        }
    }

    /// Attaches the sink that hears every change from now on (see
    /// [`ChangeSink`]). A store has at most one; false if it had one.
    pub fn attach(&self, sink: Arc<dyn ChangeSink>) -> bool {
        // Hold every lock so no change is half reported.
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        if self.sink.set(sink).is_err() {
            return false;
        }
        for shard in &mut guards {
            shard.evicted = Some(Vec::new());
        }
        true
    }

    fn sink(&self) -> Option<&dyn ChangeSink> {
        self.sink.get().map(|s| &**s)
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
                    shard.set_exptime(idx, exptime);
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
                        shard.clear();
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
        self.apply_due_flush(now);
        let mut shard = self.shards[index].0.write();
        self.sync_flush(&mut shard, now);
        shard.entries(now)
    }

    /// The Unix time of a delayed `flush_all` not yet carried out.
    pub fn pending_flush(&self) -> Option<u32> {
        let state = self.flush.load(Ordering::Acquire);
        let (epoch, deadline) = ((state >> 32) as u32, state as u32);
        let now = self.clock.now();
        let pending = self.shards.iter().any(|c| c.0.read().flush_epoch != epoch);
        (pending && deadline > now).then_some(deadline)
    }

    /// The configuration the store was built with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The store's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The current time in Unix seconds, as the store sees it.
    pub fn now(&self) -> u32 {
        self.clock.now()
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Locks the shard owning `key`, applying a due flush first.
    fn shard(&self, key: &[u8]) -> (RwLockWriteGuard<'_, Shard>, u64, u32) {
        let hash = self.hasher.hash_one(key);
        let now = self.clock.now();
        let mut shard = self.cell(hash).write();
        if self.flush_due(&shard, now) {
            if self.sink.get().is_some() {
                drop(shard);
                self.apply_due_flush(now);
                shard = self.cell(hash).write();
            }
            self.sync_flush(&mut shard, now);
        }
        (shard, hash, now)
    }

    fn cell(&self, hash: u64) -> &RwLock<Shard> {
        &self.shards[((hash >> 32) & self.shard_mask) as usize].0
    }

    /// Whether a flush is due that `shard` has not applied yet.
    fn flush_due(&self, shard: &Shard, now: u32) -> bool {
        let state = self.flush.load(Ordering::Acquire);
        (state >> 32) as u32 != shard.flush_epoch && now >= state as u32
    }

    fn sync_flush(&self, shard: &mut Shard, now: u32) {
        if self.flush_due(shard, now) {
            shard.clear();
            shard.flush_epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32;
        }
    }

    /// Looks up `key`, bumping it in the eviction order.
    pub fn get(&self, key: &[u8]) -> Option<Item> {
        self.get_with(key, &GetOptions::default()).map(|h| h.item)
    }

    /// Looks up `key` with the given options (touch, vivify, recache...).
    pub fn get_with(&self, key: &[u8], opts: &GetOptions) -> Option<Hit> {
        if *opts == GetOptions::default() {
            // Most reads change nothing the shard lock guards: try them
            // with the lock shared first.
            let hash = self.hasher.hash_one(key);
            let now = self.clock.now();
            let shard = self.cell(hash).read();
            if !self.flush_due(&shard, now) {
                match shard.get_shared(hash, key, now) {
                    SharedRead::Hit(hit) => return Some(hit),
                    SharedRead::Miss => return None,
                    SharedRead::Exclusive => {}
                }
            }
        }
        let (mut shard, hash, now) = self.shard(key);
        let Some(sink) = self.sink() else {
            return shard.get(hash, key, opts, now);
        };
        let hit = shard.get(hash, key, opts, now);
        report_get(&mut shard, sink, hash, key, opts, hit.as_ref());
        hit
    }

    /// Whether `key` is present, without bumping it.
    pub fn contains(&self, key: &[u8]) -> bool {
        let (shard, hash, now) = self.shard(key);
        shard.contains(hash, key, now)
    }

    /// Stores `value` under `key` (a plain set), returning the outcome.
    pub fn insert(&self, key: &[u8], value: &[u8], expiry: Expiry) -> SetOutcome {
        self.set(&SetRequest {
            expiry: Some(expiry),
            ..SetRequest::new(key, value)
        })
    }

    /// Carries out a storage request. Keys longer than [`KEY_MAX`] bytes
    /// are not stored.
    pub fn set(&self, req: &SetRequest<'_>) -> SetOutcome {
        if req.key.len() > KEY_MAX {
            return SetOutcome::NotStored;
        }
        let prebuilt = if req.value.len() >= COPY_UNLOCKED && req.mode == SetMode::Set {
            self.prebuild(req)
        } else {
            None
        };
        let (mut shard, hash, now) = self.shard(req.key);
        let outcome = shard.set(hash, req, now, prebuilt);
        if let Some(sink) = self.sink() {
            let changed = matches!(outcome, SetOutcome::Stored { .. } | SetOutcome::NoMemory);
            report(&mut shard, sink, hash, req.key, changed);
        }
        outcome
    }

    /// A block for a large set's item, with the value copied in without
    /// the shard's lock (the block is nobody else's until linked).
    fn prebuild(&self, req: &SetRequest<'_>) -> Option<Item> {
        let value = [req.value];
        let item = {
            let (mut shard, hash, now) = self.shard(req.key);
            let contents = shard.contents(req.key, req.flags, &value);
            let keep = shard.find(hash, req.key);
            let item = shard.alloc_unfilled(&contents, now, keep);
            if let Some(sink) = self.sink() {
                // Evictions are reported before anything else can change
                // the keys they name.
                report(&mut shard, sink, hash, req.key, false);
            }
            item
        }?;
        // SAFETY: a block just allocated for this request, not linked, and
        // this is its only handle.
        unsafe { item.fill_value(req.value) };
        Some(item)
    }

    /// Sets a new expiry on `key`; false when it is absent.
    pub fn touch(&self, key: &[u8], expiry: Expiry) -> bool {
        let opts = GetOptions {
            touch: Some(expiry),
            ..Default::default()
        };
        self.get_with(key, &opts).is_some()
    }

    /// `incr`/`decr` with memcached's semantics.
    pub fn arith(&self, key: &[u8], req: &ArithRequest) -> ArithOutcome {
        let (mut shard, hash, now) = self.shard(key);
        let outcome = shard.arith(hash, key, req, now);
        if let Some(sink) = self.sink() {
            let changed = matches!(
                outcome,
                ArithOutcome::Updated { .. } | ArithOutcome::NoMemory
            );
            report(&mut shard, sink, hash, key, changed);
        }
        outcome
    }

    /// Removes `key`; false when it was absent.
    pub fn delete(&self, key: &[u8]) -> bool {
        self.delete_with(key, &DeleteRequest::default()) == DeleteOutcome::Deleted
    }

    /// A conditional or invalidating delete.
    pub fn delete_with(&self, key: &[u8], req: &DeleteRequest) -> DeleteOutcome {
        let (mut shard, hash, now) = self.shard(key);
        let outcome = shard.delete(hash, key, req, now);
        if let Some(sink) = self.sink() {
            report(
                &mut shard,
                sink,
                hash,
                key,
                outcome == DeleteOutcome::Deleted,
            );
        }
        outcome
    }

    /// Drops every entry now, or at `at` (a delayed `flush_all`): entries
    /// stored after that point survive. A new flush replaces a pending one.
    pub fn flush(&self, at: Option<Expiry>) {
        let _serial = self.flush_lock.lock();
        let now = self.clock.now();
        let deadline = match at.map(|e| e.deadline(now)) {
            None | Some(0) => 0,
            Some(d) if d <= now => 0,
            Some(d) => d,
        };
        let epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32 + 1;
        let state = (u64::from(epoch) << 32) | u64::from(deadline);
        let Some(sink) = self.sink() else {
            // Finish a flush that is due before a new one replaces it.
            self.sync_all(now);
            self.flush.store(state, Ordering::Release);
            if deadline == 0 {
                self.sync_all(now);
            }
            return;
        };
        // With a sink, every shard is locked while the flush is reported
        // and (when immediate) carried out, so it falls between the same
        // changes in the report as in the store.
        let mut guards = self.lock_all();
        self.flush_due_locked(&mut guards, sink, now);
        sink.record(Change::Flush { at: deadline });
        self.flush.store(state, Ordering::Release);
        if deadline == 0 {
            for shard in &mut guards {
                self.sync_flush(shard, now);
            }
            self.flushed_epoch.store(epoch, Ordering::Release);
        }
    }

    fn lock_all(&self) -> Vec<RwLockWriteGuard<'_, Shard>> {
        self.shards.iter().map(|c| c.0.write()).collect()
    }

    /// With a sink attached, a flush that is due is carried out in every
    /// shard at once, with every lock held, and reported as one change:
    /// changes reported before it were all dropped by it, changes after it
    /// all survive. (Without a sink each shard applies it lazily.)
    fn apply_due_flush(&self, now: u32) {
        let Some(sink) = self.sink() else {
            return;
        };
        let state = self.flush.load(Ordering::Acquire);
        if (state >> 32) as u32 == self.flushed_epoch.load(Ordering::Acquire) || now < state as u32
        {
            return;
        }
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        self.flush_due_locked(&mut guards, sink, now);
    }

    fn flush_due_locked(
        &self,
        guards: &mut [RwLockWriteGuard<'_, Shard>],
        sink: &dyn ChangeSink,
        now: u32,
    ) {
        if guards.iter().any(|s| self.flush_due(s, now)) {
            sink.record(Change::Flush { at: 0 });
            for shard in guards.iter_mut() {
                self.sync_flush(shard, now);
            }
            let epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32;
            self.flushed_epoch.store(epoch, Ordering::Release);
        }
    }

    fn sync_all(&self, now: u32) {
        for cell in self.shards.iter() {
            self.sync_flush(&mut cell.0.write(), now);
        }
    }

    /// Number of entries (including expired ones not yet reclaimed).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|c| c.0.read().len()).sum()
    }

    /// True when the store holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory limit in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed) as usize
    }

    /// Changes the memory limit; shards over their new share evict on their
    /// next store.
    pub fn set_capacity(&self, bytes: usize) {
        self.capacity.store(bytes as u64, Ordering::Relaxed);
        let per_shard = bytes / self.shards.len();
        for cell in self.shards.iter() {
            cell.0.write().set_limit(per_shard);
        }
    }

    /// One pass of the reaper over every shard: unlinks expired entries,
    /// locking each shard for at most `batch` blocks at a time. Returns the
    /// number of entries removed. A shard where nothing can have expired
    /// (no deadline has passed since its last pass) is not walked.
    pub fn reap(&self, batch: usize) -> usize {
        let mut removed = 0;
        for cell in self.shards.iter() {
            // Until the shard's walk ends: a pass ends at the arena's end,
            // so one that began mid-arena (making room walks too) is
            // followed by a whole one.
            let mut fresh = None;
            let mut passes = 0;
            loop {
                let now = self.clock.now();
                self.apply_due_flush(now);
                let mut shard = cell.0.write();
                self.sync_flush(&mut shard, now);
                let from_start = *fresh.get_or_insert_with(|| shard.walk_at_start());
                let (_, gone, done) = shard.reap(now, batch.max(1));
                removed += gone;
                if done {
                    passes += 1;
                    if from_start || passes == 2 {
                        break;
                    }
                }
            }
        }
        removed
    }

    /// Totals for `stats`.
    pub fn stats(&self) -> StoreStats {
        let mut s = StoreStats {
            limit_maxbytes: self.capacity() as u64,
            shards: self.shards.len() as u64,
            ..Default::default()
        };
        for cell in self.shards.iter() {
            let shard = cell.0.read();
            let st = shard.stats;
            s.curr_items += shard.len() as u64;
            s.bytes += shard.used as u64;
            s.total_items += st.total_items;
            s.evictions += st.evictions;
            s.evicted_nonzero += st.evicted_nonzero;
            s.evicted_unfetched += st.evicted_unfetched;
            s.reclaimed += st.reclaimed;
            s.expired_unfetched += st.expired_unfetched;
            s.crawler_reclaimed += st.crawler_reclaimed;
            s.get_expired += st.get_expired;
            s.out_of_memory += st.out_of_memory;
            let (bytes, slots, growing) = shard.index_stats();
            s.hash_bytes += bytes as u64;
            s.hash_slots += slots as u64;
            s.hash_is_expanding |= growing;
            s.policy_bytes += shard.policy_bytes() as u64;
        }
        s
    }

    /// Zeroes the counters (`stats reset`); items and bytes are kept.
    pub fn reset_stats(&self) {
        for cell in self.shards.iter() {
            cell.0.write().stats = ShardStats::default();
        }
    }
}

// The reporting is kept out of line, so that a store without a sink runs
// the same code on its hot paths as before it existed, but for the one test
// of an empty `OnceLock`.

#[cold]
#[inline(never)]
fn report(shard: &mut Shard, sink: &dyn ChangeSink, hash: u64, key: &[u8], changed: bool) {
    shard.report(sink, hash, key, changed);
}

#[cold]
#[inline(never)]
fn report_get(
    shard: &mut Shard,
    sink: &dyn ChangeSink,
    hash: u64,
    key: &[u8],
    opts: &GetOptions,
    hit: Option<&Hit>,
) {
    match hit {
        Some(h) if h.created => shard.report(sink, hash, key, true),
        Some(h) if opts.touch.is_some() => {
            shard.report_evictions(sink);
            sink.record(Change::Touch {
                key,
                exptime: h.exptime,
            });
        }
        _ => shard.report_evictions(sink),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_capacity_gets_enough_shards_for_its_arenas() {
        let capacity = 6 << 30;
        let s = Store::new(StoreConfig {
            shards: 2,
            ..StoreConfig::with_capacity(capacity)
        });
        let n = s.shard_count();
        assert!(
            n.is_power_of_two() && capacity / n <= crate::shard::max_limit(),
            "{n}"
        );
        s.insert(b"k", &[7; 1000], Expiry::Never);
        assert_eq!(s.get(b"k").unwrap().value(), &[7; 1000][..]);
        assert_eq!(s.stats().limit_maxbytes, capacity as u64);
    }

    #[test]
    fn a_repeated_plain_read_shares_the_lock_and_answers_alike() {
        for eviction in EvictionKind::ALL {
            let s = Store::new(StoreConfig {
                shards: 1,
                eviction,
                ..StoreConfig::default()
            });
            s.insert(b"k", b"v", Expiry::In(100));
            s.insert(b"other", b"w", Expiry::Never);
            let hash = s.hasher.hash_one(b"k");
            // Never fetched: the first read needs the lock exclusive.
            let now = s.now();
            let first = s.cell(hash).read().get_shared(hash, b"k", now);
            assert!(matches!(first, SharedRead::Exclusive), "{eviction}");
            // The clock may tick between the two reads; try again if so.
            let shared = (0..3)
                .find_map(|_| {
                    let now = s.now();
                    s.get(b"k");
                    (s.now() == now).then(|| s.cell(hash).read().get_shared(hash, b"k", now))
                })
                .expect("the clock stood still for a moment");
            let exclusive = s
                .get_with(
                    b"k",
                    &GetOptions {
                        stale_token: true,
                        ..Default::default()
                    },
                )
                .unwrap();
            let fields = |h: &Hit| {
                (
                    h.item.clone(),
                    h.cas,
                    h.exptime,
                    h.exptime_before,
                    h.fetched,
                    h.stale,
                    h.won,
                    h.token_sent,
                    h.created,
                    h.binary_key,
                )
            };
            match shared {
                // LRU and TinyLFU move entries on a read, so they share
                // the lock only when there is nothing to move.
                SharedRead::Hit(hit) => assert_eq!(fields(&hit), fields(&exclusive)),
                SharedRead::Exclusive => assert!(
                    matches!(eviction, EvictionKind::TinyLfu | EvictionKind::Lru),
                    "{eviction}"
                ),
                SharedRead::Miss => panic!("{eviction}: miss"),
            }
            let now = s.now();
            let miss = s.cell(hash).read().get_shared(hash, b"absent", now);
            assert!(matches!(miss, SharedRead::Miss));
        }
    }
}
