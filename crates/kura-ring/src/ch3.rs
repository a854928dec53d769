//! mcrouter's `ch3` ("consistent hash, version 3"): the furc hash, which
//! picks one of m servers by walking a binary decision tree whose bits come
//! from MurmurHash64A of the key and then of each previous 64-bit word.
//!
//! With d the number of bits of m - 1, it reads bit d of the stream; each 0
//! lowers d (a 0 at the last level gives server 0) and each 1 starts a
//! number with a leading 1 whose d - 1 lower bits are read 23 bits apart.
//! A number below m is the answer; otherwise it tries again further along
//! the stream, 32 times at most, then gives 0. Growing a pool from m to m'
//! servers moves a key only to one of the new servers. At most 2^23
//! servers. mcrouter hashes a key's routing part (without a `/region/
//! cluster/` prefix, and up to `|#|` when that occurs): give kura-ring that.

use crate::hash::murmur::murmur64a;

/// MurmurHash64A's seed for furc.
const SEED: u64 = 4_193_360_111;
/// Attempts before giving up with server 0.
const MAX_TRIES: u32 = 32;
/// Distance in the bit stream between the bits of one number.
const SHIFT: u32 = 23;

/// The largest pool furc serves.
pub const MAX_SERVERS: u32 = 1 << SHIFT;

/// The key's bit stream: word 0 is MurmurHash64A of the key, word n + 1 is
/// MurmurHash64A of word n's eight little-endian bytes.
struct Bits<'k> {
    key: &'k [u8],
    words: Vec<u64>,
}

impl Bits<'_> {
    fn get(&mut self, index: u32) -> u32 {
        let word = (index >> 6) as usize;
        while self.words.len() <= word {
            let next = match self.words.last() {
                None => murmur64a(self.key, SEED),
                Some(prev) => murmur64a(&prev.to_le_bytes(), SEED),
            };
            self.words.push(next);
        }
        ((self.words[word] >> (index & 63)) & 1) as u32
    }
}

/// The server (0 to m - 1) of `key` in a pool of `m` servers (m at most
/// [`MAX_SERVERS`]; 0 and 1 give 0).
pub fn furc_hash(key: &[u8], m: u32) -> u32 {
    if m <= 1 {
        return 0;
    }
    let mut bits = Bits {
        key,
        words: Vec::with_capacity(4),
    };
    let mut depth = u32::BITS - (m - 1).leading_zeros();
    let mut at = depth;
    for _ in 0..MAX_TRIES {
        while bits.get(at) == 0 {
            depth -= 1;
            if depth == 0 {
                return 0;
            }
            at = depth;
        }
        at += SHIFT;
        let mut num = 1;
        for _ in 1..depth {
            num = (num << 1) | bits.get(at);
            at += SHIFT;
        }
        if num < m {
            return num;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    //! Expected values from mcrouter's own tests (Ch3HashFuncTest and
    //! WeightedCh3HashFuncTest, whose unit weights are plain furc).
    use super::*;

    #[test]
    fn matches_mcrouters_basic_values() {
        assert_eq!(furc_hash(b"sample", 100), 97);
        assert_eq!(furc_hash(b"sample", 1), 0);
        assert_eq!(furc_hash(b"", 100), 72);
        assert_eq!(furc_hash(b"", 1), 0);
        assert_eq!(furc_hash(b"", MAX_SERVERS), 6_173_600);
        assert_eq!(furc_hash(b"sample", MAX_SERVERS), 5_167_780);
        // Every byte, as C chars -128..127, then the reverse.
        let mut all: Vec<u8> = (0..=255u8).map(|i| i.wrapping_add(128)).collect();
        assert_eq!(furc_hash(&all, 99_999), 31_015);
        all.reverse();
        assert_eq!(furc_hash(&all, 99_999), 67_101);
    }

    fn counts(m: u32, keys: u32) -> Vec<u32> {
        let mut n = vec![0; m as usize];
        for i in 0..keys {
            n[furc_hash(i.to_string().as_bytes(), m) as usize] += 1;
        }
        n
    }

    #[test]
    fn matches_mcrouters_spread_over_3_and_10_servers() {
        assert_eq!(counts(3, 1000), [307, 342, 351]);
        assert_eq!(
            counts(10, 10_000),
            [995, 955, 1046, 968, 1032, 972, 1016, 1038, 1010, 968]
        );
    }

    #[test]
    fn matches_mcrouters_checksums() {
        // acc = acc * 31 + furc("k<i>", n) over i < 100,000.
        let want = [
            (2, 1_346_413_954u32),
            (3, 914_505_363),
            (7, 4_252_552_508),
            (10, 2_894_016_351),
            (16, 2_995_729_350),
            (100, 2_289_223_413),
            (1000, 2_251_851_331),
            (10_000, 1_328_492_545),
            (100_000, 1_053_928_120),
        ];
        for (n, want) in want {
            let acc = (0..100_000u32).fold(0u32, |acc, i| {
                acc.wrapping_mul(31)
                    .wrapping_add(furc_hash(format!("k{i}").as_bytes(), n))
            });
            assert_eq!(acc, want, "n = {n}");
        }
    }

    #[test]
    fn growing_a_pool_moves_keys_only_to_new_servers() {
        for i in 0..2000u32 {
            let key = format!("grow-{i}");
            let mut before = furc_hash(key.as_bytes(), 1);
            for m in 2..40 {
                let now = furc_hash(key.as_bytes(), m);
                assert!(
                    now == before || now == m - 1,
                    "{key}: {before} -> {now} at {m}"
                );
                before = now;
            }
        }
    }
}
