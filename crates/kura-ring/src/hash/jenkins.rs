//! Bob Jenkins' hashes as twemproxy and libmemcached use them: the
//! one-at-a-time hash (bytes read as C `char`s) and lookup3's `hashlittle`
//! with initial value 13 (bytes unsigned; on little-endian machines its
//! aligned and unaligned paths agree, so reading byte by byte is exact).

use super::c_char;

/// One-at-a-time: add each byte and stir, then a final avalanche.
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &b in key {
        h = h.wrapping_add(c_char(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// The initial value twemproxy and libmemcached pass to lookup3.
const INITVAL: u32 = 13;

/// lookup3's reversible mixing of a full block: each step is
/// `x = (x - y) ^ rotl(y, r); y += z` on words (x, y, z) of (a, b, c).
const MIX: [(usize, usize, usize, u32); 6] = [
    (0, 2, 1, 4),
    (1, 0, 2, 6),
    (2, 1, 0, 8),
    (0, 2, 1, 16),
    (1, 0, 2, 19),
    (2, 1, 0, 4),
];

/// lookup3's final avalanche: each step is `x = (x ^ y) - rotl(y, r)`.
const FINAL: [(usize, usize, u32); 7] = [
    (2, 1, 14),
    (0, 2, 11),
    (1, 0, 25),
    (2, 1, 16),
    (0, 2, 4),
    (1, 0, 14),
    (2, 1, 24),
];

/// Adds up to 12 bytes to the state as three little-endian words (missing
/// bytes are 0).
fn add_block(w: &mut [u32; 3], block: &[u8]) {
    let mut bytes = [0u8; 12];
    bytes[..block.len()].copy_from_slice(block);
    for (i, word) in w.iter_mut().enumerate() {
        let b = &bytes[4 * i..4 * i + 4];
        *word = word.wrapping_add(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    }
}

/// lookup3's `hashlittle`.
fn hashlittle(key: &[u8], initval: u32) -> u32 {
    let init = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let mut w = [init; 3];
    if key.is_empty() {
        return w[2];
    }
    let mut rest = key;
    while rest.len() > 12 {
        add_block(&mut w, &rest[..12]);
        for (x, y, z, r) in MIX {
            w[x] = w[x].wrapping_sub(w[y]) ^ w[y].rotate_left(r);
            w[y] = w[y].wrapping_add(w[z]);
        }
        rest = &rest[12..];
    }
    add_block(&mut w, rest);
    for (x, y, r) in FINAL {
        w[x] = (w[x] ^ w[y]).wrapping_sub(w[y].rotate_left(r));
    }
    w[2]
}

/// twemproxy's `jenkins`: `hashlittle(key, len, 13)`.
pub fn lookup3(key: &[u8]) -> u32 {
    hashlittle(key, INITVAL)
}

#[cfg(test)]
mod tests {
    use super::super::vectors::check;
    use super::*;

    #[test]
    fn one_at_a_time_matches_libhashkit() {
        check(
            one_at_a_time,
            &[
                2297466611, 3902465932, 469785835, 1937308741, 261917617, 3785641677, 1439605128,
                1649152283, 1493851484, 1246520657, 2221159044, 1973511823, 384136800, 214358653,
                2379473940, 4269788650, 2864377005, 2638630052, 427683330, 990491717, 1747111141,
                792127364, 2599214128, 2553037199, 2509838425,
            ],
        );
    }

    #[test]
    fn lookup3_matches_libhashkit() {
        check(
            lookup3,
            &[
                1442444624, 4253821186, 1885058256, 2120131735, 3261968576, 3515188778, 4232909173,
                4288625128, 1812047395, 3689182164, 2502979932, 1214050606, 2415988847, 1494268927,
                1025545760, 3920481083, 4153263658, 3824871822, 3072759809, 798622255, 3065432577,
                1453328165, 2691550971, 3408888387, 2629893356,
            ],
        );
    }

    #[test]
    fn hashlittle_matches_lookup3s_own_checks() {
        // The values lookup3.c's comments give for its self-test; the
        // 30-byte key takes the multi-block path the vectors above (all 12
        // bytes or shorter) do not.
        assert_eq!(hashlittle(b"", 0), 0xdead_beef);
        let four_score = b"Four score and seven years ago";
        assert_eq!(hashlittle(four_score, 0), 0x1777_0551);
        assert_eq!(hashlittle(four_score, 1), 0xcd62_8161);
    }
}
