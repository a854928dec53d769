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

    /// Unlinks the entry at `off` (whose key hashes to `hash`).
    pub(crate) fn unlink(&mut self, hash: u64, off: u32) {
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
        // SAFETY: as above; `off` is linked under this key and the lock is
        // held exclusively.
        if !unsafe { c.rewrite(self.arena.ptr(off), self.arena.units(off)) } {
            return false;
        }
        if let Some(census) = &self.census {
            census.arrived(c.flags);
            census.left(old_flags);
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
}
