//! One shard: a hash index of item blocks in the shard's arena, an
//! eviction policy and a byte budget, all behind the shard's lock. An
//! entry is one block (item.rs): key, value, flags, CAS, deadline, marks and
//! the policy's state together, named by its offset in the arena; the index
//! holds only those offsets. The operations in `ops.rs` are built from the
//! few primitives here: find, allocate (making room), put (link a new entry
//! or a new version of one), overwrite in place, and unlink.

use std::hash::BuildHasher;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU8;

use foldhash::fast::FixedState;

use crate::arena::{Arena, UNIT};
use crate::eviction::{Entries, EvictionKind, EvictionPolicy, Policy};
use crate::expiry::is_expired;
use crate::index::Index;
use crate::item::{Contents, Item, Meta, FETCHED, LINKED};

/// Bytes charged per entry for its index slot (4 bytes and a control byte
/// in a table kept between 7/10 and 7/8 full: 5.7 to 7.2 bytes), beyond its
/// block and the policy's own share.
const INDEX_BYTES: usize = 8;

/// Blocks that making room scans at most for expired entries before it
/// evicts a live one: a bound on the time one store holds the lock.
const RECLAIM_SCAN: usize = 4096;

/// Policy victims evicted beyond the byte budget when free space is too
/// scattered for a block, before a run of neighbours is cleared instead.
const SCATTERED_VICTIMS: usize = 16;

/// Free blocks tried as the start of a run of neighbours to clear.
const RUN_STARTS: usize = 8;

/// The arena's largest size: room beyond the budget for blocks in flight,
/// blocks that handles still hold after their entry went, and free space
/// too scattered to use. An arena starts small and grows a step at a time
/// when a block would not fit in it but fits in the budget, so its memory
/// (mapped, and locked under `-k`) follows what the items use, and a busy
/// cache's resident memory stays near its limit (`-m`) rather than a
/// quarter above it.
fn arena_bytes(limit: usize) -> usize {
    limit.saturating_add(limit / 4).saturating_add(64 * 1024)
}

/// How much an arena grows at a time (and its first size).
fn growth_step(limit: usize) -> usize {
    (limit / 32).max(64 * 1024)
}

/// The largest budget a shard can have (its arena holds a quarter more).
pub(crate) fn max_limit() -> usize {
    (Arena::max_bytes() - 64 * 1024) / 5 * 4
}

/// What a read under the shared lock found.
pub(crate) enum SharedRead {
    Hit(crate::ops::Hit),
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
    unsafe { Meta::new(arena.ptr(off)) }
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
    fn holds(&self, id: u32, low: u32) -> bool {
        self.index.holds(low, id)
    }
}

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
    cas_next: u64,
    cas_index: u64,
    cas_shift: u32,
    cas_enabled: bool,
    pub(crate) flush_epoch: u32,
    pub(crate) stats: ShardStats,
    /// Items evicted by the operation under way, kept only while a change
    /// sink is attached (see `changes.rs`), which hears of them before the
    /// lock is released.
    pub(crate) evicted: Option<Vec<Item>>,
}

impl Shard {
    pub(crate) fn new(
        kind: EvictionKind,
        hasher: FixedState,
        limit: usize,
        evict: bool,
        index: usize,
        shard_bits: u32,
        cas_enabled: bool,
    ) -> Shard {
        let limit = limit.min(max_limit());
        Shard {
            index: Index::default(),
            arena: Arena::new(growth_step(limit)),
            policy: Policy::new(kind),
            entry_overhead: INDEX_BYTES + kind.entry_bytes(),
            links: kind.links(),
            hasher,
            used: 0,
            limit,
            evict,
            with_ttl: 0,
            expiry_floor: u32::MAX,
            pass_floor: u32::MAX,
            cas_next: 1,
            cas_index: index as u64,
            cas_shift: shard_bits,
            cas_enabled,
            flush_epoch: 0,
            stats: ShardStats::default(),
            evicted: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// The index's memory, slots and whether it is growing.
    pub(crate) fn index_stats(&self) -> (usize, usize, bool) {
        let ix = &self.index;
        (ix.bytes(), ix.slots(), ix.is_growing())
    }

    /// Changes the byte budget (`cache_memlimit`); the arena grows with it.
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit.min(max_limit());
    }

    /// Grows the arena for a block of `units` that does not fit in it;
    /// false when it is at its largest or the memory could not be mapped.
    fn grow_arena(&mut self, units: u32) -> bool {
        let now = self.arena.bytes();
        let max = arena_bytes(self.limit);
        if now >= max {
            return false;
        }
        let want = now + growth_step(self.limit).max(units as usize * UNIT + 64);
        self.arena.grow_to(want.min(max)) && self.arena.bytes() > now
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
        let cas = (self.cas_next << self.cas_shift) | self.cas_index;
        self.cas_next += 1;
        cas
    }

    /// Makes sure later CAS uniques are above `cas` (after an explicit `E`).
    pub(crate) fn observe_cas(&mut self, cas: u64) {
        let seq = cas >> self.cas_shift;
        if seq >= self.cas_next {
            self.cas_next = seq.saturating_add(1);
        }
    }

    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let arena = &self.arena;
        self.index.find(hash, |off| meta(arena, off).key() == key)
    }

    /// Finds a live entry; an expired one found on the way is unlinked.
    pub(crate) fn find_live(&mut self, hash: u64, key: &[u8], now: u32) -> Option<u32> {
        let off = self.find(hash, key)?;
        let m = meta(&self.arena, off);
        if is_expired(m.exptime(), now) {
            self.stats.get_expired += 1;
            if m.marks() & FETCHED == 0 {
                self.stats.expired_unfetched += 1;
            }
            self.unlink(hash, off);
            return None;
        }
        Some(off)
    }

    /// Gives up the shard's reference to the block at `off` (no longer
    /// linked): it is freed now, or by the last handle still holding it.
    fn release(&mut self, off: u32) {
        let m = meta(&self.arena, off);
        // Only the shard's reference: no handle exists to take another.
        if m.refcount() == 1 {
            self.arena.free(off);
            return;
        }
        self.arena.note_detached();
        if m.release() {
            self.arena.unnote_detached();
            self.arena.free(off);
        }
    }

    /// Unlinks the entry at `off` (whose key hashes to `hash`).
    pub(crate) fn unlink(&mut self, hash: u64, off: u32) {
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.index
            .remove(hash, off, |o| hasher.hash_one(meta(arena, o).key()));
        self.policy.remove(&mut blocks!(self), off, hash);
        self.used -= self.charge(self.arena.units(off));
        self.retire(off);
    }

    fn hash_of(&self, off: u32) -> u64 {
        self.hasher.hash_one(self.meta(off).key())
    }

    /// A block for a new item with these contents, room made for it (the
    /// entry `keep`, being replaced, is not evicted for it), or `None` when
    /// it does not fit.
    pub(crate) fn alloc(&mut self, c: &Contents<'_>, now: u32, keep: Option<u32>) -> Option<Item> {
        self.alloc_with(c, now, keep, true)
    }

    /// Like [`Shard::alloc`], but the value's bytes are left for the caller
    /// to write ([`Item::fill_value`]) after it lets go of the lock, and a
    /// failure is not counted (the operation tries again under the lock).
    pub(crate) fn alloc_unfilled(
        &mut self,
        c: &Contents<'_>,
        now: u32,
        keep: Option<u32>,
    ) -> Option<Item> {
        self.alloc_with(c, now, keep, false)
    }

    fn alloc_with(
        &mut self,
        c: &Contents<'_>,
        now: u32,
        keep: Option<u32>,
        fill: bool,
    ) -> Option<Item> {
        if c.key.len() > crate::item::KEY_MAX {
            return None;
        }
        let units = c.units();
        let Some(off) = self.make_room(units, now, keep) else {
            // A block allocated ahead of its operation is asked for again
            // by the operation itself, which counts the failure.
            if fill {
                self.stats.out_of_memory += 1;
            }
            return None;
        };
        let p = self.arena.ptr(off);
        let got = self.arena.units(off);
        // SAFETY: a block just allocated for these contents (the allocator
        // gives at most 3 units more), ours alone; the key length was
        // checked above.
        unsafe {
            if fill {
                c.write(p, got, false);
            } else {
                c.write_header(p, got, false);
            }
        }
        // Until linked, the block comes back through the handle's drop.
        self.arena.note_detached();
        // SAFETY: written above with a count of one, which the handle owns.
        Some(unsafe { Item::from_raw(NonNull::new_unchecked(p)) })
    }

    /// The contents of a block of this shard: with room for the policy's
    /// links if it keeps any.
    pub(crate) fn contents<'a>(
        &self,
        key: &'a [u8],
        flags: u32,
        parts: &'a [&'a [u8]],
    ) -> Contents<'a> {
        Contents {
            key,
            flags,
            parts,
            links: self.links,
        }
    }

    /// Takes over the block of `item` (allocated by [`Shard::alloc`]): the
    /// handle's reference becomes the shard's.
    fn adopt(&mut self, item: Item) -> u32 {
        let p = item.into_raw();
        self.arena.unnote_detached();
        // Only this shard's `alloc` makes the items linked here; anything
        // else is a bug that must not write into another block.
        self.arena
            .offset_of(p.as_ptr())
            .expect("an item allocated by this shard")
    }

    /// The bytes the entry `keep`, being replaced, gives back once the new
    /// one is linked: they count as free (the arena's slack holds both
    /// meanwhile).
    fn credit(&self, keep: Option<u32>) -> usize {
        keep.map_or(0, |k| self.charge(self.arena.units(k)))
    }

    /// Whether `item`, a block allocated earlier (a large set's, built
    /// without the lock), still fits the budget in place of `keep`: the
    /// room made for it may have gone meanwhile (other sets, or `keep`
    /// itself reclaimed while room was made).
    pub(crate) fn still_fits(&self, item: &Item, keep: Option<u32>) -> bool {
        let units = (item.heap_size() / UNIT) as u32;
        self.used + self.charge(units) <= self.limit + self.credit(keep)
    }

    /// Evicts or reclaims until a block of `units` fits in the budget and
    /// in the arena. Fails when it cannot fit at all, or when eviction is
    /// off and reclaiming expired entries is not enough.
    fn make_room(&mut self, units: u32, now: u32, keep: Option<u32>) -> Option<u32> {
        // The allocator may hand out up to 3 units more than asked for.
        let need = self.charge(units + 3);
        if need > self.limit {
            return None;
        }
        let credit = self.credit(keep);
        // A policy may offer the entry being replaced while others are
        // left; it is then taken out of the eviction order until room is
        // made, and linked again as if new.
        let mut parked = None;
        let mut scattered = 0;
        let found = loop {
            if self.arena.has_deferred() {
                for b in self.arena.take_deferred() {
                    self.arena.free(b);
                }
            }
            if self.used + need <= self.limit + credit {
                if let Some(off) = self.arena.alloc(units) {
                    break Some(off);
                }
                // The budget allows it but the arena is full (of blocks in
                // flight or held by handles) or its free space scattered.
                if self.grow_arena(units) {
                    continue;
                }
                if scattered >= SCATTERED_VICTIMS {
                    break self.clear_run(units, now, keep);
                }
                scattered += 1;
            }
            if self.reclaim_expired(now) {
                continue;
            }
            let mut victim = self.policy.victim(&mut blocks!(self));
            if let Some(k) = keep.filter(|&k| victim == Some(k) && parked.is_none()) {
                let hash = self.hash_of(k);
                self.policy.remove(&mut blocks!(self), k, hash);
                parked = Some(k);
                victim = self.policy.victim(&mut blocks!(self));
            }
            let Some(victim) = victim else {
                break None;
            };
            if !self.evict_entry(victim, now) {
                break None;
            }
        };
        if let Some(k) = parked {
            let hash = self.hash_of(k);
            self.policy.insert(&mut blocks!(self), k, hash);
            self.policy.touch(&mut blocks!(self), k, hash);
        }
        found
    }

    /// Evicts (or reclaims, when expired) the entry at `off`; false when it
    /// is live and eviction is off.
    fn evict_entry(&mut self, off: u32, now: u32) -> bool {
        let m = meta(&self.arena, off);
        let fetched = m.marks() & FETCHED != 0;
        let exptime = m.exptime();
        let expired = is_expired(exptime, now);
        if expired {
            self.stats.reclaimed += 1;
            if !fetched {
                self.stats.expired_unfetched += 1;
            }
        } else if self.evict {
            self.stats.evictions += 1;
            if exptime != 0 {
                self.stats.evicted_nonzero += 1;
            }
            if !fetched {
                self.stats.evicted_unfetched += 1;
            }
        } else {
            return false;
        }
        if let (false, Some(evicted)) = (expired, self.evicted.as_mut()) {
            // Heard by the sink when the operation reports; an expired
            // entry needs no record (its deadline is logged).
            evicted.push(m.handle());
        }
        let hash = self.hash_of(off);
        self.unlink(hash, off);
        true
    }

    /// When free space is too scattered for a block of `units`: evicts the
    /// entries right after a free block until it is large enough, trying
    /// the largest free blocks first. Entries in use by a write under way,
    /// held only by handles, or `keep` stop a run.
    fn clear_run(&mut self, units: u32, now: u32, keep: Option<u32>) -> Option<u32> {
        for start in self.arena.large_free_blocks(RUN_STARTS) {
            if !self.arena.is_free(start) {
                // Merged into another run by an eviction for an earlier one.
                continue;
            }
            while self.arena.units(start) < units {
                let Some(next) = self.arena.next_block(start) else {
                    break;
                };
                let linked = meta(&self.arena, next).marks() & LINKED != 0;
                if !linked || Some(next) == keep || !self.evict_entry(next, now) {
                    break;
                }
            }
            if self.arena.is_free(start) && self.arena.units(start) >= units {
                return Some(self.arena.alloc_at(start, units));
            }
        }
        None
    }

    /// Reclaims expired entries from the reaper's cursor on, when some entry
    /// may have expired, so that a live entry is evicted only when none was
    /// found within [`RECLAIM_SCAN`] blocks. Returns whether any was.
    fn reclaim_expired(&mut self, now: u32) -> bool {
        let mut budget = RECLAIM_SCAN;
        while budget > 0 {
            let (scanned, removed, done) = self.reap(now, budget.min(32));
            if removed > 0 {
                return true;
            }
            if done {
                break;
            }
            budget = budget.saturating_sub(scanned);
        }
        false
    }

    /// Notes the deadline an entry was given.
    fn note_deadline(&mut self, exptime: u32) {
        if exptime != 0 {
            self.expiry_floor = self.expiry_floor.min(exptime);
            self.pass_floor = self.pass_floor.min(exptime);
        }
    }

    /// Sets the metadata of the block at `off` for a new version.
    fn stamp(&mut self, off: u32, exptime: u32, cas: u64, marks: u8, now: u32) {
        let m = meta(&self.arena, off);
        m.set_cas(cas);
        m.set_exptime(exptime);
        m.set_last_access(now);
        m.set_marks(marks | LINKED);
        if exptime != 0 {
            self.with_ttl += 1;
        }
        self.note_deadline(exptime);
    }

    /// Links `item` (from [`Shard::alloc`]) as the entry for its key: a new
    /// entry when `old` is `None` (the key must not be linked), else in
    /// place of the entry at `old` for the same key, which moves up the
    /// eviction order. Returns the new entry's offset.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &mut self,
        hash: u64,
        old: Option<u32>,
        item: Item,
        exptime: u32,
        cas: u64,
        marks: u8,
        now: u32,
    ) -> u32 {
        let off = self.adopt(item);
        self.stamp(off, exptime, cas, marks, now);
        let (arena, hasher) = (&self.arena, &self.hasher);
        let hash_of = |o| hasher.hash_one(meta(arena, o).key());
        self.used += self.charge(self.arena.units(off));
        self.stats.total_items += 1;
        let Some(old) = old else {
            self.index.insert(hash, off, hash_of);
            self.policy.insert(&mut blocks!(self), off, hash);
            return off;
        };
        self.index.replace(hash, old, off, hash_of);
        self.policy.replace(&mut blocks!(self), old, off);
        self.policy.touch(&mut blocks!(self), off, hash);
        self.used -= self.charge(self.arena.units(old));
        self.retire(old);
        off
    }

    /// Lets go of the entry at `off`, already out of the index and the
    /// eviction order: its deadline no longer counts, and its block is
    /// freed (now, or by the last handle holding it).
    fn retire(&mut self, off: u32) {
        let m = meta(&self.arena, off);
        if m.exptime() != 0 {
            self.with_ttl -= 1;
        }
        m.set_marks(m.marks() & !LINKED);
        self.release(off);
    }

    /// Writes a new version of the entry at `off` over its own block, when
    /// no handle holds the block and the new contents need a block of the
    /// same size (a counter, a value of the same length): no allocation, no
    /// change to the index or the policy's order beyond a touch. False,
    /// changing nothing, otherwise.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn overwrite(
        &mut self,
        hash: u64,
        off: u32,
        c: &Contents<'_>,
        exptime: u32,
        cas: u64,
        marks: u8,
        now: u32,
    ) -> bool {
        let m = meta(&self.arena, off);
        // Only the shard's reference: no handle exists to see the change
        // (handles are made under this lock, which is held exclusively).
        if m.refcount() != 1 {
            return false;
        }
        // SAFETY: as above; `off` is linked under this key and the lock is
        // held exclusively.
        if !unsafe { c.rewrite(self.arena.ptr(off), self.arena.units(off)) } {
            return false;
        }
        self.set_exptime(off, exptime);
        let m = meta(&self.arena, off);
        m.set_cas(cas);
        m.set_marks(marks | LINKED);
        self.promote(hash, off, now);
        self.stats.total_items += 1;
        true
    }

    /// Changes an entry's deadline.
    pub(crate) fn set_exptime(&mut self, off: u32, exptime: u32) {
        let m = meta(&self.arena, off);
        match (m.exptime() != 0, exptime != 0) {
            (false, true) => self.with_ttl += 1,
            (true, false) => self.with_ttl -= 1,
            _ => {}
        }
        m.set_exptime(exptime);
        self.note_deadline(exptime);
    }

    /// Records a read of entry `off`: moves it up the eviction order, marks
    /// it fetched and notes the access time.
    pub(crate) fn bump(&mut self, hash: u64, off: u32, now: u32) {
        self.promote(hash, off, now);
        let m = self.meta(off);
        m.set_marks(m.marks() | FETCHED);
    }

    /// Records a read of entry `off` under the shared lock, if the policy
    /// can (see [`EvictionPolicy::touch_shared`]).
    pub(crate) fn touch_shared(&self, off: u32) -> bool {
        self.policy.touch_shared(&blocks!(self), off)
    }

    /// Moves entry `off` up the eviction order and notes the access time,
    /// without marking it fetched (a write that is not a read).
    pub(crate) fn promote(&mut self, hash: u64, off: u32, now: u32) {
        self.policy.touch(&mut blocks!(self), off, hash);
        self.meta(off).set_last_access(now);
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        for off in self.index.drain() {
            self.retire(off);
        }
        for b in self.arena.take_deferred() {
            self.arena.free(b);
        }
        self.policy.clear();
        self.used = 0;
        self.with_ttl = 0;
        self.expiry_floor = u32::MAX;
        self.pass_floor = u32::MAX;
    }

    /// Walks up to `budget` blocks from the reaper's cursor and unlinks the
    /// expired entries, when some entry may have expired. Returns (blocks
    /// walked, entries removed, whether a pass over the arena ended). A
    /// whole pass also learns the earliest deadline left.
    pub(crate) fn reap(&mut self, now: u32, budget: usize) -> (usize, usize, bool) {
        if self.with_ttl == 0 || self.expiry_floor > now {
            return (0, 0, true);
        }
        if self.arena.walk_at_start() {
            // Every block is ahead of a new pass; later deadlines are noted.
            self.pass_floor = u32::MAX;
        }
        let mut scanned = 0;
        let mut removed = 0;
        while scanned < budget {
            let Some(off) = self.arena.walk() else {
                self.expiry_floor = self.pass_floor;
                return (scanned, removed, true);
            };
            scanned += 1;
            let m = meta(&self.arena, off);
            if m.marks() & LINKED == 0 || m.exptime() == 0 {
                continue;
            }
            if !is_expired(m.exptime(), now) {
                self.pass_floor = self.pass_floor.min(m.exptime());
                continue;
            }
            if m.marks() & FETCHED == 0 {
                self.stats.expired_unfetched += 1;
            }
            self.stats.crawler_reclaimed += 1;
            let hash = self.hash_of(off);
            self.unlink(hash, off);
            removed += 1;
        }
        (scanned, removed, false)
    }

    /// Whether the reaper's walk is at the arena's start.
    pub(crate) fn walk_at_start(&self) -> bool {
        self.arena.walk_at_start()
    }

    /// The linked entries' offsets (for snapshots).
    pub(crate) fn offsets(&self) -> impl Iterator<Item = u32> + '_ {
        self.index.iter()
    }

    /// Blocks in the arena, in bytes (the store's `bytes` counts `used`).
    #[cfg(test)]
    pub(crate) fn arena_used(&self) -> usize {
        self.arena.used_units() * UNIT
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        // Give up every reference the shard holds, so that the arena knows
        // which blocks handles still keep.
        self.evicted = None;
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{GetOptions, SetRequest};

    fn shard(kind: EvictionKind) -> Shard {
        shard_of(kind, 1 << 20)
    }

    fn shard_of(kind: EvictionKind, limit: usize) -> Shard {
        Shard::new(kind, FixedState::with_seed(7), limit, true, 0, 0, true)
    }

    fn hash(s: &Shard, key: &[u8]) -> u64 {
        s.hasher.hash_one(key)
    }

    fn set(s: &mut Shard, key: &[u8], value: &[u8]) {
        let h = hash(s, key);
        s.set(h, &SetRequest::new(key, value), 0, None);
    }

    /// A plain read's handle on `key`'s item.
    fn read(s: &mut Shard, key: &[u8]) -> Option<Item> {
        let h = hash(s, key);
        s.get(h, key, &GetOptions::default(), 0).map(|hit| hit.item)
    }

    #[test]
    fn a_block_held_by_a_handle_comes_back_after_it_drops() {
        for kind in EvictionKind::ALL {
            let mut s = shard(kind);
            set(&mut s, b"a", &[1; 100]);
            let h = hash(&s, b"a");
            let item = read(&mut s, b"a").unwrap();
            s.unlink(h, s.find(h, b"a").unwrap());
            assert!(s.arena_used() > 0, "{kind}: the handle keeps its block");
            assert_eq!(item.value(), &[1; 100][..]);
            drop(item);
            // The block went back through the deferred stack; the next
            // allocation takes it.
            set(&mut s, b"b", &[2; 100]);
            let hb = hash(&s, b"b");
            s.unlink(hb, s.find(hb, b"b").unwrap());
            assert_eq!(s.arena_used(), 0, "{kind}");
            assert_eq!(s.used, 0, "{kind}");
        }
    }

    #[test]
    fn the_arena_takes_its_room_only_when_a_block_would_not_fit() {
        let limit = 1 << 20;
        let mut s = shard_of(EvictionKind::S3Fifo, limit);
        let key = |i: usize| format!("key:{i:06}").into_bytes();
        // Three times the limit in items of one size: evicted blocks are
        // reused as they are.
        for i in 0..20_000 {
            set(&mut s, &key(i), &[b'v'; 100]);
        }
        assert!(s.stats.evictions > 10_000);
        assert!(s.arena.bytes() <= limit, "{}", s.arena.bytes());
        // Readers holding items whose entries are then evicted keep their
        // blocks: new items need room beyond the budget's share (more than
        // the slack between blocks and what each entry is charged).
        let held: Vec<Item> = (18_000..20_000)
            .filter_map(|i| read(&mut s, &key(i)))
            .collect();
        assert!(held.len() > 1800);
        for i in 20_000..40_000 {
            set(&mut s, &key(i), &[b'w'; 100]);
        }
        assert!(s.arena.bytes() > limit && s.arena.bytes() <= arena_bytes(limit));
        assert!(held.iter().all(|it| it.value() == [b'v'; 100]));
        assert!(s.used <= s.limit);
    }

    #[test]
    fn a_value_of_the_same_size_is_written_over_its_block_unless_held() {
        for kind in EvictionKind::ALL {
            let mut s = shard(kind);
            set(&mut s, b"k", &[1; 100]);
            let h = hash(&s, b"k");
            let off = s.find(h, b"k").unwrap();
            set(&mut s, b"k", &[2; 100]);
            assert_eq!(s.find(h, b"k"), Some(off), "{kind}: written in place");
            let held = read(&mut s, b"k").unwrap();
            set(&mut s, b"k", &[3; 100]);
            let moved = s.find(h, b"k").unwrap();
            assert_ne!(moved, off, "{kind}: a held block is not written over");
            assert_eq!(held.value(), &[2; 100][..]);
            let now = s.get(h, b"k", &GetOptions::default(), 0).unwrap();
            assert_eq!(now.item.value(), &[3; 100][..]);
            assert_eq!(s.len(), 1);
        }
    }

    #[test]
    fn replacing_a_value_keeps_one_block() {
        for kind in EvictionKind::ALL {
            let mut s = shard(kind);
            for round in 0..50u8 {
                set(&mut s, b"k", &vec![round; 10 + round as usize * 7]);
            }
            let h = hash(&s, b"k");
            let off = s.find(h, b"k").unwrap();
            assert_eq!(s.arena_used(), s.arena.units(off) as usize * UNIT, "{kind}");
            assert_eq!(s.used, s.charge(s.arena.units(off)), "{kind}");
            s.clear();
            assert_eq!((s.arena_used(), s.used, s.len()), (0, 0, 0), "{kind}");
        }
    }
}
