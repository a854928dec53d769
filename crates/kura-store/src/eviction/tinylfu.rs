//! W-TinyLFU (Einziger, Friedman and Manes, 2017): a small LRU window in
//! front of a segmented LRU main space, and a frequency sketch that decides
//! who gets into the main space. A new entry lives in the window (1% of the
//! entries) so a burst of recent keys is served; when it leaves the window
//! it joins the main space's probation segment as a candidate, and the next
//! eviction compares it with the probation segment's oldest entry: the one
//! the sketch has seen less often is evicted. An entry read while on
//! probation is protected (80% of the main space) until it ages out.
//!
//! The shard asks for a victim before it links the new entry, so admission
//! is decided there: [`victim`](EvictionPolicy::victim) returns either the
//! candidate (refused) or the entry it displaces, both live indices.

use super::list::{ensure_slot, Link, Node, Queue, NIL};
use super::sketch::Sketch;
use super::{fingerprint, EvictionPolicy};

/// The window's share of the entries, in percent.
const WINDOW_PERCENT: usize = 1;
/// The protected segment's share of the main space, in percent.
const PROTECTED_PERCENT: usize = 80;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Region {
    #[default]
    Window,
    Probation,
    Protected,
}

#[derive(Debug, Default, Clone, Copy)]
struct LfuNode {
    link: Link,
    fingerprint: u32,
    region: Region,
}

impl Node for LfuNode {
    fn link(&self) -> &Link {
        &self.link
    }
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// W-TinyLFU eviction.
#[derive(Debug)]
pub struct TinyLfu {
    nodes: Vec<LfuNode>,
    window: Queue,
    probation: Queue,
    protected: Queue,
    sketch: Sketch,
    /// The entry that left the window last and has not been judged yet.
    candidate: u32,
}

impl Default for TinyLfu {
    fn default() -> Self {
        TinyLfu {
            nodes: Vec::new(),
            window: Queue::default(),
            probation: Queue::default(),
            protected: Queue::default(),
            sketch: Sketch::default(),
            candidate: NIL,
        }
    }
}

impl TinyLfu {
    fn len(&self) -> usize {
        self.window.len() + self.probation.len() + self.protected.len()
    }

    /// The queue of `region` and the nodes it is threaded through.
    fn parts(&mut self, region: Region) -> (&mut Queue, &mut [LfuNode]) {
        let queue = match region {
            Region::Window => &mut self.window,
            Region::Probation => &mut self.probation,
            Region::Protected => &mut self.protected,
        };
        (queue, &mut self.nodes)
    }

    /// Moves `idx` from its region to the head of `to`.
    fn shift(&mut self, idx: u32, to: Region) {
        let (queue, nodes) = self.parts(self.nodes[idx as usize].region);
        queue.unlink(nodes, idx);
        let (queue, nodes) = self.parts(to);
        queue.push_front(nodes, idx);
        nodes[idx as usize].region = to;
    }

    /// Moves the window's oldest entries to probation while the window is
    /// over its share; the last one moved is the next candidate.
    fn spill_window(&mut self) {
        let max = (self.len() * WINDOW_PERCENT / 100).max(1);
        while self.window.len() > max {
            let Some(idx) = self.window.tail() else {
                break;
            };
            self.shift(idx, Region::Probation);
            self.candidate = idx;
        }
    }

    /// Keeps the protected segment within its share by demoting its oldest
    /// entries to probation.
    fn trim_protected(&mut self) {
        let main = self.probation.len() + self.protected.len();
        let max = main * PROTECTED_PERCENT / 100;
        while self.protected.len() > max {
            let Some(idx) = self.protected.tail() else {
                break;
            };
            self.shift(idx, Region::Probation);
        }
    }

    fn frequency(&self, idx: u32) -> u32 {
        self.sketch.estimate(self.nodes[idx as usize].fingerprint)
    }
}

impl EvictionPolicy for TinyLfu {
    fn insert(&mut self, idx: u32, hash: u64) {
        ensure_slot(&mut self.nodes, idx);
        let fp = fingerprint(hash);
        self.sketch.ensure_capacity(self.len() + 1);
        self.sketch.increment(fp);
        self.window.push_front(&mut self.nodes, idx);
        let node = &mut self.nodes[idx as usize];
        node.fingerprint = fp;
        node.region = Region::Window;
        self.spill_window();
    }

    fn touch(&mut self, idx: u32) {
        let node = self.nodes[idx as usize];
        self.sketch.increment(node.fingerprint);
        match node.region {
            Region::Window => self.window.move_to_front(&mut self.nodes, idx),
            Region::Protected => self.protected.move_to_front(&mut self.nodes, idx),
            Region::Probation => {
                if self.candidate == idx {
                    // Read again before it was judged: no need to judge.
                    self.candidate = NIL;
                }
                self.shift(idx, Region::Protected);
                self.trim_protected();
            }
        }
    }

    fn remove(&mut self, idx: u32) {
        if self.candidate == idx {
            self.candidate = NIL;
        }
        let (queue, nodes) = self.parts(self.nodes[idx as usize].region);
        queue.unlink(nodes, idx);
    }

    fn victim(&mut self) -> Option<u32> {
        let Some(oldest) = self.probation.tail().or(self.protected.tail()) else {
            return self.window.tail();
        };
        let candidate = std::mem::replace(&mut self.candidate, NIL);
        if candidate == NIL || candidate == oldest {
            return Some(oldest);
        }
        if self.frequency(candidate) > self.frequency(oldest) {
            Some(oldest)
        } else {
            Some(candidate)
        }
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.window.clear();
        self.probation.clear();
        self.protected.clear();
        self.sketch.clear();
        self.candidate = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(i: u32) -> u64 {
        u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn a_rare_newcomer_is_refused_in_favour_of_a_popular_entry() {
        let mut t = TinyLfu::default();
        for i in 0..100 {
            t.insert(i, hash(i));
        }
        // The oldest entries on probation are popular.
        for _ in 0..5 {
            for i in 0..100 {
                t.touch(i);
            }
        }
        t.insert(100, hash(100));
        t.insert(101, hash(101));
        // 100 left the window as the candidate; seen once, it loses.
        let v = t.victim().unwrap();
        assert_eq!(v, 100);
        t.remove(v);
    }

    #[test]
    fn a_popular_newcomer_displaces_a_rare_entry() {
        let mut t = TinyLfu::default();
        for i in 0..100 {
            t.insert(i, hash(i));
        }
        // Key 500 was seen often before (evicted, say): its count stays.
        for _ in 0..6 {
            t.sketch.increment(fingerprint(hash(500)));
        }
        t.insert(100, hash(500));
        t.insert(101, hash(101));
        let v = t.victim().unwrap();
        assert_ne!(v, 100);
        assert_eq!(t.nodes[v as usize].region, Region::Probation);
    }

    #[test]
    fn every_entry_is_eventually_a_victim() {
        let mut t = TinyLfu::default();
        for i in 0..300 {
            t.insert(i, hash(i));
            for _ in 0..i % 3 {
                t.touch(i);
            }
        }
        let mut seen = Vec::new();
        while let Some(v) = t.victim() {
            t.remove(v);
            seen.push(v);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..300).collect::<Vec<_>>());
    }
}
