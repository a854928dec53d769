//! S3-FIFO (Yang et al., SOSP '23): three FIFO queues. New entries go to a
//! small queue (a tenth of the entries); one that is read twice before it
//! leaves the small queue moves on to the main queue, the others are
//! evicted and remembered in a ghost queue of key fingerprints. A key that
//! comes back while its ghost is remembered goes straight to the main
//! queue. The main queue is a CLOCK with a two-bit read counter: an entry
//! whose count is not zero when it reaches the tail goes round again with
//! its count lowered. Reads only bump a counter, never reorder a queue.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};

use hashbrown::HashTable;

use super::list::{ensure_slot, Link, Node, Queue, NIL};
use super::{fingerprint, EvictionPolicy};

/// The small queue's share of the entries, in percent.
const SMALL_PERCENT: usize = 10;
/// Keys the ghost queue remembers, in percent of the main queue's share.
/// Measured on the ARC traces (BENCHMARKS.md): 100% (the paper's choice)
/// falls short of ARC on P3 at 262,144 entries, 200% on P6 at 65,536.
const GHOST_PERCENT: usize = 160;
/// The highest read count kept.
const FREQ_MAX: u8 = 3;
/// Reads an entry needs while in the small queue to move to the main one.
const PROMOTE_READS: u8 = 2;

#[derive(Debug, Default)]
struct FifoNode {
    link: Link,
    fingerprint: u32,
    /// Reads since the entry was linked or last passed over, up to
    /// [`FREQ_MAX`]; atomic so that reads under a shared lock can count.
    freq: AtomicU8,
    main: bool,
}

impl Node for FifoNode {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// Fingerprints of keys recently evicted from the small queue, oldest
/// first, and a set of them for O(1) lookups. A key cannot be evicted from
/// the small queue while its ghost is remembered (it would have gone to the
/// main queue), so a fingerprint is in the queue once, barring collisions.
#[derive(Debug, Default)]
struct Ghost {
    order: VecDeque<u32>,
    set: HashTable<u32>,
}

/// The set's hash of a fingerprint (already uniform, but the table wants
/// its high bits to vary too).
fn ghost_hash(fp: u32) -> u64 {
    u64::from(fp).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Ghost {
    fn contains(&self, fp: u32) -> bool {
        self.set.find(ghost_hash(fp), |&g| g == fp).is_some()
    }

    /// Remembers `fp`, forgetting the oldest ones beyond `limit`.
    fn push(&mut self, fp: u32, limit: usize) {
        if self.contains(fp) {
            return;
        }
        self.order.push_back(fp);
        self.set
            .insert_unique(ghost_hash(fp), fp, |&g| ghost_hash(g));
        while self.order.len() > limit.max(1) {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Ok(entry) = self.set.find_entry(ghost_hash(old), |&g| g == old) {
                entry.remove();
            }
        }
    }

    fn clear(&mut self) {
        self.order.clear();
        self.set.clear();
    }
}

/// S3-FIFO eviction.
#[derive(Debug)]
pub struct S3Fifo {
    nodes: Vec<FifoNode>,
    small: Queue,
    main: Queue,
    ghost: Ghost,
    /// The victim last returned while still in the small queue: when the
    /// shard removes it, it was evicted (not deleted) and leaves a ghost.
    pending: u32,
}

impl Default for S3Fifo {
    fn default() -> Self {
        S3Fifo {
            nodes: Vec::new(),
            small: Queue::default(),
            main: Queue::default(),
            ghost: Ghost::default(),
            pending: NIL,
        }
    }
}

impl S3Fifo {
    fn len(&self) -> usize {
        self.small.len() + self.main.len()
    }

    /// Moves `idx` from the small queue to the main one. It keeps its read
    /// count, so an entry read often while new gets extra turns there.
    fn promote(&mut self, idx: u32) {
        self.small.unlink(&mut self.nodes, idx);
        self.main.push_front(&mut self.nodes, idx);
        self.nodes[idx as usize].main = true;
    }
}

impl EvictionPolicy for S3Fifo {
    fn insert(&mut self, idx: u32, hash: u64) {
        ensure_slot(&mut self.nodes, idx);
        let fp = fingerprint(hash);
        let main = self.ghost.contains(fp);
        if main {
            self.main.push_front(&mut self.nodes, idx);
        } else {
            self.small.push_front(&mut self.nodes, idx);
        }
        let node = &mut self.nodes[idx as usize];
        node.fingerprint = fp;
        *node.freq.get_mut() = 0;
        node.main = main;
    }

    #[inline]
    fn touch(&mut self, idx: u32) {
        let freq = self.nodes[idx as usize].freq.get_mut();
        *freq = (*freq + 1).min(FREQ_MAX);
    }

    #[inline]
    fn touch_shared(&self, idx: u32) -> bool {
        // A load and a store, not a read-modify-write: two readers racing
        // may count one read instead of two, which the policy tolerates.
        let freq = &self.nodes[idx as usize].freq;
        let f = freq.load(Ordering::Relaxed);
        if f < FREQ_MAX {
            freq.store(f + 1, Ordering::Relaxed);
        }
        true
    }

    fn remove(&mut self, idx: u32) {
        let (main, fingerprint) = {
            let node = &self.nodes[idx as usize];
            (node.main, node.fingerprint)
        };
        if main {
            self.main.unlink(&mut self.nodes, idx);
        } else {
            self.small.unlink(&mut self.nodes, idx);
            if self.pending == idx {
                let main_share = self.len() * (100 - SMALL_PERCENT) / 100;
                let limit = self.main.len().max(main_share) * GHOST_PERCENT / 100;
                self.ghost.push(fingerprint, limit);
            }
        }
        if self.pending == idx {
            self.pending = NIL;
        }
    }

    fn victim(&mut self) -> Option<u32> {
        // Ends: each turn either returns, moves an entry from the small
        // queue to the main one (at most once per entry), or lowers a
        // main-queue counter (at most three times per entry).
        loop {
            let small_target = (self.len() * SMALL_PERCENT / 100).max(1);
            if self.small.len() >= small_target || self.main.is_empty() {
                let idx = self.small.tail()?;
                if *self.nodes[idx as usize].freq.get_mut() >= PROMOTE_READS {
                    self.promote(idx);
                    continue;
                }
                self.pending = idx;
                return Some(idx);
            }
            let idx = self.main.tail()?;
            let freq = self.nodes[idx as usize].freq.get_mut();
            if *freq == 0 {
                self.pending = NIL;
                return Some(idx);
            }
            *freq -= 1;
            self.main.move_to_front(&mut self.nodes, idx);
        }
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.small.clear();
        self.main.clear();
        self.ghost.clear();
        self.pending = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_twice_outlast_one_time_entries() {
        let mut s = S3Fifo::default();
        for i in 0..10 {
            s.insert(i, u64::from(i) << 40);
        }
        s.touch(0);
        s.touch(0);
        s.touch(1);
        // 0 was read twice: it moves to the main queue; 1, read once, is
        // evicted like the others.
        assert_eq!(s.victim(), Some(1));
        s.remove(1);
        assert!(s.nodes[0].main);
    }

    #[test]
    fn reads_under_a_shared_lock_count_too() {
        let mut s = S3Fifo::default();
        for i in 0..10 {
            s.insert(i, u64::from(i) << 40);
        }
        assert!(s.touch_shared(0));
        assert!(s.touch_shared(0));
        assert_eq!(s.victim(), Some(1));
        assert!(s.nodes[0].main);
    }

    #[test]
    fn an_evicted_key_that_returns_goes_to_the_main_queue() {
        let mut s = S3Fifo::default();
        for i in 0..10 {
            s.insert(i, u64::from(i) * 0x9e37_79b9);
        }
        let v = s.victim().unwrap();
        assert_eq!(v, 0);
        s.remove(v);
        s.insert(0, 0);
        assert!(s.nodes[0].main);
        // A deleted key leaves no ghost.
        s.remove(5);
        s.insert(5, 5 * 0x9e37_79b9);
        assert!(!s.nodes[5].main);
    }

    #[test]
    fn the_ghost_forgets_the_oldest_keys() {
        let mut g = Ghost::default();
        for fp in 0..10 {
            g.push(fp, 4);
        }
        assert!((0..6).all(|fp| !g.contains(fp)));
        assert!((6..10).all(|fp| g.contains(fp)));
        assert_eq!(g.order.len(), 4);
    }

    #[test]
    fn every_entry_is_eventually_a_victim() {
        let mut s = S3Fifo::default();
        for i in 0..50 {
            s.insert(i, u64::from(i));
            for _ in 0..i % 5 {
                s.touch(i);
            }
        }
        let mut seen = Vec::new();
        while let Some(v) = s.victim() {
            s.remove(v);
            seen.push(v);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
    }
}
