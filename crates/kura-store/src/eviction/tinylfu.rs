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

use std::sync::atomic::Ordering;

use super::list::{Queue, NIL};
use super::sketch::Sketch;
use super::{fingerprint, Entries, EvictionPolicy};

/// The window's share of the entries, in percent.
const WINDOW_PERCENT: usize = 1;
/// The protected segment's share of the main space, in percent.
const PROTECTED_PERCENT: usize = 80;

/// Where an entry is, in its byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    Window = 0,
    Probation = 1,
    Protected = 2,
}

fn region<E: Entries>(e: &E, id: u32) -> Region {
    match e.byte(id).load(Ordering::Relaxed) {
        1 => Region::Probation,
        2 => Region::Protected,
        _ => Region::Window,
    }
}

/// W-TinyLFU eviction.
#[derive(Debug)]
pub struct TinyLfu {
    window: Queue,
    probation: Queue,
    protected: Queue,
    sketch: Sketch,
    /// The entry that last left the window, waiting to be judged against
    /// the probation segment's oldest.
    candidate: u32,
}

impl Default for TinyLfu {
    fn default() -> Self {
        TinyLfu {
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

    fn queue(&mut self, region: Region) -> &mut Queue {
        match region {
            Region::Window => &mut self.window,
            Region::Probation => &mut self.probation,
            Region::Protected => &mut self.protected,
        }
    }

    /// Moves `id` to the head of `to`.
    fn shift<E: Entries>(&mut self, e: &mut E, id: u32, to: Region) {
        self.queue(region(e, id)).unlink(e, id);
        self.queue(to).push_front(e, id);
        e.byte(id).store(to as u8, Ordering::Relaxed);
    }

    /// Moves the window's oldest entries to probation while the window is
    /// over its share; the last one moved becomes the candidate.
    fn spill_window<E: Entries>(&mut self, e: &mut E) {
        let max = (self.len() * WINDOW_PERCENT / 100).max(1);
        while self.window.len() > max {
            let Some(id) = self.window.tail() else {
                break;
            };
            self.shift(e, id, Region::Probation);
            self.candidate = id;
        }
    }

    /// Demotes protected entries to probation while the protected segment
    /// is over its share.
    fn trim_protected<E: Entries>(&mut self, e: &mut E) {
        let main = self.probation.len() + self.protected.len();
        let max = main * PROTECTED_PERCENT / 100;
        while self.protected.len() > max {
            let Some(id) = self.protected.tail() else {
                break;
            };
            self.shift(e, id, Region::Probation);
        }
    }

    fn frequency<E: Entries>(&self, e: &E, id: u32) -> u32 {
        self.sketch.estimate(fingerprint(e.hash(id)))
    }
}

impl EvictionPolicy for TinyLfu {
    fn insert<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        self.sketch.ensure_capacity(self.len() + 1);
        self.sketch.increment(fingerprint(hash));
        self.window.push_front(e, id);
        e.byte(id).store(Region::Window as u8, Ordering::Relaxed);
        self.spill_window(e);
    }

    fn touch<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        self.sketch.increment(fingerprint(hash));
        match region(e, id) {
            Region::Window => self.window.move_to_front(e, id),
            Region::Protected => self.protected.move_to_front(e, id),
            Region::Probation => {
                if self.candidate == id {
                    // Read again before it was judged: no need to judge.
                    self.candidate = NIL;
                }
                self.shift(e, id, Region::Protected);
                self.trim_protected(e);
            }
        }
    }

    fn remove<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        if self.candidate == id {
            self.candidate = NIL;
        }
        self.queue(region(e, id)).unlink(e, id);
    }

    fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32) {
        let r = region(e, old);
        self.queue(r).replace(e, old, new);
        e.byte(new).store(r as u8, Ordering::Relaxed);
        if self.candidate == old {
            self.candidate = new;
        }
    }

    fn victim<E: Entries>(&mut self, e: &mut E) -> Option<u32> {
        let Some(oldest) = self.probation.tail().or(self.protected.tail()) else {
            return self.window.tail();
        };
        let candidate = std::mem::replace(&mut self.candidate, NIL);
        if candidate == NIL || candidate == oldest {
            return Some(oldest);
        }
        if self.frequency(e, candidate) > self.frequency(e, oldest) {
            Some(oldest)
        } else {
            Some(candidate)
        }
    }

    fn clear(&mut self) {
        self.window.clear();
        self.probation.clear();
        self.protected.clear();
        self.sketch.clear();
        self.candidate = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::super::VecEntries;
    use super::*;

    fn hash(i: u32) -> u64 {
        u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn add(t: &mut TinyLfu, e: &mut VecEntries, id: u32, h: u64) {
        e.reset(id, h);
        t.insert(e, id, h);
    }

    #[test]
    fn a_rare_newcomer_is_refused_in_favour_of_a_popular_entry() {
        let mut t = TinyLfu::default();
        let mut e = VecEntries::default();
        for i in 0..100 {
            add(&mut t, &mut e, i, hash(i));
        }
        // The oldest entries on probation are popular.
        for _ in 0..5 {
            for i in 0..100 {
                t.touch(&mut e, i, hash(i));
            }
        }
        add(&mut t, &mut e, 100, hash(100));
        add(&mut t, &mut e, 101, hash(101));
        // 100 left the window as the candidate; seen once, it loses.
        let v = t.victim(&mut e).unwrap();
        assert_eq!(v, 100);
        t.remove(&mut e, v, hash(100));
    }

    #[test]
    fn a_popular_newcomer_displaces_a_rare_entry() {
        let mut t = TinyLfu::default();
        let mut e = VecEntries::default();
        for i in 0..100 {
            add(&mut t, &mut e, i, hash(i));
        }
        // Key 500 was seen often before (evicted, say): its count stays.
        for _ in 0..6 {
            t.sketch.increment(fingerprint(hash(500)));
        }
        add(&mut t, &mut e, 100, hash(500));
        add(&mut t, &mut e, 101, hash(101));
        let v = t.victim(&mut e).unwrap();
        assert_ne!(v, 100);
        assert_eq!(region(&e, v), Region::Probation);
    }

    #[test]
    fn every_entry_is_eventually_a_victim() {
        let mut t = TinyLfu::default();
        let mut e = VecEntries::default();
        for i in 0..300 {
            add(&mut t, &mut e, i, hash(i));
            for _ in 0..i % 3 {
                t.touch(&mut e, i, hash(i));
            }
        }
        let mut seen = Vec::new();
        while let Some(v) = t.victim(&mut e) {
            t.remove(&mut e, v, hash(v));
            seen.push(v);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..300).collect::<Vec<_>>());
    }
}
