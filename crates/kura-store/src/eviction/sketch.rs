//! A popularity estimate for TinyLFU (Einziger, Friedman and Manes, "TinyLFU:
//! A Highly Efficient Cache Admission Policy", 2017): a count-min sketch of
//! 4-bit counters, with a doorkeeper bit array in front of it so that keys
//! seen once cost no counter, and periodic halving so that old popularity
//! fades. It is sized to the number of entries the policy tracks and grows
//! with it.

/// Counters per 64-bit word.
const PER_WORD: usize = 16;
/// Words in one block: the four counters of a key sit in one 64-byte line.
const BLOCK_WORDS: usize = 8;
/// A counter's ceiling.
const COUNTER_MAX: u64 = 15;
/// Recorded accesses per tracked entry before every counter is halved.
const SAMPLE_FACTOR: usize = 10;
/// Doorkeeper bits per tracked entry.
const DOOR_BITS: usize = 8;

#[derive(Debug, Default)]
pub(crate) struct Sketch {
    words: Vec<u64>,
    door: Vec<u64>,
    /// Entries the arrays are sized for (a power of two, or 0).
    capacity: usize,
    /// Accesses recorded since the last halving.
    additions: usize,
}

/// Spreads a 32-bit fingerprint over 64 bits (a bijection).
#[inline]
fn spread(fp: u32) -> u64 {
    let mut h = u64::from(fp).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

impl Sketch {
    /// Makes room for estimates over `entries` entries, starting afresh
    /// when the arrays have to grow.
    pub(crate) fn ensure_capacity(&mut self, entries: usize) {
        if entries <= self.capacity {
            return;
        }
        let capacity = entries.next_power_of_two().max(BLOCK_WORDS * 4);
        self.capacity = capacity;
        // One word of 16 counters per entry.
        self.words = vec![0; capacity];
        self.door = vec![0; capacity * DOOR_BITS / 64];
        self.additions = 0;
    }

    /// The word and nibble shift of the key's `i`-th counter.
    #[inline]
    fn counter(&self, h: u64, i: u32) -> (usize, u32) {
        let blocks = self.words.len() / BLOCK_WORDS;
        let block = (h as usize) & (blocks - 1);
        // Seven bits per counter from the high half: one of 128 in the block.
        let c = ((h >> (32 + 7 * i)) & 127) as usize;
        (
            block * BLOCK_WORDS + c / PER_WORD,
            (c % PER_WORD) as u32 * 4,
        )
    }

    #[inline]
    fn door_bits(&self, h: u64) -> [(usize, u64); 2] {
        let mask = self.door.len() * 64 - 1;
        let a = (h.rotate_left(21) as usize) & mask;
        let b = (h.rotate_left(43) as usize) & mask;
        [(a / 64, 1 << (a % 64)), (b / 64, 1 << (b % 64))]
    }

    /// Records one access to the key with fingerprint `fp`.
    pub(crate) fn increment(&mut self, fp: u32) {
        if self.capacity == 0 {
            return;
        }
        let h = spread(fp);
        let mut first = false;
        for (w, bit) in self.door_bits(h) {
            first |= self.door[w] & bit == 0;
            self.door[w] |= bit;
        }
        if !first {
            for i in 0..4 {
                let (w, shift) = self.counter(h, i);
                if (self.words[w] >> shift) & COUNTER_MAX < COUNTER_MAX {
                    self.words[w] += 1 << shift;
                }
            }
        }
        self.additions += 1;
        if self.additions >= self.capacity * SAMPLE_FACTOR {
            self.age();
        }
    }

    /// The estimated accesses to the key with fingerprint `fp` (an
    /// overestimate, never an underestimate, since the last halving).
    pub(crate) fn estimate(&self, fp: u32) -> u32 {
        if self.capacity == 0 {
            return 0;
        }
        let h = spread(fp);
        let door = self
            .door_bits(h)
            .iter()
            .all(|&(w, bit)| self.door[w] & bit != 0);
        let counted = (0..4)
            .map(|i| {
                let (w, shift) = self.counter(h, i);
                ((self.words[w] >> shift) & COUNTER_MAX) as u32
            })
            .min()
            .unwrap_or(0);
        counted + u32::from(door)
    }

    /// Halves every counter and empties the doorkeeper.
    fn age(&mut self) {
        for w in &mut self.words {
            *w = (*w >> 1) & 0x7777_7777_7777_7777;
        }
        self.door.fill(0);
        self.additions /= 2;
    }

    pub(crate) fn clear(&mut self) {
        *self = Sketch::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_grow_with_accesses_and_fade_with_age() {
        let mut s = Sketch::default();
        s.ensure_capacity(1000);
        for _ in 0..5 {
            s.increment(42);
        }
        s.increment(7);
        assert_eq!(s.estimate(42), 5);
        assert_eq!(s.estimate(7), 1);
        assert_eq!(s.estimate(8), 0);
        s.age();
        assert_eq!(s.estimate(42), 2);
        assert_eq!(s.estimate(7), 0);
    }

    #[test]
    fn counters_saturate() {
        let mut s = Sketch::default();
        s.ensure_capacity(64);
        for _ in 0..40 {
            s.increment(1);
        }
        assert_eq!(s.estimate(1), 16);
    }

    #[test]
    fn estimates_never_undercount() {
        let mut s = Sketch::default();
        s.ensure_capacity(4096);
        for fp in 0..2000u32 {
            for _ in 0..fp % 5 {
                s.increment(fp);
            }
        }
        for fp in 0..2000u32 {
            assert!(s.estimate(fp) >= fp % 5, "fp {fp}");
        }
    }
}
