//! The table under a shard's flash map (`index.rs`): open addressing with
//! linear probing over fixed 24-byte slots, growing by a quarter.
//!
//! A slot keeps a tag of the key's hash (30 bits, fewer for a tier of very
//! many pages), the record's hits (saturated at [`HITS_MAX`]), its page,
//! offset and length, packed in 96 bits ([`Packing`], `packing.rs`), and
//! its page's generation, deadline and last access. The tag is the table's key: two
//! keys of one tag share a slot (the later one wins; the record holds its
//! key, checked on every read, so the other key reads as a miss), and the
//! home position is a function of the tag alone, so every operation on a
//! tag sees the same slot.
//!
//! Homes are monotone in the tag (`tag * cap >> tag_bits`) and slots never wrap
//! (a run may spill into a margin after the last home): the slots in use
//! are in increasing tag order, each at or after its home with no empty
//! slot in between. A lookup stops at the first empty slot or larger tag;
//! an insert shifts the rest of its run right by one; a removal shifts the
//! run's displaced slots back by one.

use super::index::Loc;
pub(crate) use super::packing::{Packing, HITS_MAX};

/// Homes of a new table.
const FIRST_CAP: usize = 64;

/// One record's slot: empty when `lo` is 0 (a record's length, packed in
/// it, is never 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    /// The tag and the page's high bits ([`Packing`]).
    hi: u32,
    gen: u32,
    exptime: u32,
    last_access: u32,
    /// Hits, offset, length and the page's low bits.
    lo: u64,
}

const EMPTY: Slot = Slot {
    hi: 0,
    gen: 0,
    exptime: 0,
    last_access: 0,
    lo: 0,
};

impl Slot {
    fn is_empty(&self) -> bool {
        self.lo == 0
    }
}

/// Records by tag.
#[derive(Debug)]
pub(crate) struct Table {
    packing: Packing,
    /// Homes `0..cap`, then a margin for the last runs.
    slots: Vec<Slot>,
    cap: usize,
    len: usize,
}

/// What an insert displaced: the record it replaced (the same tag), and
/// one it forgot to stay within its bytes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Displaced {
    pub replaced: Option<Loc>,
    pub forgotten: Option<Loc>,
}

fn margin(cap: usize) -> usize {
    cap / 64 + 32
}

impl Table {
    pub(crate) fn new(packing: Packing) -> Table {
        Table {
            packing,
            slots: Vec::new(),
            cap: 0,
            len: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the slots allocated.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
    }

    /// Bytes the table would take after its next growth.
    fn grown_bytes(&self) -> usize {
        let cap = Self::next_cap(self.cap);
        (cap + margin(cap)) * std::mem::size_of::<Slot>()
    }

    fn next_cap(cap: usize) -> usize {
        (cap + cap / 4).max(FIRST_CAP)
    }

    fn home(&self, tag: u32) -> usize {
        ((u64::from(tag) * self.cap as u64) >> self.packing.tag_bits) as usize
    }

    fn tag(&self, s: &Slot) -> u32 {
        self.packing.tag(s.hi)
    }

    fn loc(&self, s: &Slot) -> Loc {
        let (page, off, len, hits) = self.packing.unpack(s.hi, s.lo);
        Loc {
            page,
            gen: s.gen,
            off,
            len,
            exptime: s.exptime,
            last_access: s.last_access,
            hits,
        }
    }

    /// The first position at or after `tag`'s home whose slot is empty or
    /// has a tag not below `tag` (`slots.len()` if none).
    fn seek(&self, tag: u32) -> usize {
        let mut i = self.home(tag);
        while let Some(s) = self.slots.get(i) {
            if s.is_empty() || self.tag(s) >= tag {
                break;
            }
            i += 1;
        }
        i
    }

    fn find(&self, hash: u64) -> Option<usize> {
        if self.cap == 0 {
            return None;
        }
        let tag = self.packing.tag_of(hash);
        let i = self.seek(tag);
        self.slots
            .get(i)
            .is_some_and(|s| !s.is_empty() && self.tag(s) == tag)
            .then_some(i)
    }

    pub(crate) fn get(&self, hash: u64) -> Option<Loc> {
        self.find(hash).map(|i| self.loc(&self.slots[i]))
    }

    /// Changes the record of `hash` in place (its place stays): the new
    /// value.
    pub(crate) fn update(&mut self, hash: u64, f: impl FnOnce(&mut Loc)) -> Option<Loc> {
        let i = self.find(hash)?;
        let mut l = self.loc(&self.slots[i]);
        f(&mut l);
        l.hits = l.hits.min(HITS_MAX);
        let s = &mut self.slots[i];
        s.lo = Packing::with_hits(s.lo, l.hits);
        s.exptime = l.exptime;
        s.last_access = l.last_access;
        Some(l)
    }

    pub(crate) fn remove(&mut self, hash: u64) -> Option<Loc> {
        let i = self.find(hash)?;
        Some(self.remove_at(i))
    }

    fn remove_at(&mut self, i: usize) -> Loc {
        let old = self.loc(&self.slots[i]);
        let mut end = i + 1;
        while let Some(s) = self.slots.get(end) {
            if s.is_empty() || self.home(self.tag(s)) >= end {
                break;
            }
            end += 1;
        }
        self.slots.copy_within(i + 1..end, i);
        self.slots[end - 1] = EMPTY;
        self.len -= 1;
        old
    }

    /// Notes `loc` for `hash`. A table that would grow past `max_bytes`
    /// forgets the least recently accessed of the records around the new
    /// one's place instead. `None` when `loc` cannot be packed (the
    /// caller lets it go).
    pub(crate) fn insert(&mut self, hash: u64, loc: &Loc, max_bytes: usize) -> Option<Displaced> {
        let tag = self.packing.tag_of(hash);
        let (hi, lo) = self.packing.pack(loc, tag)?;
        let slot = Slot {
            hi,
            gen: loc.gen,
            exptime: loc.exptime,
            last_access: loc.last_access,
            lo,
        };
        let mut out = Displaced::default();
        loop {
            if self.cap > 0 {
                let i = self.seek(tag);
                if let Some(s) = self
                    .slots
                    .get_mut(i)
                    .filter(|s| !s.is_empty() && self.packing.tag(s.hi) == tag)
                {
                    let old = *s;
                    *s = slot;
                    out.replaced = Some(self.loc(&old));
                    return Some(out);
                }
                let free = self.slots[i..].iter().position(Slot::is_empty);
                let loaded = (self.len + 1) * 8 > self.cap * 7;
                if let (Some(n), false) = (free, loaded) {
                    self.slots.copy_within(i..i + n, i + 1);
                    self.slots[i] = slot;
                    self.len += 1;
                    return Some(out);
                }
                if self.grown_bytes() > max_bytes && out.forgotten.is_none() {
                    out.forgotten = self.forget_near(i);
                    if out.forgotten.is_some() {
                        continue;
                    }
                }
            }
            self.grow();
        }
    }

    /// Forgets the least recently accessed of the (at most 8) records of
    /// the run at position `i` from there on, or up to it when none
    /// follows: room in that run, and a slot fewer.
    fn forget_near(&mut self, i: usize) -> Option<Loc> {
        let n = self.slots.len();
        let used = |j: &usize| !self.slots[*j].is_empty();
        let pick = |it: &mut dyn Iterator<Item = usize>| {
            it.take_while(used)
                .min_by_key(|&j| self.slots[j].last_access)
        };
        let victim = pick(&mut (i..n.min(i + 8)))
            .or_else(|| pick(&mut (i.saturating_sub(8)..i).rev()))
            .or_else(|| self.slots.iter().position(|s| !s.is_empty()))?;
        Some(self.remove_at(victim))
    }

    /// Grows by a quarter (more if the last run does not fit the margin).
    fn grow(&mut self) {
        let mut cap = Self::next_cap(self.cap);
        loop {
            let mut slots = vec![EMPTY; cap + margin(cap)];
            let tag_bits = self.packing.tag_bits;
            let home = |t: u32| ((u64::from(t) * cap as u64) >> tag_bits) as usize;
            let mut next = 0;
            let fits = self.slots.iter().filter(|s| !s.is_empty()).all(|s| {
                let p = home(self.packing.tag(s.hi)).max(next);
                if let Some(to) = slots.get_mut(p) {
                    *to = *s;
                    next = p + 1;
                    true
                } else {
                    false
                }
            });
            if fits {
                self.slots = slots;
                self.cap = cap;
                return;
            }
            cap = Self::next_cap(cap);
        }
    }

    /// Keeps the records for which `keep` is true; the others are handed
    /// to `gone`. The table keeps its size.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Loc) -> bool, mut gone: impl FnMut(Loc)) {
        let mut next = 0;
        for r in 0..self.slots.len() {
            let s = self.slots[r];
            if s.is_empty() {
                continue;
            }
            self.slots[r] = EMPTY;
            let l = self.loc(&s);
            if !keep(&l) {
                self.len -= 1;
                gone(l);
                continue;
            }
            // At or before `r`: its home is, and so is the slot after the
            // last one kept.
            let p = self.home(self.tag(&s)).max(next);
            self.slots[p] = s;
            next = p + 1;
        }
    }

    /// Every record, in no particular order.
    #[cfg(test)]
    pub(crate) fn locs(&self) -> Vec<(u32, Loc)> {
        self.slots
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| (self.tag(s), self.loc(s)))
            .collect()
    }

    /// Whether the slots keep the table's order (tests).
    #[cfg(test)]
    pub(crate) fn check(&self) {
        let mut last = None;
        let mut n = 0;
        for (i, s) in self.slots.iter().enumerate() {
            if s.is_empty() {
                continue;
            }
            n += 1;
            let h = self.home(self.tag(s));
            assert!(h <= i, "slot {i} before its home {h}");
            assert!(
                self.slots[h..i].iter().all(|s| !s.is_empty()),
                "a gap between the home and slot {i}"
            );
            assert!(last < Some(self.tag(s)), "tags out of order at {i}");
            last = Some(self.tag(s));
        }
        assert_eq!(n, self.len);
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
