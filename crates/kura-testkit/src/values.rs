//! Test values that only one key has: a value served under the wrong key, or a
//! value whose bytes were damaged or cut, never equals the one expected.

use std::ops::Range;

/// The value of key number `i`: between `lens.start` and `lens.end` bytes
/// (spread over the range by `i`), a xorshift stream seeded by `i`, so two
/// keys' values differ in length or bytes, and no run repeats.
pub fn distinct(i: usize, lens: Range<usize>) -> Vec<u8> {
    versioned(i, 0, lens)
}

/// As [`distinct`], for version `v` of key `i`: two versions of one key have
/// the same length and different bytes.
pub fn versioned(i: usize, v: u32, lens: Range<usize>) -> Vec<u8> {
    let span = lens.end.saturating_sub(lens.start).max(1);
    let len = lens.start + (i.wrapping_mul(7919)) % span;
    let mut x = ((i as u64) << 20 ^ u64::from(v) ^ 0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{distinct, versioned};

    #[test]
    fn values_differ_by_key_and_stay_in_their_length_range() {
        let a = distinct(1, 1500..2500);
        let b = distinct(2, 1500..2500);
        assert_ne!(a, b);
        assert_eq!(a, distinct(1, 1500..2500));
        for i in 0..1000 {
            let len = distinct(i, 1500..2500).len();
            assert!((1500..2500).contains(&len), "{i}: {len}");
        }
        // Same length, different bytes.
        let (x, y) = (distinct(0, 64..65), distinct(1, 64..65));
        assert_eq!(x.len(), y.len());
        assert_ne!(x, y);
        // Versions of one key: same length, different bytes.
        let (v1, v2) = (versioned(5, 1, 64..900), versioned(5, 2, 64..900));
        assert_eq!(v1.len(), v2.len());
        assert_ne!(v1, v2);
    }
}
