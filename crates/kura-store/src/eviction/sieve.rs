//! SIEVE (Zhang et al., NSDI '24): one FIFO queue and a "visited" bit per
//! entry. A read only sets the bit, so hits never reorder the queue. A hand
//! walks from the tail towards the head, clearing bits, and stops at the
//! first entry that was not visited since the hand last passed: that is the
//! victim. New entries go in at the head, behind the hand, so a one-time
//! scan is evicted before entries that were read again.

use std::sync::atomic::Ordering;

use super::list::{Queue, NIL};
use super::{Entries, EvictionPolicy};

/// The visited bit in the entry's byte.
const VISITED: u8 = 1;

/// SIEVE eviction.
#[derive(Debug)]
pub struct Sieve {
    queue: Queue,
    hand: u32,
}

impl Default for Sieve {
    fn default() -> Self {
        Sieve {
            queue: Queue::default(),
            hand: NIL,
        }
    }
}

impl EvictionPolicy for Sieve {
    fn insert<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        self.queue.push_front(e, id);
        e.byte(id).store(0, Ordering::Relaxed);
    }

    #[inline]
    fn touch<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        e.byte(id).store(VISITED, Ordering::Relaxed);
    }

    #[inline]
    fn touch_shared<E: Entries>(&self, e: &E, id: u32) -> bool {
        e.byte(id).store(VISITED, Ordering::Relaxed);
        true
    }

    fn remove<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        if self.hand == id {
            self.hand = Queue::newer(e, id).unwrap_or(NIL);
        }
        self.queue.unlink(e, id);
    }

    fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32) {
        self.queue.replace(e, old, new);
        let b = e.byte(old).load(Ordering::Relaxed);
        e.byte(new).store(b, Ordering::Relaxed);
        if self.hand == old {
            self.hand = new;
        }
    }

    fn victim<E: Entries>(&mut self, e: &mut E) -> Option<u32> {
        let mut at = if self.hand == NIL {
            self.queue.tail()?
        } else {
            self.hand
        };
        while e.byte(at).swap(0, Ordering::Relaxed) & VISITED != 0 {
            at = match Queue::newer(e, at) {
                None => self.queue.tail()?,
                Some(prev) => prev,
            };
        }
        self.hand = at;
        Some(at)
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.hand = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::super::VecEntries;
    use super::*;

    fn filled(n: u32) -> (Sieve, VecEntries) {
        let mut s = Sieve::default();
        let mut e = VecEntries::default();
        for i in 0..n {
            e.reset(i, 0);
            s.insert(&mut e, i, 0);
        }
        (s, e)
    }

    #[test]
    fn visited_entries_survive_one_pass_of_the_hand() {
        let (mut s, mut e) = filled(4);
        s.touch(&mut e, 0, 0);
        s.touch(&mut e, 2, 0);
        // 0 is visited: the hand clears it and stops at 1.
        assert_eq!(s.victim(&mut e), Some(1));
        s.remove(&mut e, 1, 0);
        // The hand moved on to 2 (visited, cleared), then 3.
        assert_eq!(s.victim(&mut e), Some(3));
        s.remove(&mut e, 3, 0);
        // Wraps to the tail: 0 was cleared on the first pass.
        assert_eq!(s.victim(&mut e), Some(0));
        s.remove(&mut e, 0, 0);
        assert_eq!(s.victim(&mut e), Some(2));
        s.remove(&mut e, 2, 0);
        assert_eq!(s.victim(&mut e), None);
    }

    #[test]
    fn removing_the_entry_under_the_hand_moves_the_hand() {
        let (mut s, mut e) = filled(3);
        assert_eq!(s.victim(&mut e), Some(0));
        s.touch(&mut e, 1, 0);
        s.remove(&mut e, 0, 0);
        e.reset(0, 0);
        s.insert(&mut e, 0, 0);
        // Order head..tail: 0, 2, 1; the hand is past the tail's old
        // position, at 1 (visited, cleared), then 2.
        assert_eq!(s.victim(&mut e), Some(2));
    }

    #[test]
    fn a_replacement_keeps_its_place_and_its_bit() {
        let (mut s, mut e) = filled(3);
        s.touch(&mut e, 0, 0);
        e.reset(9, 0);
        s.replace(&mut e, 0, 9);
        // 9 took 0's place at the tail, visited: the hand passes it.
        assert_eq!(s.victim(&mut e), Some(1));
    }
}
