//! The CRC-based key hashes: CRC-16/ARC, libmemcached's 15-bit CRC-32
//! variant (twemproxy's `crc32`) and the standard CRC-32 (`crc32a`,
//! computed by crc32fast).

/// CRC-16/ARC: reflected polynomial 0xA001, initial value 0, no final xor
/// (the Linux kernel's `crc16`).
pub fn crc16(key: &[u8]) -> u32 {
    let mut crc: u16 = 0;
    for &b in key {
        crc ^= u16::from(b);
        for _ in 0..8 {
            let carry = crc & 1;
            crc >>= 1;
            if carry != 0 {
                crc ^= 0xa001;
            }
        }
    }
    u32::from(crc)
}

/// libmemcached's `crc32` hash: bits 16 to 30 of the standard CRC-32
/// (a value below 32768), kept for compatibility with old clients.
pub fn crc32_libmemcached(key: &[u8]) -> u32 {
    (crc32fast::hash(key) >> 16) & 0x7fff
}

#[cfg(test)]
mod tests {
    use super::super::vectors::check;
    use super::*;

    #[test]
    fn crc16_is_crc16_arc() {
        // The catalogue's check value of CRC-16/ARC.
        assert_eq!(crc16(b"123456789"), 0xbb3d);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn crc32_matches_libhashkit() {
        check(
            crc32_libmemcached,
            &[
                10542, 22009, 14526, 19510, 19432, 10199, 20634, 9369, 11511, 10362, 7893, 31289,
                11313, 9354, 7621, 30628, 15218, 25967, 2695, 9380, 17300, 28156, 9192, 20484,
                16925,
            ],
        );
    }

    #[test]
    fn crc32a_matches_twemproxys_tests() {
        let crc32a = super::super::Hash::Crc32a;
        assert_eq!(crc32a.hash(b""), 0);
        assert_eq!(crc32a.hash(b"123456"), 0x0972_d361);
        assert_eq!(crc32a.hash(b"abcdef"), 0x4b8e_39ef);
        assert_eq!(crc32a.hash("中".as_bytes()), 0xd5d1_5a8b);
    }
}
