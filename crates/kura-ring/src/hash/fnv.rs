//! Fowler–Noll–Vo hashes: the four 32-bit results twemproxy and
//! libmemcached offer (the `_64` ones use the 64-bit offset basis and prime
//! and keep the low 32 bits), and plain 64-bit FNV-1a for the jump ring.
//!
//! Only the low 32 bits of the 64-bit variants survive, and the low 32 bits
//! of a product or an exclusive or depend only on the low 32 bits of the
//! operands, so computing them in 32 bits from the start is exact.

use super::c_char;

const OFFSET_64: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME_64: u64 = 0x0000_0100_0000_01b3;
const OFFSET_32: u32 = 0x811c_9dc5;
const PRIME_32: u32 = 0x0100_0193;

/// FNV-1 (multiply, then mix in the byte) with the 64-bit constants,
/// truncated to 32 bits.
pub fn fnv1_64(key: &[u8]) -> u32 {
    let (mut h, p) = (OFFSET_64 as u32, PRIME_64 as u32);
    for &b in key {
        h = h.wrapping_mul(p) ^ c_char(b);
    }
    h
}

/// FNV-1a (mix in the byte, then multiply) with the 64-bit constants,
/// truncated to 32 bits: twemproxy's default key hash.
pub fn fnv1a_64(key: &[u8]) -> u32 {
    let (mut h, p) = (OFFSET_64 as u32, PRIME_64 as u32);
    for &b in key {
        h = (h ^ c_char(b)).wrapping_mul(p);
    }
    h
}

/// FNV-1 with the 32-bit constants.
pub fn fnv1_32(key: &[u8]) -> u32 {
    let mut h = OFFSET_32;
    for &b in key {
        h = h.wrapping_mul(PRIME_32) ^ c_char(b);
    }
    h
}

/// FNV-1a with the 32-bit constants.
pub fn fnv1a_32(key: &[u8]) -> u32 {
    let mut h = OFFSET_32;
    for &b in key {
        h = (h ^ c_char(b)).wrapping_mul(PRIME_32);
    }
    h
}

/// The full 64-bit FNV-1a of the key's bytes (unsigned), as the reference
/// FNV code and Go's `hash/fnv` compute it.
pub fn fnv1a_64_full(key: &[u8]) -> u64 {
    let mut h = OFFSET_64;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(PRIME_64);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::super::vectors::check;
    use super::*;

    #[test]
    fn fnv1_64_matches_libhashkit() {
        check(
            fnv1_64,
            &[
                473199127, 4148981457, 3971873300, 3257986707, 1722477987, 2991193800, 4147007314,
                3633179701, 1805162104, 3503289120, 3395702895, 3325073042, 2345265314, 3340346032,
                2722964135, 1173398992, 2815549194, 2562818319, 224996066, 2680194749, 3035305390,
                246890365, 2395624193, 4145193337, 1801941682,
            ],
        );
    }

    #[test]
    fn fnv1a_64_matches_libhashkit() {
        check(
            fnv1a_64,
            &[
                1488911807, 2500855813, 1510099634, 1390325195, 3647689787, 3241528582, 1669328060,
                2604311949, 734810122, 1516407546, 560948863, 1767346780, 561034892, 4156330026,
                3716417003, 3475297030, 1518272172, 227211583, 3938128828, 126112909, 3043416448,
                3131561933, 1328739897, 2455664041, 2272238452,
            ],
        );
    }

    #[test]
    fn fnv1_32_matches_libhashkit() {
        check(
            fnv1_32,
            &[
                67176023, 1190179409, 2043204404, 3221866419, 2567703427, 3787535528, 4147287986,
                3500475733, 344481048, 3865235296, 2181839183, 119581266, 510234242, 4248244304,
                1362796839, 103389328, 1449620010, 182962511, 3554262370, 3206747549, 1551306158,
                4127558461, 1889140833, 2774173721, 1180552018,
            ],
        );
    }

    #[test]
    fn fnv1a_32_matches_libhashkit() {
        check(
            fnv1a_32,
            &[
                280767167, 2421315013, 3072375666, 855001899, 459261019, 3521085446, 18738364,
                1625305005, 2162232970, 777243802, 3323728671, 132336572, 3654473228, 260679466,
                1169454059, 2698319462, 1062177260, 235516991, 2218399068, 405302637, 1128467232,
                3579622413, 2138539289, 96429129, 2877453236,
            ],
        );
    }

    #[test]
    fn fnv1a_64_full_matches_the_reference_values() {
        assert_eq!(fnv1a_64_full(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64_full(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64_full(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn high_bytes_enter_sign_extended() {
        // With 0xe4 read as 0xffffffe4, the first step differs from the
        // unsigned reading in its upper 24 bits.
        let unsigned = (OFFSET_64 as u32 ^ 0xe4).wrapping_mul(PRIME_64 as u32);
        let signed = (OFFSET_64 as u32 ^ 0xffff_ffe4).wrapping_mul(PRIME_64 as u32);
        assert_eq!(fnv1a_64(&[0xe4]), signed);
        assert_ne!(fnv1a_64(&[0xe4]), unsigned);
    }
}
