//! A table of `u32` values with no allocation of its own per value, for the
//! policy's memory outside the entries (S3-FIFO's ghost and the ring's
//! stale ids): open addressing, probed linearly from a home scaled from
//! the value's key (its bits above `shift`; the bits below are the owner's
//! tag), removals shifting the values after them back, so no tombstones.
//! Equal keys may be held more than once (a multiset). Resized to 5/8 full
//! when it passes 7/8, or when it falls below 1/4: 4.6 to 6.4 bytes a value.

/// A slot with no value; values are never 0.
const EMPTY: u32 = 0;

/// Where the search for `key` starts among `n` slots: its mixed bits scaled
/// to the table.
#[inline]
fn home(key: u32, n: usize) -> usize {
    let mixed = u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((mixed * n as u64) >> 32) as usize
}

/// The slot after `i` of `n`, going round the end.
#[inline]
fn next(i: usize, n: usize) -> usize {
    if i + 1 == n {
        0
    } else {
        i + 1
    }
}

/// The table.
#[derive(Debug, Default)]
pub(super) struct Slots {
    /// Values at or after their key's home, with no empty slot between home
    /// and value (wrapping at the end).
    slots: Vec<u32>,
    len: usize,
    /// A value's key is its bits from this one up.
    shift: u32,
}

impl Slots {
    /// An empty table whose values' keys are their bits from `shift` up.
    pub(super) fn new(shift: u32) -> Slots {
        Slots {
            slots: Vec::new(),
            len: 0,
            shift,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the table.
    pub(super) fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<u32>()
    }

    fn key(&self, v: u32) -> u32 {
        v >> self.shift
    }

    /// The first slot holding a value with `key`, if any.
    pub(super) fn find(&self, key: u32) -> Option<usize> {
        let n = self.slots.len();
        if n == 0 {
            return None;
        }
        let mut i = home(key, n);
        // The table is never full, so an empty slot ends every search.
        loop {
            match self.slots[i] {
                EMPTY => return None,
                s if self.key(s) == key => return Some(i),
                _ => i = next(i, n),
            }
        }
    }

    /// The value in slot `i` (from [`find`](Self::find)).
    #[cfg(test)]
    pub(super) fn get(&self, i: usize) -> u32 {
        self.slots[i]
    }

    /// Adds `v` (not 0), another copy if its key is there already.
    pub(super) fn insert(&mut self, v: u32) {
        debug_assert_ne!(v, EMPTY);
        self.len += 1;
        if self.len * 8 > self.slots.len() * 7 {
            self.resize();
        }
        self.place(v);
    }

    /// Puts `v` in the first empty slot from its home.
    fn place(&mut self, v: u32) {
        let n = self.slots.len();
        let mut i = home(self.key(v), n);
        while self.slots[i] != EMPTY {
            i = next(i, n);
        }
        self.slots[i] = v;
    }

    /// Takes the value in slot `i` out, moving back the values after it
    /// that could not stay where they are with its slot empty.
    pub(super) fn remove_at(&mut self, i: usize) {
        let n = self.slots.len();
        let mut hole = i;
        self.slots[hole] = EMPTY;
        self.len -= 1;
        let mut j = hole;
        loop {
            j = next(j, n);
            let s = self.slots[j];
            if s == EMPTY {
                break;
            }
            // `s` may stay at `j` only if its home is in (hole, j], going
            // round the end; else the hole is on its search path.
            let h = home(self.key(s), n);
            let stays = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !stays {
                self.slots[hole] = s;
                self.slots[j] = EMPTY;
                hole = j;
            }
        }
        if self.len * 4 < self.slots.len() && self.slots.len() > 64 {
            self.resize();
        }
    }

    /// Takes out every value `keep` refuses, in one pass over the table.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u32) -> bool) {
        let n = self.slots.len();
        let Some(start) = self.slots.iter().position(|&s| s == EMPTY) else {
            return;
        };
        // Every value is taken out and placed again, in slot order from an
        // empty slot: a value placed again lands at or before where it was,
        // on a path of slots already placed again (none crosses `start`).
        for step in 1..n {
            let i = (start + step) % n;
            let v = self.slots[i];
            if v == EMPTY {
                continue;
            }
            self.slots[i] = EMPTY;
            if keep(v) {
                self.place(v);
            } else {
                self.len -= 1;
            }
        }
        if self.len * 4 < self.slots.len() && self.slots.len() > 64 {
            self.resize();
        }
    }

    /// Empties the table, giving its memory back.
    pub(super) fn clear(&mut self) {
        *self = Slots::new(self.shift);
    }

    /// A table sized for `len` values at 5/8 full, with the values placed.
    fn resize(&mut self) {
        let n = (self.len * 8 / 5).max(16);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; n]);
        for v in old.into_iter().filter(|&v| v != EMPTY) {
            self.place(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::testing::config(256))]

        /// Against a list of values: the same multiset, whatever the mix of
        /// inserts, removals and retains, with keys crowded into few homes
        /// so that runs wrap round the table and shift back.
        #[test]
        fn the_table_is_a_multiset(
            ops in proptest::collection::vec((0u8..4, 1u32..300), 1..crate::testing::size(2_000, 100)),
        ) {
            let mut t = Slots::new(2);
            let mut model: Vec<u32> = Vec::new();
            for (op, x) in ops {
                match op {
                    0 | 1 => {
                        t.insert(x);
                        model.push(x);
                    }
                    2 => {
                        let key = x >> 2;
                        let found = t.find(key);
                        let at = model.iter().position(|&v| v >> 2 == key);
                        prop_assert_eq!(found.is_some(), at.is_some());
                        if let (Some(i), Some(at)) = (found, at) {
                            let v = t.get(i);
                            prop_assert_eq!(v >> 2, key);
                            t.remove_at(i);
                            let at = model.iter().position(|&m| m == v).unwrap_or(at);
                            model.swap_remove(at);
                        }
                    }
                    _ => {
                        t.retain(|v| v % 7 != x % 7);
                        model.retain(|v| v % 7 != x % 7);
                    }
                }
                prop_assert_eq!(t.len(), model.len());
                let mut held: Vec<u32> = t.slots.iter().copied().filter(|&s| s != EMPTY).collect();
                let mut want = model.clone();
                held.sort_unstable();
                want.sort_unstable();
                prop_assert_eq!(held, want);
                // Under Miri a tenth of the keys, spread over the range.
                for key in (0..80u32).step_by(crate::testing::size(1, 10)) {
                    prop_assert_eq!(t.find(key).is_some(), model.iter().any(|&v| v >> 2 == key));
                }
            }
        }
    }
}
