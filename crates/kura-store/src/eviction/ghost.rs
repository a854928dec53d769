//! S3-FIFO's ghost queue: fingerprints of keys recently evicted from the
//! small queue, the oldest forgotten first, in one table (no queue beside
//! it): each fingerprint carries the tag of the epoch it came in, an epoch
//! being a twelfth of the ghost's limit, and the oldest epoch is forgotten
//! whole, in one pass over the table, when that brings the count nearest
//! the limit. So the ghost holds the last `limit` fingerprints give or take
//! half an epoch (4%), as a FIFO queue would exactly.
//!
//! In a full cache it holds about 1.4 fingerprints for every entry, so its
//! bytes count against the memory limit like the entries' (S3-FIFO's
//! `entry_bytes`). The table is 5/8 to 7/8 full ([`Slots`]): 4.6 to 6.4
//! bytes a fingerprint, where a queue and a set of them took 8.6 to 11.4.
//! The pass that forgets an epoch places the table's other fingerprints
//! again: about 15 slots an eviction, in order.

use super::slots::Slots;

/// Bits of a slot that hold its epoch's tag (never 0, so no slot is 0).
const TAG_BITS: u32 = 4;
const TAG_MASK: u32 = (1 << TAG_BITS) - 1;
/// Epochs in a ghost's limit.
const EPOCHS: usize = 12;

/// The tag after `t`: 1 to 15, round.
fn next_tag(t: u32) -> u32 {
    t % TAG_MASK + 1
}

/// A fingerprint's key in the table: its high 28 bits, never 0 (0 is kept
/// as 1, so those two are taken for one key, as two keys with the same
/// fingerprint are: a ghost may admit a key it did not see, rarely).
#[inline]
fn key(fp: u32) -> u32 {
    (fp >> TAG_BITS).max(1)
}

/// The ghost queue.
#[derive(Debug)]
pub(super) struct Ghost {
    /// Keys of fingerprints, each with its epoch's tag in the low bits.
    table: Slots,
    /// Fingerprints held of each tag.
    counts: [usize; 1 << TAG_BITS],
    /// The tag of the epoch new fingerprints join, and of the oldest held.
    current: u32,
    oldest: u32,
}

impl Default for Ghost {
    fn default() -> Self {
        Ghost {
            table: Slots::new(TAG_BITS),
            counts: [0; 1 << TAG_BITS],
            current: 1,
            oldest: 1,
        }
    }
}

impl Ghost {
    /// Fingerprints remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes the table holds.
    pub(super) fn bytes(&self) -> usize {
        self.table.bytes()
    }

    pub(super) fn contains(&self, fp: u32) -> bool {
        self.table.find(key(fp)).is_some()
    }

    /// Forgets the oldest epoch's fingerprints (when it is the current
    /// one, the ghost is empty after).
    fn forget_oldest(&mut self) {
        let tag = self.oldest;
        if self.counts[tag as usize] > 0 {
            self.table.retain(|v| v & TAG_MASK != tag);
            self.counts[tag as usize] = 0;
        }
        if tag != self.current {
            self.oldest = next_tag(tag);
        }
    }

    /// Remembers `fp`, forgetting the oldest ones to keep near `limit`.
    pub(super) fn push(&mut self, fp: u32, limit: usize) {
        let k = key(fp);
        if self.table.find(k).is_some() {
            return;
        }
        let limit = limit.max(1);
        // Whole epochs go while that brings the count nearer the limit (a
        // limit that falls, as the main queue shrinks, may take several).
        let mut rounds = 0;
        while self.table.len() >= limit
            && (self.table.len() + 1 - limit) * 2 > self.counts[self.oldest as usize]
            && rounds <= TAG_MASK
        {
            self.forget_oldest();
            rounds += 1;
        }
        self.table.insert(k << TAG_BITS | self.current);
        self.counts[self.current as usize] += 1;
        if self.counts[self.current as usize] >= (limit / EPOCHS).max(1) {
            if next_tag(self.current) == self.oldest {
                // Every tag is in use (the limit grew): the oldest goes.
                self.forget_oldest();
            }
            self.current = next_tag(self.current);
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
        // A limit of 120: epochs of 10.
        for fp in 1..1000u32 {
            g.push(fp << TAG_BITS, 120);
            let n = g.len();
            assert!((115..=125).contains(&n) || fp < 120, "{n} after {fp}");
        }
        assert!((1..1000 - 125).all(|fp| !g.contains(fp << TAG_BITS)));
        assert!((1000 - 115..1000).all(|fp| g.contains(fp << TAG_BITS)));
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
        assert!(g.len() > limit * 95 / 100, "{}", g.len());
        let per = g.bytes() as f64 / g.len() as f64;
        // The table at 5/8 to 7/8 full, the count half an epoch (1/24) either
        // side of the limit: at most 6.4 x 25/23.
        assert!(per <= 7.0, "{per:.1} bytes a fingerprint");
    }

    #[test]
    fn a_ghost_whose_limit_falls_gives_back_its_table() {
        let mut g = Ghost::default();
        // 50,000 fingerprints, then a limit of 1,000 (under Miri a tenth).
        let n = crate::testing::size(50_000, 5_000) as u32;
        for fp in 1..n {
            g.push(fp << TAG_BITS, n as usize);
        }
        let big = g.bytes();
        let (small, end) = (n / 50, n + n / 5);
        for fp in n..end {
            g.push(fp << TAG_BITS, small as usize);
        }
        let held = g.len();
        assert!(
            held.abs_diff(small as usize) <= small as usize / 20,
            "{held}"
        );
        assert!(g.bytes() * 10 < big, "{} of {big} bytes", g.bytes());
        let recent = small - small / 20;
        assert!((end - recent..end).all(|fp| g.contains(fp << TAG_BITS)));
    }

    proptest! {
        #![proptest_config(crate::testing::config(256))]

        /// Against queues of epochs, forgotten as the ghost's rule says:
        /// the same answers, whatever the mix of pushes, repeats and
        /// limits, with keys crowded into few homes so that the passes
        /// that forget an epoch move runs that wrap round the table.
        #[test]
        fn the_ghost_forgets_whole_epochs_oldest_first(
            ops in proptest::collection::vec((1u32..200, 1usize..200), 1..crate::testing::size(2_000, 100)),
        ) {
            let mut g = Ghost::default();
            let mut epochs: VecDeque<Vec<u32>> = VecDeque::from([Vec::new()]);
            let held = |e: &VecDeque<Vec<u32>>| e.iter().map(Vec::len).sum::<usize>();
            for (k, limit) in ops {
                let fp = k << TAG_BITS;
                let set: HashSet<u32> = epochs.iter().flatten().copied().collect();
                if !set.contains(&k) {
                    let mut rounds = 0;
                    while held(&epochs) >= limit
                        && (held(&epochs) + 1 - limit) * 2 > epochs[0].len()
                        && rounds <= 15
                    {
                        epochs.pop_front();
                        if epochs.is_empty() {
                            epochs.push_back(Vec::new());
                        }
                        rounds += 1;
                    }
                    epochs.back_mut().unwrap().push(k);
                    if epochs.back().unwrap().len() >= (limit / EPOCHS).max(1) {
                        epochs.push_back(Vec::new());
                        if epochs.len() > 15 {
                            epochs.pop_front();
                        }
                    }
                }
                g.push(fp, limit);
                prop_assert_eq!(g.len(), held(&epochs));
                let set: HashSet<u32> = epochs.iter().flatten().copied().collect();
                // Under Miri a tenth of the keys, spread over the range.
                for probe in (1..200u32).step_by(crate::testing::size(1, 10)) {
                    prop_assert_eq!(g.contains(probe << TAG_BITS), set.contains(&probe));
                }
            }
        }
    }
}
