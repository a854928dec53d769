//! [`VecEntries`]: per-entry policy state in vectors indexed by id, and a
//! small hash index of the linked ids, to drive a policy without a store
//! (the hit-ratio tests, simulations, unit tests).

use std::sync::atomic::AtomicU8;

use super::list::NIL;
use super::Entries;

/// Per-entry policy state kept in vectors indexed by id, with an index of
/// the linked ids standing for a shard's (linear probing, homes scaled from
/// the hash's low 32 bits, so positions run in hash order as a shard's
/// do). Ids should be dense; [`VecEntries::ensure`] makes room for one.
#[derive(Debug, Default)]
pub struct VecEntries {
    bytes: Vec<AtomicU8>,
    links: Vec<[u32; 2]>,
    hashes: Vec<u64>,
    /// Index position by id (`NIL`: not linked).
    position: Vec<u32>,
    /// Ids by index position (`NIL`: empty).
    slots: Vec<u32>,
    linked: usize,
}

impl VecEntries {
    /// Makes `id` a valid id, with a zero byte.
    pub fn ensure(&mut self, id: u32) {
        let i = id as usize;
        if i >= self.bytes.len() {
            self.bytes.resize_with(i + 1, AtomicU8::default);
            self.links.resize(i + 1, [NIL; 2]);
            self.hashes.resize(i + 1, 0);
            self.position.resize(i + 1, NIL);
        }
    }

    /// Readies `id` for a new entry whose key hashes to `hash`, and links
    /// it: room for it, its byte zeroed as a new block's would be, and the
    /// id in the index (as a shard links an entry before telling its
    /// policy).
    pub fn reset(&mut self, id: u32, hash: u64) {
        self.fresh(id, hash);
        if (self.linked + 1) * 5 > self.slots.len() * 4 {
            self.rebuild((self.linked + 1) * 2 + 16);
        }
        self.place(id);
        self.linked += 1;
    }

    /// Takes `id` out of the index (as a shard unlinks an entry); nothing
    /// if it is not there. No other entry moves (as in a shard's index);
    /// the position is simply empty again, since this index is never
    /// searched by hash (it knows each id's position).
    pub fn unlink(&mut self, id: u32) {
        let Some(&at) = self.position.get(id as usize) else {
            return;
        };
        if at == NIL {
            return;
        }
        self.position[id as usize] = NIL;
        self.slots[at as usize] = NIL;
        self.linked -= 1;
    }

    /// Readies `new` for a new version of `old`'s entry (the same key,
    /// `hash`) and puts it at `old`'s index position, as a shard's index
    /// replaces an offset in place; `old` is unlinked.
    pub fn relink(&mut self, old: u32, new: u32, hash: u64) {
        self.fresh(new, hash);
        let at = self.position[old as usize];
        assert!(at != NIL, "relinking {old}, which is not linked");
        self.position[old as usize] = NIL;
        self.position[new as usize] = at;
        self.slots[at as usize] = new;
    }

    /// Room for `id`, not linked, its byte zeroed as a new block's would
    /// be, with its key hash.
    fn fresh(&mut self, id: u32, hash: u64) {
        self.ensure(id);
        self.unlink(id);
        *self.bytes[id as usize].get_mut() = 0;
        self.hashes[id as usize] = hash;
    }

    fn home(&self, hash: u64) -> usize {
        ((u64::from(hash as u32) * self.slots.len() as u64) >> 32) as usize
    }

    fn place(&mut self, id: u32) {
        let n = self.slots.len();
        let mut at = self.home(self.hashes[id as usize]);
        while self.slots[at] != NIL {
            at = (at + 1) % n;
        }
        self.slots[at] = id;
        self.position[id as usize] = at as u32;
    }

    fn rebuild(&mut self, n: usize) {
        let ids: Vec<u32> = self.slots.iter().copied().filter(|&i| i != NIL).collect();
        self.slots = vec![NIL; n];
        for id in ids {
            self.place(id);
        }
    }
}

impl Entries for VecEntries {
    fn byte(&self, id: u32) -> &AtomicU8 {
        &self.bytes[id as usize]
    }
    fn links(&self, id: u32) -> [u32; 2] {
        self.links[id as usize]
    }
    fn set_links(&mut self, id: u32, links: [u32; 2]) {
        self.links[id as usize] = links;
    }
    fn hash(&self, id: u32) -> u64 {
        self.hashes[id as usize]
    }
    fn positions(&self) -> usize {
        self.slots.len()
    }
    fn at(&self, pos: usize) -> Option<u32> {
        self.slots.get(pos).copied().filter(|&id| id != NIL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_holds_exactly_the_linked_ids() {
        let mut e = VecEntries::default();
        // Few distinct hashes: long runs, with holes in them.
        let h = |id: u32| u64::from(id % 7).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for id in 0..200 {
            e.reset(id, h(id));
        }
        for id in (0..200).step_by(3) {
            e.unlink(id);
        }
        e.unlink(1);
        e.unlink(1);
        let mut seen: Vec<u32> = (0..e.positions()).filter_map(|p| e.at(p)).collect();
        seen.sort_unstable();
        let want: Vec<u32> = (0..200).filter(|i| i % 3 != 0 && *i != 1).collect();
        assert_eq!(seen, want);
    }
}
