//! [`Store::scan`]: a walk over one shard's entries in bounded steps, for
//! background work that must see every entry (an HTTP cache's ban lurker)
//! without holding a shard's lock for long or copying a whole shard's
//! handles at once.

use crate::changes::Entry;

use super::Store;

/// Where a walk over one shard is; start with `ScanCursor::default()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCursor {
    pos: usize,
    /// The shard index's move count when this walk began.
    moves: Option<u64>,
}

/// One step of a walk.
#[derive(Debug)]
pub struct Scan {
    /// Live (unexpired) entries met in this step.
    pub entries: Vec<Entry>,
    /// The walk reached the shard's end; the cursor is back at the start.
    /// Every entry linked in the shard from the walk's first step to its
    /// last was met at least once (some maybe twice).
    pub done: bool,
    /// The shard's index moved entries since the walk began, so the walk
    /// started over from the beginning in this step: entries met before
    /// may be met again.
    pub restarted: bool,
}

impl Store {
    /// Walks up to `budget` index positions of shard `shard` from `cursor`,
    /// returning the live entries there. The shard is locked for this step
    /// only. When the index moves entries between positions (it grows, or
    /// is flushed) during a walk, the walk starts over, so a `done` walk has
    /// met every entry that was linked throughout it.
    ///
    /// # Panics
    /// `shard` is not below [`Store::shard_count`].
    pub fn scan(&self, shard: usize, cursor: &mut ScanCursor, budget: usize) -> Scan {
        let now = self.clock.now();
        self.apply_due_flush(now, &crate::Report::default());
        let mut guard = self.shards[shard].0.write();
        self.sync_flush(&mut guard, now);
        let moves = guard.index_moves();
        let restarted = cursor.moves.is_some_and(|m| m != moves);
        if cursor.moves != Some(moves) {
            *cursor = ScanCursor {
                pos: 0,
                moves: Some(moves),
            };
        }
        let (entries, next) = guard.scan(cursor.pos, budget.max(1), now);
        drop(guard);
        let done = match next {
            Some(pos) => {
                cursor.pos = pos;
                false
            }
            None => {
                *cursor = ScanCursor::default();
                true
            }
        };
        Scan {
            entries,
            done,
            restarted,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use crate::{Expiry, Store, StoreConfig};

    use super::ScanCursor;

    fn store() -> Store {
        Store::new(StoreConfig {
            shards: 2,
            ..StoreConfig::with_capacity(64 << 20)
        })
    }

    /// Every key met by walking all shards to their end, `budget` positions a step, calling
    /// `between` after each step.
    fn walk(s: &Store, budget: usize, mut between: impl FnMut()) -> (HashSet<Vec<u8>>, usize) {
        let mut seen = HashSet::new();
        let mut restarts = 0;
        for shard in 0..s.shard_count() {
            let mut cursor = ScanCursor::default();
            let mut steps = 0;
            loop {
                steps += 1;
                assert!(steps < 1_000_000, "the walk never ended");
                let scan = s.scan(shard, &mut cursor, budget);
                restarts += usize::from(scan.restarted);
                seen.extend(scan.entries.iter().map(|e| e.item.key().to_vec()));
                between();
                if scan.done {
                    break;
                }
            }
        }
        (seen, restarts)
    }

    #[test]
    fn a_walk_meets_every_live_entry_and_skips_expired_ones() {
        let s = store();
        let n = crate::testing::size(3_000, 600) as u32;
        for i in 0..n {
            s.insert(format!("k{i}").as_bytes(), b"v", Expiry::Never);
        }
        s.insert(b"gone", b"v", Expiry::Expired);
        let (seen, restarts) = walk(&s, 97, || {});
        assert_eq!(restarts, 0);
        assert_eq!(seen.len(), n as usize);
        assert!(seen.contains(format!("k{}", n - 1).as_bytes()));
        assert!(!seen.contains(b"gone".as_slice()));
    }

    #[test]
    fn a_walk_during_growth_starts_over_and_misses_nothing_that_stayed() {
        let s = store();
        for i in 0..2_000u32 {
            s.insert(format!("old{i}").as_bytes(), b"v", Expiry::Never);
        }
        // Inserting between steps grows the indexes (entries move between tables); the store
        // is large enough that nothing is evicted. A shard of ~1,000 entries has at most ~1,430
        // slots (7/10 full when made) and grows on ~250 more entries; its walk takes at least
        // 16 steps of 64, in which 50 inserts a step put ~400 into it: it grows during the walk
        // whatever the hash seed. The inserts stop at 3,000 so the walk can end.
        let mut n = 0u32;
        let (seen, restarts) = walk(&s, 64, || {
            for _ in 0..50 {
                if n < 3_000 {
                    n += 1;
                    s.insert(format!("new{n}").as_bytes(), b"v", Expiry::Never);
                }
            }
        });
        assert!(
            restarts > 0,
            "the index never moved entries during the walk"
        );
        assert_eq!(s.len(), 2_000 + n as usize, "entries were evicted");
        for i in 0..2_000u32 {
            assert!(seen.contains(format!("old{i}").as_bytes()), "old{i} missed");
        }
    }

    #[test]
    fn a_flush_restarts_the_walk() {
        let s = store();
        for i in 0..500u32 {
            s.insert(format!("k{i}").as_bytes(), b"v", Expiry::Never);
        }
        let mut cursor = ScanCursor::default();
        let first = s.scan(0, &mut cursor, 8);
        assert!(!first.done && !first.restarted);
        s.flush(None);
        let next = s.scan(0, &mut cursor, 1 << 20);
        assert!(next.restarted && next.done);
        assert!(next.entries.is_empty());
    }
}
