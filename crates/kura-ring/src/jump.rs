//! Jump consistent hash (Lamping and Veach, "A Fast, Minimal Memory,
//! Consistent Hash Algorithm", 2014): a 64-bit key to one of n buckets, no
//! table, and growing n to n + 1 moves only the keys that go to the new
//! bucket. kura hashes a key's bytes to 64 bits with FNV-1a (as Go's
//! `hash/fnv` does), so `jump` places keys as go-jump-consistent-hash with
//! its FNV-1a hasher does.

/// The paper's linear congruential step.
const LCG: u64 = 2_862_933_555_777_941_757;

/// The bucket (0 to n - 1) of `key` among `buckets` (at least 1).
pub fn jump_hash(mut key: u64, buckets: u32) -> u32 {
    let mut bucket: i64 = -1;
    let mut next: i64 = 0;
    while next < i64::from(buckets) {
        bucket = next;
        key = key.wrapping_mul(LCG).wrapping_add(1);
        let r = (1u64 << 31) as f64 / ((key >> 33) + 1) as f64;
        next = ((bucket + 1) as f64 * r) as i64;
    }
    bucket.max(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::fnv1a_64_full;

    #[test]
    fn matches_the_known_vectors() {
        for (key, buckets, want) in [
            (1, 1, 0),
            (42, 57, 43),
            (0xDEAD_10CC, 1, 0),
            (0xDEAD_10CC, 666, 361),
            (256, 1024, 520),
            (0, 2, 0),
            (4, 2, 1),
            (7, 2, 0),
            (1, 128, 55),
            (129, 128, 120),
            (128, 100_000_000, 38_172_097),
            (128, 1 << 31, 1_644_467_860),
            (u64::MAX, 128, 92),
        ] {
            assert_eq!(jump_hash(key, buckets), want, "jump({key}, {buckets})");
        }
    }

    #[test]
    fn strings_hash_through_fnv1a_as_go_jump_does() {
        // go-jump-consistent-hash: HashString("中国", 10, FNV1a) == 5.
        assert_eq!(jump_hash(fnv1a_64_full("中国".as_bytes()), 10), 5);
    }

    #[test]
    fn growing_moves_keys_only_to_the_new_bucket() {
        for key in 0..2000u64 {
            let key = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for n in 1..50 {
                let (a, b) = (jump_hash(key, n), jump_hash(key, n + 1));
                assert!(a == b || b == n, "key {key}: {a} -> {b} at {n}");
            }
        }
    }
}
