//! The CRC-based key hashes: twemproxy 0.5.0's `crc16` (CRC-16/XMODEM
//! steps on a 32-bit register that is never cut back to 16 bits),
//! libmemcached's 15-bit CRC-32 variant (twemproxy's `crc32`) and the
//! standard CRC-32 (`crc32a`, computed by crc32fast).

/// The CRC-16/XMODEM table: polynomial 0x1021, most significant bit first.
const XMODEM: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// twemproxy 0.4 and 0.5.0's `crc16`: the XMODEM table step on a 32-bit
/// register, so the low 16 bits are CRC-16/XMODEM and the high 16 bits
/// keep what the shifts push up. (twemproxy's later sources changed this to
/// CRC-16/ARC; Debian's nutcracker 0.5.0 computes this one, as the
/// differential test shows.)
pub fn crc16(key: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in key {
        let index = ((crc >> 8) ^ u32::from(b)) & 0xff;
        crc = (crc << 8) ^ u32::from(XMODEM[index as usize]);
    }
    crc
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
    fn crc16_keeps_xmodem_in_its_low_half() {
        // The catalogue's check value of CRC-16/XMODEM, and its table.
        assert_eq!(crc16(b"123456789") & 0xffff, 0x31c3);
        assert_eq!(XMODEM[1], 0x1021);
        assert_eq!(XMODEM[255], 0x1ef0);
        assert_eq!(crc16(b""), 0);
        // One byte: the register was 0, so nothing is pushed up.
        assert_eq!(crc16(b"a"), u32::from(XMODEM[usize::from(b'a')]));
        // Two bytes: the first byte's CRC is shifted up by 8.
        let first = u32::from(XMODEM[usize::from(b'a')]);
        let index = ((first >> 8) ^ u32::from(b'b')) & 0xff;
        assert_eq!(
            crc16(b"ab"),
            (first << 8) ^ u32::from(XMODEM[index as usize])
        );
        assert!(crc16(b"abc") > 0xffff);
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
