//! The two-level segregated fit: size classes, free lists and their
//! bitmaps, finding, splitting and merging blocks (the arena's layout is in
//! `arena/mod.rs`).

use super::*;

/// The size class of a block of `size` units.
pub(super) fn mapping(size: u32) -> (usize, usize) {
    if size < SL as u32 {
        return (0, size as usize);
    }
    let l = 31 - size.leading_zeros();
    (
        (l - SL_LOG + 1) as usize,
        (size >> (l - SL_LOG)) as usize - SL,
    )
}

/// The first class whose blocks all hold `size` units.
pub(super) fn mapping_search(size: u32) -> Option<(usize, usize)> {
    if size < SL as u32 {
        return Some(mapping(size));
    }
    let l = 31 - size.leading_zeros();
    let rounded = size.checked_add((1 << (l - SL_LOG)) - 1)?;
    let (fl, sl) = mapping(rounded);
    (fl < FL).then_some((fl, sl))
}

impl Arena {
    fn insert(&mut self, off: u32, size: u32) {
        let (fl, sl) = mapping(size);
        let head = self.heads[fl][sl];
        self.set(off + 1, head);
        self.set(off + 2, 0);
        if head != 0 {
            self.set(head + 2, off);
        }
        self.heads[fl][sl] = off;
        self.fl_bitmap |= 1 << fl;
        self.sl_bitmap[fl] |= 1 << sl;
    }

    fn remove(&mut self, off: u32, size: u32) {
        let (fl, sl) = mapping(size);
        let (next, prev) = (self.word(off + 1), self.word(off + 2));
        if prev != 0 {
            self.set(prev + 1, next);
        } else {
            self.heads[fl][sl] = next;
            if next == 0 {
                self.sl_bitmap[fl] &= !(1 << sl);
                if self.sl_bitmap[fl] == 0 {
                    self.fl_bitmap &= !(1 << fl);
                }
            }
        }
        if next != 0 {
            self.set(next + 2, prev);
        }
    }

    /// A used block of at least `units` units (4 or more; at most 3 more
    /// than asked for), or `None` when no free block is that large.
    pub(crate) fn alloc(&mut self, units: u32) -> Option<u32> {
        let units = units.max(MIN_UNITS);
        let off = self.find_free(units)?;
        self.take(off, units);
        Some(off)
    }

    /// Allocates `units` from the start of the free block at `off` (which
    /// must be at least that large).
    pub(crate) fn alloc_at(&mut self, off: u32, units: u32) -> u32 {
        let units = units.max(MIN_UNITS);
        debug_assert!(self.is_free(off) && self.units(off) >= units);
        self.take(off, units);
        off
    }

    /// A free block of at least `units`: the first of the first class whose
    /// blocks are all large enough, else one of the request's own class.
    fn find_free(&self, units: u32) -> Option<u32> {
        if let Some((fl, sl)) = mapping_search(units) {
            let sl_map = u32::from(self.sl_bitmap[fl]) & (!0u32 << sl);
            if sl_map != 0 {
                return Some(self.heads[fl][sl_map.trailing_zeros() as usize]);
            }
            let fl_map = self.fl_bitmap & (!0u32).checked_shl(fl as u32 + 1).unwrap_or(0);
            if fl_map != 0 {
                let fl = fl_map.trailing_zeros() as usize;
                let sl = u32::from(self.sl_bitmap[fl]).trailing_zeros() as usize;
                return Some(self.heads[fl][sl]);
            }
        }
        // The request's own class holds blocks a little smaller and a
        // little larger: look at a few of them.
        let (fl, sl) = mapping(units);
        let mut at = *self.heads.get(fl)?.get(sl)?;
        for _ in 0..64 {
            if at == 0 {
                break;
            }
            if self.units(at) >= units {
                return Some(at);
            }
            at = self.word(at + 1);
        }
        None
    }

    /// Takes `units` from the start of the free block at `off`, splitting
    /// off the rest when it can be a block.
    fn take(&mut self, off: u32, units: u32) {
        let size = self.units(off);
        self.remove(off, size);
        let rest = size - units;
        if rest >= MIN_UNITS {
            let r = off + units;
            self.set(r, rest | FREE);
            self.set(r + rest - 1, rest);
            self.insert(r, rest);
            self.set(off, units);
            self.used_units += units as usize;
        } else {
            self.set(off, size);
            let next = off + size;
            self.set(next, self.word(next) & !PREV_FREE);
            self.used_units += size as usize;
        }
    }

    /// Frees the used block at `off`, merging it with free neighbours.
    pub(crate) fn free(&mut self, off: u32) {
        let word = self.word(off);
        debug_assert_eq!(word & FREE, 0, "double free of block {off}");
        let mut size = word & SIZE_MASK;
        self.used_units -= size as usize;
        let mut start = off;
        let next = off + size;
        let next_word = self.word(next);
        if next_word & FREE != 0 {
            let n = next_word & SIZE_MASK;
            self.remove(next, n);
            size += n;
            if self.cursor == next {
                self.cursor = start;
            }
        }
        if word & PREV_FREE != 0 {
            let p = self.word(off - 1);
            start = off - p;
            self.remove(start, p);
            size += p;
            if self.cursor == off {
                self.cursor = start;
            }
        }
        self.set(start, size | FREE);
        self.set(start + size - 1, size);
        self.insert(start, size);
        let after = start + size;
        self.set(after, self.word(after) | PREV_FREE);
    }
}
