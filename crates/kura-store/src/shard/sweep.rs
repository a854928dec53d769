//! Sweeping a shard: dropping every entry, and the reaper's walk over the
//! arena that unlinks expired entries.

use crate::expiry::is_expired;
use crate::item::{FETCHED, LINKED};

use super::{meta, Shard};

impl Shard {
    /// Drops every entry and gives up their blocks now.
    pub(crate) fn clear(&mut self) {
        self.flush();
        while self.has_flushed() {
            self.reclaim_flushed(usize::MAX);
        }
        for b in self.arena.take_deferred() {
            self.arena.free(b);
        }
        self.used = 0;
        self.with_ttl = 0;
        self.expiry_floor = u32::MAX;
        self.pass_floor = u32::MAX;
    }

    /// Walks up to `budget` blocks from the reaper's cursor and unlinks the
    /// expired entries, when some entry may have expired. Returns (blocks
    /// walked, entries removed, whether a pass over the arena ended). A
    /// whole pass also learns the earliest deadline left.
    ///
    /// Flushed entries are reclaimed first (up to `budget` index positions
    /// a call): the walk would meet their blocks.
    pub(crate) fn reap(&mut self, now: u32, budget: usize) -> (usize, usize, bool) {
        if self.has_flushed() {
            let (walked, gone) = self.reclaim_flushed(budget);
            return (walked, gone, false);
        }
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
            let class = self.classes.of(self.arena.units(off));
            if m.marks() & FETCHED == 0 {
                self.stats.expired_unfetched += 1;
                class.expired_unfetched += 1;
            }
            self.stats.crawler_reclaimed += 1;
            class.crawler_reclaimed += 1;
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
}
