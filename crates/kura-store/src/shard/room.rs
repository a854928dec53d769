//! Room for a new block: allocating it in the arena, growing the arena
//! a step at a time, and making room within the shard's budget by
//! reclaiming flushed and expired entries, evicting the policy's victims, or clearing
//! a run of neighbours when free space is too scattered.

use std::ops::Range;
use std::ptr::NonNull;

use crate::arena::{Arena, UNIT};
use crate::eviction::EvictionPolicy;
use crate::expiry::is_expired;
use crate::item::{Contents, Item, FETCHED, LINKED};

use super::{meta, Blocks, Shard};

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
pub(super) fn arena_bytes(limit: usize) -> usize {
    limit.saturating_add(limit / 4).saturating_add(64 * 1024)
}

/// How much an arena grows at a time (and its first size).
pub(super) fn growth_step(limit: usize) -> usize {
    (limit / 32).max(64 * 1024)
}

/// The largest budget a shard can have (its arena holds a quarter more).
pub(crate) fn max_limit() -> usize {
    (Arena::max_bytes() - 64 * 1024) / 5 * 4
}

impl Shard {
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
                self.classes.of(units).out_of_memory += 1;
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
                c.write(p, got);
            } else {
                c.write_header(p, got);
            }
        }
        // Until linked, the block comes back through the handle's drop.
        self.arena.note_detached();
        // SAFETY: written above with a count of one, which the handle owns.
        Some(unsafe { Item::from_raw(NonNull::new_unchecked(p)) })
    }

    /// The contents of a block of this shard: with room for the policy's
    /// links if it keeps any, for a deadline if `exptime` is one, and for
    /// a CAS unique of 8 bytes if `cas` needs them.
    pub(crate) fn contents<'a>(
        &self,
        key: &'a [u8],
        flags: u32,
        parts: &'a [&'a [u8]],
        exptime: u32,
        cas: u64,
    ) -> Contents<'a> {
        Contents {
            key,
            flags,
            parts,
            links: self.links,
            deadline: exptime != 0,
            wide_cas: self.arena.cas.narrow(cas).is_none(),
        }
    }

    /// Takes over the block of `item` (allocated by [`Shard::alloc`]): the
    /// handle's reference becomes the shard's.
    pub(super) fn adopt(&mut self, item: Item) -> u32 {
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
    /// without the lock), still fits the budget in place of `keep`, with
    /// room for the deadline and CAS unique of contents `c`: the room made
    /// for it may have gone meanwhile (other sets, or `keep` itself
    /// reclaimed while room was made), and its CAS unique is only known now.
    pub(crate) fn still_fits(&self, item: &Item, keep: Option<u32>, c: &Contents<'_>) -> bool {
        let units = (item.heap_size() / UNIT) as u32;
        (!c.deadline || item.has_deadline())
            && (!c.wide_cas || item.has_wide_cas())
            && self.used + self.map_bytes() + self.charge(units) <= self.limit + self.credit(keep)
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
            // The flash map's bytes count too: evictions to flash grow it.
            if self.used + self.map_bytes() + need <= self.limit + credit {
                if let Some(off) = self.arena.alloc(units) {
                    break Some(off);
                }
                // The budget allows it but the arena is full (of blocks in
                // flight, held by handles, or flushed) or its free space
                // scattered. Flushed entries go before the arena grows, and
                // before clearing a run walks the arena.
                if self.reclaim_some_flushed() || self.grow_arena(units) {
                    continue;
                }
                if scattered >= SCATTERED_VICTIMS {
                    break self.clear_run(units, now, keep);
                }
                scattered += 1;
            }
            // Dead entries go before a live one is evicted: flushed ones,
            // then expired ones.
            if self.reclaim_some_flushed() || self.reclaim_expired(now) {
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
        let class = self.classes.of(self.arena.units(off));
        if expired {
            self.stats.reclaimed += 1;
            class.reclaimed += 1;
            if !fetched {
                self.stats.expired_unfetched += 1;
                class.expired_unfetched += 1;
            }
        } else if self.evict {
            self.stats.evictions += 1;
            class.evicted += 1;
            class.evicted_time = now.saturating_sub(m.last_access());
            if exptime != 0 {
                self.stats.evicted_nonzero += 1;
                class.evicted_nonzero += 1;
            }
            if !fetched {
                self.stats.evicted_unfetched += 1;
                class.evicted_unfetched += 1;
            }
            if let Some(watch) = &self.eviction_watch {
                crate::store::inspect::tell_evicted(&**watch, &self.arena, off, now);
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
        let spilled = match self.flash.is_some() && !expired {
            true => self.record_for_flash(hash, off),
            false => None,
        };
        self.unlink(hash, off);
        if let (Some(loc), Some(f)) = (spilled, self.flash.as_deref_mut()) {
            f.insert(hash, loc);
        }
        true
    }

    /// The flash record for the entry at `off` as RAM lets it go: its copy
    /// if the tier keeps one (taken out of the map, to be put back after
    /// the unlink), else its value written now; `None` when the tier does
    /// not take it.
    #[cold]
    #[inline(never)]
    fn record_for_flash(&mut self, hash: u64, off: u32) -> Option<crate::flash::index::Loc> {
        use crate::item::{STALE, TOKEN_SENT};
        let m = meta(&self.arena, off);
        let f = self.flash.as_deref_mut()?;
        if m.marks() & (STALE | TOKEN_SENT) == 0 {
            if let Some(loc) = f.take_copy(hash) {
                return Some(crate::flash::index::Loc {
                    last_access: m.last_access(),
                    ..loc
                });
            }
        }
        spill(f, m)
    }

    /// Writes the entry for `key` (just stored) to flash as a copy, when
    /// the tier keeps copies of RAM's entries and takes this one.
    pub(crate) fn copy_to_flash(&mut self, hash: u64, key: &[u8]) {
        if !self.flash.as_deref().is_some_and(|f| f.copies()) {
            return;
        }
        let Some(off) = self.find(hash, key) else {
            return;
        };
        let m = meta(&self.arena, off);
        if let Some(f) = self.flash.as_deref_mut() {
            if let Some(loc) = spill(f, m) {
                f.insert(hash, loc);
            }
        }
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
}

impl Shard {
    /// Moves to flash the entries at index positions `positions` not read
    /// or written for more than `age` seconds (memcached's
    /// `ext_item_age`), each as [`Shard::spill_one`] does: how many.
    pub(crate) fn spill_idle(&mut self, positions: Range<usize>, now: u32, age: u32) -> usize {
        let end = positions.end.min(self.index.positions());
        let idle: Vec<(u64, u32)> = (positions.start..end)
            .filter_map(|pos| self.index.at(pos))
            .filter(|&off| {
                let m = meta(&self.arena, off);
                m.marks() & LINKED != 0 && now.saturating_sub(m.last_access()) > age
            })
            .map(|off| (self.hash_of(off), off))
            .collect();
        idle.into_iter()
            .filter(|&(hash, off)| self.spill_one(hash, off, now))
            .count()
    }

    /// The live entries as (last access, key hash, offset), for
    /// [`Shard::spill_one`] in the order the caller chooses.
    pub(crate) fn spill_order(&self, now: u32) -> Vec<(u32, u64, u32)> {
        (0..self.index.positions())
            .filter_map(|pos| self.index.at(pos))
            .filter_map(|off| {
                let m = meta(&self.arena, off);
                let live = m.marks() & LINKED != 0 && !is_expired(m.exptime(), now);
                live.then(|| (m.last_access(), self.hash_of(off), off))
            })
            .collect()
    }

    /// Moves the entry at `off`, whose key hashes to `hash` (from
    /// [`Shard::spill_order`]; skipped unless the index still holds it
    /// there, live), out of RAM to flash, as an eviction would, if the
    /// flash tier takes it (see [`spill`]): whether it moved.
    pub(crate) fn spill_one(&mut self, hash: u64, off: u32, now: u32) -> bool {
        // Compared by offset only: a block freed since is never read.
        if self.index.find(hash, |o| o == off).is_none()
            || is_expired(meta(&self.arena, off).exptime(), now)
        {
            return false;
        }
        let Some(loc) = self.record_for_flash(hash, off) else {
            return false;
        };
        self.unlink(hash, off);
        if let Some(f) = self.flash.as_deref_mut() {
            f.insert(hash, loc);
        }
        true
    }
}

/// Writes the value of `m`, an entry being evicted (or stored, as a copy),
/// to the flash tier
/// (out of line: a shard without a tier tests an `Option` per eviction).
#[cold]
#[inline(never)]
fn spill(
    f: &crate::flash::index::ShardFlash,
    m: crate::item::Meta<'_>,
) -> Option<crate::flash::index::Loc> {
    use crate::item::{KEY_BINARY, STALE, TOKEN_SENT};
    let marks = m.marks();
    if marks & (STALE | TOKEN_SENT) != 0 || m.value_len() < f.tier.config.item_size {
        // Invalidated entries and those whose recache token is out stay
        // with RAM's rules; small values are not worth a record.
        return None;
    }
    let item = m.handle();
    let fields = crate::flash::record::Fields {
        flags: m.flags(),
        exptime: m.exptime(),
        cas: m.cas(),
        marks: marks & (KEY_BINARY | FETCHED),
    };
    crate::store::flash::spill(&f.tier, item.key(), item.value(), &fields, m.last_access())
}
