//! S3-FIFO's ghost queue: fingerprints of keys recently evicted from the
//! small queue, oldest first, with a set of them for O(1) lookups.
//!
//! In a full cache it holds about 1.4 fingerprints for every entry, so its
//! bytes count against the memory limit like the entries' (S3-FIFO's
//! `entry_bytes`, 19 bytes an entry with the small queue's ring). A
//! general hash set churned this way (an insert and a removal each
//! eviction) fills with tombstones and settles at twice the size it needs:
//! hashbrown's did, and a server full at `-m 100` held 8 bytes more an
//! item than now (bench/results/history.md). Here the set is an open-addressing table
//! of the fingerprints themselves, probed linearly, whose removals shift
//! the entries after them back (no tombstones), rebuilt at 5/8 full when
//! it passes 7/8: 4.6 to 6.4 bytes a fingerprint, 4 to 5 more in the queue
//! (grown by a quarter at a time).

use std::collections::VecDeque;

use super::push_back_sparing;

/// A slot with no fingerprint.
const EMPTY: u32 = 0;

/// A fingerprint as the table keeps it: never [`EMPTY`] (0 is kept as 1,
/// so those two are taken for one key, as two keys with the same
/// fingerprint are: a ghost may admit a key it did not see, rarely).
#[inline]
fn stored(fp: u32) -> u32 {
    fp.max(1)
}

/// Where the search for `fp` starts among `n` slots: its mixed bits scaled
/// to the table.
#[inline]
fn home(fp: u32, n: usize) -> usize {
    let mixed = u64::from(fp).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((mixed * n as u64) >> 32) as usize
}

/// The slot after `i` of `n`, going round the end.
#[inline]
fn next(i: usize, n: usize) -> usize {
    if i + 1 == n {
        0
    } else {
        i + 1
    }
}

/// The ghost queue.
#[derive(Debug, Default)]
pub(super) struct Ghost {
    /// Stored fingerprints, oldest first; each is in `slots` once.
    order: VecDeque<u32>,
    /// The set: stored fingerprints at or after their home, with no empty
    /// slot between home and fingerprint (wrapping at the end).
    slots: Vec<u32>,
}

impl Ghost {
    /// Fingerprints remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
    }

    /// Bytes the queue and the set hold.
    pub(super) fn bytes(&self) -> usize {
        (self.order.capacity() + self.slots.capacity()) * std::mem::size_of::<u32>()
    }

    /// The slot holding `fp` (stored), if any.
    fn find(&self, fp: u32) -> Option<usize> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        let mut i = home(fp, n);
        // The table is never full, so an empty slot ends every search.
        loop {
            match self.slots[i] {
                EMPTY => return None,
                s if s == fp => return Some(i),
                _ => i = next(i, n),
            }
        }
    }

    pub(super) fn contains(&self, fp: u32) -> bool {
        self.find(stored(fp)).is_some()
    }

    /// Puts `fp` (stored, not in the table) in the first empty slot from
    /// its home.
    fn place(slots: &mut [u32], fp: u32) {
        let n = slots.len();
        let mut i = home(fp, n);
        while slots[i] != EMPTY {
            i = next(i, n);
        }
        slots[i] = fp;
    }

    /// Takes `fp` (stored) out of the table, moving back the entries after
    /// it that could not stay where they are with its slot empty.
    fn unplace(&mut self, fp: u32) {
        let Some(mut hole) = self.find(fp) else {
            return;
        };
        let n = self.slots.len();
        self.slots[hole] = EMPTY;
        let mut j = hole;
        loop {
            j = next(j, n);
            let s = self.slots[j];
            if s == EMPTY {
                return;
            }
            // `s` may stay at `j` only if its home is in (hole, j], going
            // round the end; else the hole is on its search path.
            let h = home(s, n);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                self.slots[hole] = s;
                self.slots[j] = EMPTY;
                hole = j;
            }
        }
    }

    /// Sizes the table for `len` fingerprints at 5/8 full and places the
    /// queue's fingerprints in it.
    fn rebuild(&mut self, len: usize) {
        let n = (len * 8 / 5).max(16);
        let mut slots = vec![EMPTY; n];
        for &fp in &self.order {
            Ghost::place(&mut slots, fp);
        }
        self.slots = slots;
    }

    /// Remembers `fp`, forgetting the oldest ones beyond `limit`.
    pub(super) fn push(&mut self, fp: u32, limit: usize) {
        let fp = stored(fp);
        if self.find(fp).is_some() {
            return;
        }
        while self.order.len() >= limit.max(1) {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.unplace(old);
        }
        // The queue is most of what a ghost costs.
        push_back_sparing(&mut self.order, fp);
        let len = self.order.len();
        // Grown past 7/8 full: a larger table. Shrunk below 1/4 full (the
        // limit follows the main queue, which can shrink): a smaller one.
        if len * 8 > self.slots.len() * 7 || (len * 4 < self.slots.len() && self.slots.len() > 64) {
            self.rebuild(len);
            if self.order.capacity() > 2 * len.max(32) {
                self.order.shrink_to(len.max(32) * 5 / 4);
            }
        } else {
            Ghost::place(&mut self.slots, fp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashSet, VecDeque};

    #[test]
    fn the_ghost_forgets_the_oldest_keys() {
        let mut g = Ghost::default();
        for fp in 0..10u32 {
            g.push(fp << 1, 4);
        }
        assert!((0..6).all(|fp| !g.contains(fp << 1)));
        assert!((6..10).all(|fp| g.contains(fp << 1)));
        assert_eq!(g.len(), 4);
    }

    #[test]
    fn a_churned_ghost_keeps_to_a_few_bytes_a_fingerprint() {
        // As in a full cache: one new fingerprint an eviction, the oldest
        // forgotten, ten times over.
        let limit = crate::testing::size(100_000, 300);
        let mut g = Ghost::default();
        let mut x = 1u32;
        for _ in 0..limit * 10 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            g.push(x, limit);
        }
        assert!(g.len() > limit * 99 / 100, "{}", g.len());
        let per = g.bytes() as f64 / g.len() as f64;
        // Queue 4-5 bytes (it grows by a quarter), set 4.6-6.4 at 5/8 to
        // 7/8 full.
        assert!(per <= 11.5, "{per:.1} bytes a fingerprint");
    }

    #[test]
    fn a_ghost_whose_limit_falls_gives_back_its_table() {
        let mut g = Ghost::default();
        // 50,000 fingerprints, then a limit of 1,000 (under Miri a tenth).
        let n = crate::testing::size(50_000, 5_000) as u32;
        for fp in 0..n {
            g.push(fp << 1, n as usize);
        }
        let big = g.bytes();
        let (small, end) = (n / 50, n + n / 5);
        for fp in n..end {
            g.push(fp << 1, small as usize);
        }
        assert_eq!(g.len(), small as usize);
        assert!(g.bytes() * 10 < big, "{} of {big} bytes", g.bytes());
        assert!((end - small..end).all(|fp| g.contains(fp << 1)));
    }

    proptest! {
        #![proptest_config(crate::testing::config(256))]

        /// Against a queue and a set: the same answers, whatever the mix of
        /// pushes, repeats and limits, with fingerprints crowded into few
        /// homes so that removals shift runs that wrap round the table.
        #[test]
        fn the_ghost_is_a_bounded_fifo_set(
            ops in proptest::collection::vec((0u32..200, 1usize..60), 1..crate::testing::size(2_000, 100)),
        ) {
            let mut g = Ghost::default();
            let mut order: VecDeque<u32> = VecDeque::new();
            let mut set: HashSet<u32> = HashSet::new();
            for (k, limit) in ops {
                let fp = k << 1;
                if !set.contains(&fp) {
                    while order.len() >= limit {
                        let old = order.pop_front().unwrap();
                        set.remove(&old);
                    }
                    order.push_back(fp);
                    set.insert(fp);
                }
                g.push(fp, limit);
                prop_assert_eq!(g.len(), order.len());
                for probe in 0..200u32 {
                    prop_assert_eq!(g.contains(probe << 1), set.contains(&(probe << 1)));
                }
            }
        }
    }
}
