//! Austin Appleby's MurmurHash2 in the two forms used here: the 32-bit one
//! as twemproxy and libmemcached seed it (`murmur`), and MurmurHash64A,
//! the source of mcrouter's furc hash bits.

/// The tail of a key (fewer bytes than a word) as a little-endian number.
fn tail(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// 32-bit MurmurHash2 seeded with `0xdeadbeef * len`.
pub fn murmur2(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len() as u32;
    let mut h = 0xdead_beef_u32.wrapping_mul(len) ^ len;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        h = (h ^ tail(rest) as u32).wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// MurmurHash64A (64-bit MurmurHash2 for 64-bit machines).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = (h ^ k).wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        h = (h ^ tail(rest)).wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}

#[cfg(test)]
mod tests {
    use super::super::vectors::check;
    use super::*;

    #[test]
    fn murmur2_matches_libhashkit() {
        check(
            murmur2,
            &[
                4142305122, 734504955, 3802834688, 4076891445, 387802650, 560515427, 3274673488,
                3150339524, 1527441970, 2728642900, 3613992239, 2938419259, 2321988328, 1145154116,
                4038540960, 2224541613, 264013145, 3995512858, 2400956718, 2346666219, 926327338,
                442757446, 1770805201, 560483147, 3902279934,
            ],
        );
    }

    #[test]
    fn murmur64a_of_nothing_mixes_the_seed_only() {
        const M: u64 = 0xc6a4_a793_5bd1_e995;
        let mut h = 7u64;
        h ^= h >> 47;
        h = h.wrapping_mul(M);
        h ^= h >> 47;
        assert_eq!(murmur64a(b"", 7), h);
    }
}
