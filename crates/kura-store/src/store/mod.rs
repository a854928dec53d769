//! [`Store`]: the sharded cache. A key's hash picks its shard; each shard has
//! its own lock, eviction order and share of the memory limit, so threads
//! working on different keys rarely wait for each other (seed 001's
//! HashLruCache). `flush_all` with a delay is applied lazily: every shard
//! checks the flush state when it is locked and drops its entries once the
//! flush time has passed, before doing anything else (`flush.rs`). The
//! change sink's side (`sink.rs`), the configuration (`config.rs`) and the
//! totals for `stats` (`stats.rs`) have files of their own.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use foldhash::fast::{FixedState, RandomState};
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};

use crate::api::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, GetOptions, Hit, SetMode, SetOutcome,
    SetRequest,
};
use crate::changes::Report;
use crate::clock::Clock;
use crate::expiry::Expiry;
use crate::item::{Item, KEY_MAX};
use crate::shard::{Shard, SharedRead};
use nonblocking::on_flash;

mod config;
pub(crate) mod flash;
mod flush;
pub(crate) mod inspect;
mod nonblocking;
mod scan;
mod sink;
mod stats;
#[cfg(test)]
mod tests;
mod writes;

pub use config::{default_shards, StoreConfig};
pub use flash::FLASH_MAINTAIN_EVERY_US;
pub use inspect::{EntryView, EvictionWatch};
pub use nonblocking::{Got, OnFlash};
pub use scan::{Scan, ScanCursor};
use sink::{report, report_get};
pub use stats::StoreStats;
pub use writes::Writes;

/// Values at least this long are copied into their block without the
/// shard's lock held.
const COPY_UNLOCKED: usize = 16 * 1024;

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
    /// Hears every change once a sink is attached or an observer added
    /// (a durable server's update log, a server's invalidation registry).
    sink: OnceLock<sink::Tee>,
    /// The flash tier, once attached (`flash.rs`).
    flash: OnceLock<std::sync::Arc<crate::flash::Tier>>,
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
        let seed = config
            .hash_seed
            .unwrap_or_else(|| RandomState::default().hash_one(0xc0ffee_u64));
        let hasher = FixedState::with_seed(seed);
        let per_shard = config.capacity / n;
        let shards = (0..n)
            .map(|i| ShardCell(RwLock::new(Shard::new(&config, hasher, per_shard, i, bits))))
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
            flash: OnceLock::new(),
        }
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
    fn shard(&self, key: &[u8], r: &Report) -> (RwLockWriteGuard<'_, Shard>, u64, u32) {
        let hash = self.hasher.hash_one(key);
        let now = self.clock.now();
        let mut shard = self.cell(hash).write();
        if self.flush_due(&shard, now) {
            if self.sink.get().is_some() {
                drop(shard);
                self.apply_due_flush(now, r);
                shard = self.cell(hash).write();
            }
            self.sync_flush(&mut shard, now);
        }
        (shard, hash, now)
    }

    fn cell(&self, hash: u64) -> &RwLock<Shard> {
        &self.shards[((hash >> 32) & self.shard_mask) as usize].0
    }

    /// Looks up `key`, bumping it in the eviction order.
    pub fn get(&self, key: &[u8]) -> Option<Item> {
        self.get_with(key, &GetOptions::default()).map(|h| h.item)
    }

    /// Looks up `key` with the given options (touch, vivify, recache...).
    pub fn get_with(&self, key: &[u8], opts: &GetOptions) -> Option<Hit> {
        self.get_in(key, opts, &Report::default())
    }

    pub(super) fn get_in(&self, key: &[u8], opts: &GetOptions, r: &Report) -> Option<Hit> {
        if *opts != GetOptions::default() {
            // The command may change the entry: one on flash comes back
            // into RAM first.
            self.back_for_change(key, r);
            return self.lookup_in(key, opts, r, false).unwrap_or_default();
        }
        match self.lookup_in(key, opts, r, true) {
            Ok(hit) => hit,
            Err(OnFlash) => self.read_flash(key, flash::Back::Read, r),
        }
    }

    /// [`Store::get_in`] from RAM only: with `ask_flash`, a key whose value
    /// is on flash and not in RAM is [`OnFlash`], found by the same probe
    /// of the shard (a miss in RAM looks in the shard's flash map, and a
    /// get that may change the entry looks there first: it must not create
    /// or touch an entry in RAM over a record on flash). Always inlined:
    /// `get_in` costs what it did before it had a flash step.
    #[inline(always)]
    fn lookup_in(
        &self,
        key: &[u8],
        opts: &GetOptions,
        r: &Report,
        ask_flash: bool,
    ) -> Result<Option<Hit>, OnFlash> {
        let plain = *opts == GetOptions::default();
        if plain {
            // Most reads change nothing the shard lock guards: try them
            // with the lock shared first.
            let hash = self.hasher.hash_one(key);
            let now = self.clock.now();
            let shard = self.cell(hash).read();
            if !self.flush_due(&shard, now) {
                match shard.get_shared(hash, key, now) {
                    SharedRead::Hit(hit) => return Ok(Some(hit)),
                    SharedRead::Miss if ask_flash && on_flash(&shard, hash) => return Err(OnFlash),
                    SharedRead::Miss => return Ok(None),
                    SharedRead::Exclusive => {}
                }
            }
        }
        let (mut shard, hash, now) = self.shard(key, r);
        if ask_flash && !plain && on_flash(&shard, hash) && shard.find(hash, key).is_none() {
            return Err(OnFlash);
        }
        let hit = shard.get(hash, key, opts, now);
        if let Some(sink) = self.sink() {
            report_get(&mut shard, sink, r, hash, key, opts, hit.as_ref());
        }
        if hit.is_none() && ask_flash && plain && on_flash(&shard, hash) {
            return Err(OnFlash);
        }
        Ok(hit)
    }

    /// Whether `key` is present, without bumping it.
    pub fn contains(&self, key: &[u8]) -> bool {
        let (shard, hash, now) = self.shard(key, &Report::default());
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
        self.set_in(req, &Report::default())
    }

    pub(super) fn set_in(&self, req: &SetRequest<'_>, r: &Report) -> SetOutcome {
        if req.key.len() > KEY_MAX {
            return SetOutcome::NotStored;
        }
        if req.mode != SetMode::Set || req.cas.is_some() {
            // The command depends on the entry: one on flash comes back.
            self.back_for_change(req.key, r);
        }
        let prebuilt = if req.value.len() >= COPY_UNLOCKED && req.mode == SetMode::Set {
            self.prebuild(req, r)
        } else {
            None
        };
        let (mut shard, hash, now) = self.shard(req.key, r);
        let outcome = shard.set(hash, req, now, prebuilt);
        if let SetOutcome::Stored { .. } = outcome {
            // A tier that writes through takes a copy now (under the lock
            // that linked it: nobody sees the entry without it).
            shard.copy_to_flash(hash, req.key);
        }
        if let Some(sink) = self.sink() {
            let changed = matches!(outcome, SetOutcome::Stored { .. } | SetOutcome::NoMemory);
            report(&mut shard, sink, r, hash, req.key, changed);
        }
        outcome
    }

    /// A block for a large set's item, with the value copied in without
    /// the shard's lock (the block is nobody else's until linked).
    fn prebuild(&self, req: &SetRequest<'_>, r: &Report) -> Option<Item> {
        let value = [req.value];
        let item = {
            let (mut shard, hash, now) = self.shard(req.key, r);
            let exptime = req.expiry.unwrap_or(Expiry::Never).deadline(now);
            // Its CAS unique is made when it is linked: most likely one
            // that fits 4 bytes (`Shard::still_fits` checks).
            let contents = shard.contents(req.key, req.flags, &value, exptime, 0);
            let keep = shard.find(hash, req.key);
            let item = shard.alloc_unfilled(&contents, now, keep);
            if let Some(sink) = self.sink() {
                // Evictions are reported before anything else can change
                // the keys they name.
                report(&mut shard, sink, r, hash, req.key, false);
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
        self.touch_in(key, expiry, &Report::default())
    }

    pub(super) fn touch_in(&self, key: &[u8], expiry: Expiry, r: &Report) -> bool {
        let opts = GetOptions {
            touch: Some(expiry),
            ..Default::default()
        };
        self.get_in(key, &opts, r).is_some()
    }

    /// `incr`/`decr` with memcached's semantics.
    pub fn arith(&self, key: &[u8], req: &ArithRequest) -> ArithOutcome {
        self.arith_in(key, req, &Report::default())
    }

    pub(super) fn arith_in(&self, key: &[u8], req: &ArithRequest, r: &Report) -> ArithOutcome {
        self.back_for_change(key, r);
        let (mut shard, hash, now) = self.shard(key, r);
        let outcome = shard.arith(hash, key, req, now);
        if let Some(sink) = self.sink() {
            let changed = matches!(
                outcome,
                ArithOutcome::Updated { .. } | ArithOutcome::NoMemory
            );
            report(&mut shard, sink, r, hash, key, changed);
        }
        outcome
    }

    /// Removes `key`; false when it was absent.
    pub fn delete(&self, key: &[u8]) -> bool {
        self.reporting(&Report::default()).delete(key)
    }

    /// A conditional or invalidating delete.
    pub fn delete_with(&self, key: &[u8], req: &DeleteRequest) -> DeleteOutcome {
        self.delete_in(key, req, &Report::default())
    }

    pub(super) fn delete_in(&self, key: &[u8], req: &DeleteRequest, r: &Report) -> DeleteOutcome {
        let on_flash = self.flash.get().is_some() && self.delete_on_flash(key, req, r);
        let (mut shard, hash, now) = self.shard(key, r);
        let mut outcome = shard.delete(hash, key, req, now);
        if on_flash && outcome == DeleteOutcome::NotFound {
            outcome = DeleteOutcome::Deleted;
        }
        if let Some(sink) = self.sink() {
            let changed = outcome == DeleteOutcome::Deleted;
            report(&mut shard, sink, r, hash, key, changed);
        }
        outcome
    }

    /// Number of entries (including expired and flushed ones not yet
    /// reclaimed, as memcached's `curr_items` does).
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
                self.apply_due_flush(now, &Report::default());
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
}
