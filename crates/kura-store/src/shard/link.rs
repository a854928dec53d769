//! Linking and unlinking entries: a new entry or a new version of one put
//! in the index and the eviction order, an entry rewritten in its own
//! block, a deadline changed, a read or write noted, an entry let go.

use std::hash::BuildHasher;

use crate::eviction::EvictionPolicy;
use crate::item::{Contents, Item, FETCHED, LINKED};

use super::{meta, Blocks, Shard};

impl Shard {
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

    /// Unlinks the entry at `off` (whose key hashes to `hash`), and
    /// forgets its copy on flash if the tier keeps one.
    pub(crate) fn unlink(&mut self, hash: u64, off: u32) {
        self.drop_copy(hash);
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.index
            .remove(hash, off, |o| hasher.hash_one(meta(arena, o).key()));
        self.policy.remove(&mut blocks!(self), off, hash);
        self.used -= self.charge(self.arena.units(off));
        self.retire(off);
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
        if old.is_some() {
            // The old version's copy on flash goes before the new is linked.
            self.drop_copy(hash);
        }
        let off = self.adopt(item);
        self.stamp(off, exptime, cas, marks, now);
        let (arena, hasher) = (&self.arena, &self.hasher);
        let hash_of = |o| hasher.hash_one(meta(arena, o).key());
        self.used += self.charge(self.arena.units(off));
        self.classes.held(self.arena.units(off));
        self.stats.total_items += 1;
        if let Some(census) = &self.census {
            census.arrived(meta(&self.arena, off).flags());
        }
        let Some(old) = old else {
            if let Some(f) = self.flash.as_deref_mut() {
                // The new entry replaces any record of the key on flash.
                f.forget(hash);
            }
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

    /// Forgets the flash copy of the key hashing to `hash`, when the tier
    /// keeps copies of RAM's entries (`flash/index.rs`): its entry is about
    /// to change.
    #[inline]
    pub(crate) fn drop_copy(&mut self, hash: u64) {
        if let Some(f) = self.flash.as_deref_mut() {
            f.drop_copy(hash);
        }
    }

    /// Lets go of the entry at `off`, already out of the index and the
    /// eviction order: its deadline no longer counts, and its block is
    /// freed (now, or by the last handle holding it).
    pub(super) fn retire(&mut self, off: u32) {
        let m = meta(&self.arena, off);
        if m.exptime() != 0 {
            self.with_ttl -= 1;
        }
        if let Some(census) = &self.census {
            census.left(m.flags());
        }
        m.set_marks(m.marks() & !LINKED);
        self.classes.released(self.arena.units(off));
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
        let old_flags = m.flags();
        self.drop_copy(hash);
        // SAFETY: as above; `off` is linked under this key and the lock is
        // held exclusively.
        if !unsafe { c.rewrite(self.arena.ptr(off), self.arena.units(off)) } {
            return false;
        }
        if let Some(census) = &self.census {
            census.arrived(c.flags);
            census.left(old_flags);
        }
        // `rewrite` kept the layout: the block has room for a deadline if
        // the contents (built for `exptime`) have.
        self.change_deadline(off, exptime);
        let m = meta(&self.arena, off);
        m.set_cas(cas);
        m.set_marks(marks | LINKED);
        self.promote(hash, off, now);
        self.stats.total_items += 1;
        true
    }

    /// Changes the deadline of the entry at `off` (whose key hashes to
    /// `hash`). An entry whose block has no room for a deadline, given one,
    /// moves to a block that has ([`Shard::move_for_deadline`]): returns
    /// where the entry is now, or `None` when there was no room for the
    /// larger block and the entry went instead (as an evicted one would;
    /// serving it past its new deadline is not an option).
    pub(crate) fn set_exptime(
        &mut self,
        hash: u64,
        off: u32,
        exptime: u32,
        now: u32,
    ) -> Option<u32> {
        self.drop_copy(hash);
        let m = meta(&self.arena, off);
        let off = if exptime != 0 && !m.has_deadline() {
            self.relocate(hash, off, now, true, m.has_wide_cas())?
        } else {
            off
        };
        self.change_deadline(off, exptime);
        Some(off)
    }

    /// Changes the CAS unique of the entry at `off` (whose key hashes to
    /// `hash`), moving it to a block with room for an 8-byte one if it
    /// needs that: as [`Shard::set_exptime`].
    pub(crate) fn set_cas(&mut self, hash: u64, off: u32, cas: u64, now: u32) -> Option<u32> {
        self.drop_copy(hash);
        let m = meta(&self.arena, off);
        let off = if m.fits_cas(cas) {
            off
        } else {
            self.relocate(hash, off, now, m.has_deadline(), true)?
        };
        meta(&self.arena, off).set_cas(cas);
        Some(off)
    }

    /// Changes the deadline of an entry whose block has room for it (or
    /// to 0).
    fn change_deadline(&mut self, off: u32, exptime: u32) {
        let m = meta(&self.arena, off);
        match (m.exptime() != 0, exptime != 0) {
            (false, true) => self.with_ttl += 1,
            (true, false) => self.with_ttl -= 1,
            _ => {}
        }
        m.set_exptime(exptime);
        self.note_deadline(exptime);
    }

    /// Moves the entry at `off` to a new block with room for a deadline
    /// (then 0) if `deadline`, and for an 8-byte CAS unique if `wide_cas`:
    /// the same key, flags and value, CAS, marks, access time and place in
    /// the eviction order; not a new version (no `total_items`). `None`
    /// when the block does not fit: the entry is then unlinked, and told to
    /// the change sink as an eviction.
    fn relocate(
        &mut self,
        hash: u64,
        off: u32,
        now: u32,
        deadline: bool,
        wide_cas: bool,
    ) -> Option<u32> {
        let m = meta(&self.arena, off);
        debug_assert!(m.exptime() == 0 || deadline);
        let (old, cas) = (m.handle(), m.cas());
        let value = [old.value()];
        let mut c = self.contents(old.key(), old.flags(), &value, 0, cas);
        (c.deadline, c.wide_cas) = (deadline, wide_cas);
        let item = self.alloc(&c, now, Some(off));
        if meta(&self.arena, off).marks() & LINKED == 0 {
            // Making room let the entry go (a flush reached it): the new
            // block goes back with its handle.
            return None;
        }
        let Some(item) = item else {
            if let Some(evicted) = self.evicted.as_mut() {
                evicted.push(old.clone());
            }
            self.unlink(hash, off);
            return None;
        };
        let new = self.adopt(item);
        let (m, n) = (meta(&self.arena, off), meta(&self.arena, new));
        n.set_cas(cas);
        n.set_exptime(m.exptime());
        n.set_last_access(m.last_access());
        n.set_marks(m.marks());
        if m.exptime() != 0 {
            // `retire` takes the old block's off the count.
            self.with_ttl += 1;
        }
        let units = self.arena.units(new);
        self.used += self.charge(units);
        self.classes.held(units);
        if let Some(census) = &self.census {
            census.arrived(old.flags());
        }
        let (arena, hasher) = (&self.arena, &self.hasher);
        self.index
            .replace(hash, off, new, |o| hasher.hash_one(meta(arena, o).key()));
        self.policy.replace(&mut blocks!(self), off, new);
        self.used -= self.charge(self.arena.units(off));
        self.retire(off);
        Some(new)
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
}
