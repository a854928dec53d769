//! SIEVE (Zhang et al., NSDI '24): one FIFO queue and a "visited" bit per
//! entry. A read only sets the bit, so hits never reorder the queue. A hand
//! walks from the tail towards the head, clearing bits, and stops at the
//! first entry that was not visited since the hand last passed: that is the
//! victim. New entries go in at the head, behind the hand, so a one-time
//! scan is evicted before entries that were read again.

use std::sync::atomic::{AtomicBool, Ordering};

use super::list::{ensure_slot, Link, Node, Queue, NIL};
use super::EvictionPolicy;

#[derive(Debug, Default)]
struct SieveNode {
    link: Link,
    /// Atomic so that reads under a shared lock can set it.
    visited: AtomicBool,
}

impl Node for SieveNode {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// SIEVE eviction.
#[derive(Debug)]
pub struct Sieve {
    nodes: Vec<SieveNode>,
    queue: Queue,
    /// The next entry the hand looks at; `NIL` means the tail.
    hand: u32,
}

impl Default for Sieve {
    fn default() -> Self {
        Sieve {
            nodes: Vec::new(),
            queue: Queue::default(),
            hand: NIL,
        }
    }
}

impl EvictionPolicy for Sieve {
    fn insert(&mut self, idx: u32, _hash: u64) {
        ensure_slot(&mut self.nodes, idx);
        self.queue.push_front(&mut self.nodes, idx);
        *self.nodes[idx as usize].visited.get_mut() = false;
    }

    #[inline]
    fn touch(&mut self, idx: u32) {
        *self.nodes[idx as usize].visited.get_mut() = true;
    }

    #[inline]
    fn touch_shared(&self, idx: u32) -> bool {
        self.nodes[idx as usize]
            .visited
            .store(true, Ordering::Relaxed);
        true
    }

    fn remove(&mut self, idx: u32) {
        if self.hand == idx {
            // The hand moves on towards the head, as after an eviction.
            self.hand = self.nodes[idx as usize].link.prev;
        }
        self.queue.unlink(&mut self.nodes, idx);
    }

    fn victim(&mut self) -> Option<u32> {
        let mut at = if self.hand == NIL {
            self.queue.tail()?
        } else {
            self.hand
        };
        // Ends: every step clears a bit that a read set, and after one turn
        // every bit is clear.
        while std::mem::take(self.nodes[at as usize].visited.get_mut()) {
            at = match self.nodes[at as usize].link.prev {
                NIL => self.queue.tail()?,
                prev => prev,
            };
        }
        self.hand = at;
        Some(at)
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.queue.clear();
        self.hand = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visited_entries_survive_one_pass_of_the_hand() {
        let mut s = Sieve::default();
        for i in 0..4 {
            s.insert(i, 0);
        }
        s.touch(0);
        s.touch(2);
        // 0 is visited: the hand clears it and stops at 1.
        assert_eq!(s.victim(), Some(1));
        s.remove(1);
        // The hand moved on to 2 (visited, cleared), then 3.
        assert_eq!(s.victim(), Some(3));
        s.remove(3);
        // Wraps to the tail: 0 was cleared on the first pass.
        assert_eq!(s.victim(), Some(0));
        s.remove(0);
        assert_eq!(s.victim(), Some(2));
        s.remove(2);
        assert_eq!(s.victim(), None);
    }

    #[test]
    fn removing_the_entry_under_the_hand_moves_the_hand() {
        let mut s = Sieve::default();
        for i in 0..3 {
            s.insert(i, 0);
        }
        assert_eq!(s.victim(), Some(0));
        s.touch(1);
        s.remove(0);
        s.insert(0, 0);
        // Order head..tail: 0, 2, 1; the hand is past the tail's old
        // position, at 1 (visited, cleared), then 2.
        assert_eq!(s.victim(), Some(2));
    }
}
