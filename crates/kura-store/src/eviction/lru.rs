//! Exact LRU: a doubly linked list threaded through an array indexed by
//! slot. A read moves the entry to the head; the victim is the tail.

use super::EvictionPolicy;

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

/// Least recently used first.
#[derive(Debug)]
pub struct Lru {
    links: Vec<Link>,
    head: u32,
    tail: u32,
}

impl Default for Lru {
    fn default() -> Self {
        Lru {
            links: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }
}

impl Lru {
    fn unlink(&mut self, idx: u32) {
        let Link { prev, next } = self.links[idx as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.links[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, idx: u32) {
        self.links[idx as usize] = Link {
            prev: NIL,
            next: self.head,
        };
        if self.head != NIL {
            self.links[self.head as usize].prev = idx;
        } else {
            self.tail = idx;
        }
        self.head = idx;
    }
}

impl EvictionPolicy for Lru {
    fn insert(&mut self, idx: u32, _hash: u64) {
        let i = idx as usize;
        if i >= self.links.len() {
            self.links.resize(
                i + 1,
                Link {
                    prev: NIL,
                    next: NIL,
                },
            );
        }
        self.push_front(idx);
    }

    fn touch(&mut self, idx: u32) {
        if self.head != idx {
            self.unlink(idx);
            self.push_front(idx);
        }
    }

    fn touch_shared(&self, idx: u32) -> bool {
        // Already the most recent: nothing to move.
        self.head == idx
    }

    fn remove(&mut self, idx: u32) {
        self.unlink(idx);
    }

    fn victim(&mut self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    fn clear(&mut self) {
        self.links.clear();
        self.head = NIL;
        self.tail = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let mut l = Lru::default();
        for i in 0..4 {
            l.insert(i, 0);
        }
        assert_eq!(l.victim(), Some(0));
        assert!(!l.touch_shared(0));
        assert!(l.touch_shared(3));
        l.touch(0);
        assert!(l.touch_shared(0));
        assert_eq!(l.victim(), Some(1));
        l.remove(1);
        assert_eq!(l.victim(), Some(2));
        l.remove(2);
        l.remove(3);
        assert_eq!(l.victim(), Some(0));
        l.remove(0);
        assert_eq!(l.victim(), None);
    }
}
