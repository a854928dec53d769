//! One shard: a hash index of item blocks in the shard's arena, an
//! eviction policy and a byte budget, all behind the shard's lock. An
//! entry is one block (item.rs): key, value, flags, CAS, deadline, marks and
//! the policy's state together, named by its offset in the arena; the index
//! holds only those offsets. The operations in `ops.rs` are built from the
//! few primitives of this module and its parts: find (here), allocate and
//! make room (`room.rs`), put (link a new entry or a new version of one),
//! overwrite in place and unlink (`link.rs`), and the sweeps that clear the
//! shard or reap its expired entries (`sweep.rs`).

use std::hash::BuildHasher;
use std::sync::atomic::AtomicU8;

use foldhash::fast::FixedState;

use crate::arena::{Arena, UNIT};
use crate::eviction::{Entries, EvictionPolicy, Policy};
use crate::expiry::is_expired;
use crate::index::Index;
use crate::item::{CasScheme, Item, Meta, FETCHED};
use crate::store::StoreConfig;

/// Bytes charged per entry for its index slot (4 bytes and a control byte
/// in a table kept between 7/10 and 7/8 full: 5.7 to 7.2 bytes), beyond its
/// block and the policy's own share.
const INDEX_BYTES: usize = 8;

/// What a read under the shared lock found.
pub(crate) enum SharedRead {
    Hit(crate::api::Hit),
    Miss,
    /// The read has to change the shard: retry with the lock exclusive.
    Exclusive,
}

/// Counters kept under the shard lock and summed for `stats`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ShardStats {
    pub total_items: u64,
    pub evictions: u64,
    pub evicted_nonzero: u64,
    pub evicted_unfetched: u64,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub crawler_reclaimed: u64,
    pub get_expired: u64,
    /// Lookups that met an entry a flush had dropped (`get_flushed`).
    pub get_flushed: u64,
    pub out_of_memory: u64,
}

/// The policy's view of the blocks (its byte and links in each) and of
/// the index.
struct Blocks<'a> {
    arena: &'a Arena,
    hasher: &'a FixedState,
    index: &'a Index,
}

/// The metadata of the block at `off` in `arena`.
#[inline]
fn meta(arena: &Arena, off: u32) -> Meta<'_> {
    // SAFETY: callers pass offsets of live blocks (from the index, the
    // policy, a walk, or a block they allocated) and hold the shard's lock.
    unsafe { Meta::new(arena.ptr(off), arena.cas) }
}

/// A [`Blocks`] view of a shard's fields, borrowing only those two (so the
/// policy can be borrowed mutably beside it).
macro_rules! blocks {
    ($shard:expr) => {
        Blocks {
            arena: &$shard.arena,
            hasher: &$shard.hasher,
            index: &$shard.index,
        }
    };
}

impl Entries for Blocks<'_> {
    fn byte(&self, id: u32) -> &AtomicU8 {
        meta(self.arena, id).policy()
    }
    fn links(&self, id: u32) -> [u32; 2] {
        meta(self.arena, id).links()
    }
    fn set_links(&mut self, id: u32, links: [u32; 2]) {
        meta(self.arena, id).set_links(links);
    }
    fn hash(&self, id: u32) -> u64 {
        self.hasher.hash_one(meta(self.arena, id).key())
    }
    fn positions(&self) -> usize {
        self.index.positions()
    }
    fn at(&self, pos: usize) -> Option<u32> {
        self.index.at(pos)
    }
}

pub(crate) mod classes;
mod flushed;
mod link;
mod room;
mod scan;
mod sweep;
#[cfg(test)]
mod tests;

use room::growth_step;
pub(crate) use room::max_limit;

pub(crate) struct Shard {
    /// Arena offsets of the linked entries' blocks, by key hash.
    index: Index,
    arena: Arena,
    policy: Policy,
    /// Bytes charged per entry besides its block: [`INDEX_BYTES`] and the
    /// policy's share.
    entry_overhead: usize,
    /// Whether blocks have room for the policy's links.
    links: bool,
    hasher: FixedState,
    /// Bytes charged for the entries linked now.
    pub(crate) used: usize,
    pub(crate) limit: usize,
    /// Whether to evict when full (`false`: fail stores instead, like `-M`).
    evict: bool,
    /// Entries with a nonzero exptime, so eviction only looks for expired
    /// entries when there can be some.
    with_ttl: usize,
    /// No linked entry expires before this Unix time (a lower bound;
    /// `u32::MAX` when none can), so making room and the reaper look for
    /// expired entries only when there can be some.
    expiry_floor: u32,
    /// The earliest deadline seen by the reaper's current pass over the
    /// blocks, or given since it began; the new `expiry_floor` when the
    /// pass ends.
    pass_floor: u32,
    /// The next CAS unique's sequence number (the scheme is the arena's,
    /// which its blocks are read with).
    cas_next: u64,
    cas_enabled: bool,
    pub(crate) flush_epoch: u32,
    /// Entries dropped by flushes, not reclaimed yet (`flushed.rs`).
    flushed: flushed::FlushedQueue,
    pub(crate) stats: ShardStats,
    /// Items evicted by the operation under way, kept only while a change
    /// sink is attached (see `changes.rs`), which hears of them before the
    /// lock is released.
    pub(crate) evicted: Option<Vec<Item>>,
    /// Hears entries arriving and leaving by flags, once one is attached
    /// (`census.rs`).
    pub(crate) census: Option<std::sync::Arc<dyn crate::census::FlagsCensus>>,
    /// What is held and counted per size class (`classes.rs`).
    pub(crate) classes: classes::Classes,
    /// Hears of entries evicted, once one is attached (`inspect.rs`).
    pub(crate) eviction_watch: Option<std::sync::Arc<dyn crate::EvictionWatch>>,
    /// The keys whose values are on flash, once a tier is attached
    /// (`flash/index.rs`).
    pub(crate) flash: Option<Box<crate::flash::index::ShardFlash>>,
}

impl Shard {
    /// Shard number `index` of `1 << shard_bits`, with a budget of `limit`
    /// bytes, built as `config` asks (policy, `-M`, `-C`, `-L`).
    pub(crate) fn new(
        config: &StoreConfig,
        hasher: FixedState,
        limit: usize,
        index: usize,
        shard_bits: u32,
    ) -> Shard {
        let kind = config.eviction;
        let limit = limit.min(max_limit());
        let mut arena = Arena::new(growth_step(limit), config.huge_pages);
        arena.cas = CasScheme {
            shift: shard_bits,
            index: index as u64,
        };
        Shard {
            index: Index::new(config.huge_pages),
            arena,
            policy: Policy::new(kind),
            entry_overhead: INDEX_BYTES + kind.entry_bytes(),
            links: kind.links(),
            hasher,
            used: 0,
            limit,
            evict: config.evict,
            with_ttl: 0,
            expiry_floor: u32::MAX,
            pass_floor: u32::MAX,
            cas_next: 1,
            cas_enabled: config.cas,
            flush_epoch: 0,
            flushed: Default::default(),
            stats: ShardStats::default(),
            evicted: None,
            census: None,
            classes: Default::default(),
            eviction_watch: None,
            flash: None,
        }
    }

    /// Entries held: the live ones and the flushed ones not reclaimed yet
    /// (which, as in memcached, still count in `curr_items`).
    pub(crate) fn len(&self) -> usize {
        self.index.len() + self.flushed_len()
    }

    /// The index's memory, slots and whether it is growing.
    pub(crate) fn index_stats(&self) -> (usize, usize, bool) {
        let ix = &self.index;
        (ix.bytes(), ix.slots(), ix.is_growing())
    }

    /// Changes the byte budget (`cache_memlimit`); the arena grows with it.
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit.min(max_limit());
        if let Some(f) = self.flash.as_deref_mut() {
            f.set_limit(self.limit);
        }
    }

    /// Bytes charged besides the entries: the flash map's (`flash/index.rs`).
    #[inline]
    pub(crate) fn map_bytes(&self) -> usize {
        self.flash.as_deref().map_or(0, |f| f.bytes())
    }

    /// The metadata of the block at `off`.
    #[inline]
    pub(crate) fn meta(&self, off: u32) -> Meta<'_> {
        meta(&self.arena, off)
    }

    /// What the policy holds outside the entries now.
    pub(crate) fn policy_bytes(&self) -> usize {
        self.policy.outside_bytes()
    }

    /// The bytes an entry with a block of `units` is charged.
    fn charge(&self, units: u32) -> usize {
        units as usize * UNIT + self.entry_overhead
    }

    /// A fresh CAS unique: unique across shards because the low bits are
    /// the shard number.
    pub(crate) fn next_cas(&mut self) -> u64 {
        if !self.cas_enabled {
            return 0;
        }
        let cas = self.arena.cas.unique(self.cas_next);
        self.cas_next += 1;
        cas
    }

    /// Makes sure later CAS uniques are above `cas` (after an explicit `E`).
    pub(crate) fn observe_cas(&mut self, cas: u64) {
        let seq = cas >> self.arena.cas.shift;
        if seq >= self.cas_next {
            self.cas_next = seq.saturating_add(1);
        }
    }

    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let arena = &self.arena;
        self.index.find(hash, |off| meta(arena, off).key() == key)
    }

    /// Finds a live entry for a command that reads, changes or deletes it;
    /// an expired one found on the way is unlinked, a flushed one not
    /// reclaimed yet let go ([`Shard::take_flushed`]; memcached's storage
    /// commands do not count those, and use [`Shard::find_live`]).
    pub(crate) fn look_up(&mut self, hash: u64, key: &[u8], now: u32) -> Option<u32> {
        let found = self.find_live(hash, key, now);
        if found.is_none() {
            self.take_flushed(hash, key);
        }
        found
    }

    /// Finds a live entry; an expired one found on the way is unlinked.
    pub(crate) fn find_live(&mut self, hash: u64, key: &[u8], now: u32) -> Option<u32> {
        let off = self.find(hash, key)?;
        let m = meta(&self.arena, off);
        if is_expired(m.exptime(), now) {
            self.stats.get_expired += 1;
            if m.marks() & FETCHED == 0 {
                self.stats.expired_unfetched += 1;
                self.classes.of(self.arena.units(off)).expired_unfetched += 1;
            }
            self.unlink(hash, off);
            return None;
        }
        Some(off)
    }

    fn hash_of(&self, off: u32) -> u64 {
        self.hasher.hash_one(self.meta(off).key())
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        // Give up every reference the shard holds, so that the arena knows
        // which blocks handles still keep.
        self.evicted = None;
        // The flash records stay on their pages: a persistent tier reads
        // them back at the next start (a clear would mark them dead).
        self.flash = None;
        self.clear();
    }
}
