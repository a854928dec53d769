//! Exact LRU: a doubly linked list threaded through the entries. A read
//! moves the entry to the head; the victim is the tail.

use super::list::Queue;
use super::{Entries, EvictionPolicy};

/// Exact least-recently-used eviction.
#[derive(Debug, Default)]
pub struct Lru {
    list: Queue,
}

impl EvictionPolicy for Lru {
    fn insert<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        self.list.push_front(e, id);
    }

    fn touch<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        self.list.move_to_front(e, id);
    }

    /// A read of the newest entry changes nothing.
    fn touch_shared<E: Entries>(&self, _e: &E, id: u32) -> bool {
        self.list.head() == Some(id)
    }

    fn remove<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        self.list.unlink(e, id);
    }

    fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32) {
        self.list.replace(e, old, new);
    }

    fn victim<E: Entries>(&mut self, _e: &mut E) -> Option<u32> {
        self.list.tail()
    }

    fn clear(&mut self) {
        self.list.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::VecEntries;
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let mut l = Lru::default();
        let mut e = VecEntries::default();
        for i in 0..4 {
            e.reset(i, 0);
            l.insert(&mut e, i, 0);
        }
        assert_eq!(l.victim(&mut e), Some(0));
        assert!(!l.touch_shared(&e, 0));
        assert!(l.touch_shared(&e, 3));
        l.touch(&mut e, 0, 0);
        assert!(l.touch_shared(&e, 0));
        assert_eq!(l.victim(&mut e), Some(1));
        l.remove(&mut e, 1, 0);
        assert_eq!(l.victim(&mut e), Some(2));
        e.reset(7, 0);
        l.replace(&mut e, 2, 7);
        assert_eq!(l.victim(&mut e), Some(7));
        l.remove(&mut e, 7, 0);
        l.remove(&mut e, 3, 0);
        assert_eq!(l.victim(&mut e), Some(0));
        l.remove(&mut e, 0, 0);
        assert_eq!(l.victim(&mut e), None);
    }
}
