//! `flush_all` in constant time. A flush sets the shard's index and
//! eviction policy aside whole and gives the shard new, empty ones: the
//! entries of the old index are dead at once (no lookup, eviction or
//! snapshot sees them), and nothing touches them until they are reclaimed,
//! a batch at a time, by the reaper or by a store making room. Until then
//! they keep their blocks and their share of the budget, and count in
//! `len` (memcached's `curr_items` and `bytes` also count flushed items
//! until its background threads reclaim them).
//!
//! While flushed entries remain, nothing walks the arena (the reaper, or a
//! store clearing a run of neighbours) and no live entry is evicted: both
//! reclaim the flushed entries first, since an arena walk would meet their
//! blocks, still marked linked but in no index.

use std::collections::VecDeque;

use crate::eviction::Policy;
use crate::index::Index;
use crate::item::FETCHED;

use super::{meta, Shard};

/// The flushed entries of a shard, oldest flush first.
pub(super) type FlushedQueue = VecDeque<Flushed>;

/// Entries flushed together, waiting to be reclaimed.
pub(super) struct Flushed {
    /// The index they were in; never changed again, so a walk over its
    /// positions meets each of them once.
    index: Index,
    /// The policy that ordered them, dropped (with its allocations) once
    /// they are all reclaimed, outside the flush.
    _policy: Policy,
    /// The next position of `index` to reclaim.
    next: usize,
    /// Entries not reclaimed yet.
    left: usize,
}

/// Flushed entries reclaimed at least per call of
/// [`Shard::reclaim_some_flushed`] (unless fewer remain).
const RECLAIM_AT_ONCE: usize = 32;

impl Shard {
    /// Drops every entry, in constant time: they are dead from now on, and
    /// reclaimed later.
    pub(crate) fn flush(&mut self) {
        if let Some(f) = self.flash.as_deref_mut() {
            f.clear();
        }
        let fresh = Policy::new(self.policy.kind());
        let policy = std::mem::replace(&mut self.policy, fresh);
        if self.index.len() == 0 {
            return;
        }
        let index = self.index.take();
        self.flushed.push_back(Flushed {
            left: index.len(),
            index,
            _policy: policy,
            next: 0,
        });
    }

    /// Flushed entries not reclaimed yet.
    pub(crate) fn flushed_len(&self) -> usize {
        self.flushed.iter().map(|f| f.left).sum()
    }

    /// Whether `key` is one of the flushed entries not reclaimed yet (a
    /// read that meets it takes it: [`Shard::take_flushed`]). Nothing is
    /// looked up while no flushed entry waits.
    #[inline]
    pub(crate) fn is_flushed(&self, hash: u64, key: &[u8]) -> bool {
        let arena = &self.arena;
        self.has_flushed()
            && self.flushed.iter().any(|f| {
                f.index
                    .find_from(hash, f.next, |off| meta(arena, off).key() == key)
                    .is_some()
            })
    }

    /// A lookup of `key` that found nothing live: if a flush dropped it and
    /// it is not reclaimed yet, it is let go now and counted in
    /// memcached's `get_flushed` (memcached unlinks a flushed item the
    /// first time a command looks it up, and counts it then).
    pub(crate) fn take_flushed(&mut self, hash: u64, key: &[u8]) {
        if !self.has_flushed() {
            return;
        }
        let arena = &self.arena;
        let taken = self.flushed.iter_mut().find_map(|f| {
            let off = f
                .index
                .take_from(hash, f.next, |off| meta(arena, off).key() == key)?;
            f.left -= 1;
            Some(off)
        });
        if let Some(off) = taken {
            self.flushed.retain(|f| f.left > 0);
            self.stats.get_flushed += 1;
            self.used -= self.charge(self.arena.units(off));
            self.retire(off);
        }
    }

    /// Whether flushed entries wait to be reclaimed.
    pub(crate) fn has_flushed(&self) -> bool {
        !self.flushed.is_empty()
    }

    /// Reclaims the flushed entries in the next `budget` positions of the
    /// oldest flush's index. Returns (positions walked, entries reclaimed).
    pub(crate) fn reclaim_flushed(&mut self, budget: usize) -> (usize, usize) {
        let Some(mut f) = self.flushed.pop_front() else {
            return (0, 0);
        };
        let end = f.next.saturating_add(budget).min(f.index.positions());
        let mut gone = 0;
        for pos in f.next..end {
            if let Some(off) = f.index.at(pos) {
                self.reclaim(off);
                gone += 1;
            }
        }
        let walked = end - f.next;
        f.next = end;
        f.left -= gone;
        if end < f.index.positions() && f.left > 0 {
            self.flushed.push_front(f);
        }
        (walked, gone)
    }

    /// Reclaims at least [`RECLAIM_AT_ONCE`] flushed entries, or all that
    /// are left; false when none was left.
    pub(crate) fn reclaim_some_flushed(&mut self) -> bool {
        let mut gone = 0;
        while self.has_flushed() && gone < RECLAIM_AT_ONCE {
            gone += self.reclaim_flushed(4 * RECLAIM_AT_ONCE).1;
        }
        gone > 0
    }

    /// Lets go of a flushed entry, counted as memcached counts a flushed
    /// item its background threads reclaim.
    fn reclaim(&mut self, off: u32) {
        let m = meta(&self.arena, off);
        let class = self.classes.of(self.arena.units(off));
        self.stats.reclaimed += 1;
        class.reclaimed += 1;
        if m.marks() & FETCHED == 0 {
            self.stats.expired_unfetched += 1;
            class.expired_unfetched += 1;
        }
        self.used -= self.charge(self.arena.units(off));
        self.retire(off);
    }
}
