//! Values that prove where they came from. Every value the load sets is
//! derived from its key number, a random 16-bit salt and its length:
//!
//! ```text
//! kkkkkkkkkkkkssss<filler>      k: key number, 12 hex digits
//!                               s: salt, 4 hex digits (also the item's client flags)
//!                               filler: printable bytes from a PRNG seeded by (key, salt, length)
//! ```
//!
//! A get can then be checked without knowing which of several concurrent
//! sets won: the value must name the key that was asked for, its flags must
//! equal its salt, its length must be one the load sets, and its filler
//! must be the one its header implies. A value from another key, a
//! truncated or corrupted one, or wrong flags is an error, not a hit.

use crate::args::ValueSize;

/// Bytes of the header (key number and salt).
pub const HEADER_LEN: usize = 16;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The client flags stored with a value of this salt.
pub fn flags_for(salt: u16) -> u32 {
    u32::from(salt)
}

/// Appends the value for (`key`, `salt`) of `len` bytes (`len >= HEADER_LEN`).
pub fn fill(key: u64, salt: u16, len: usize, out: &mut Vec<u8>) {
    let start = out.len();
    for shift in (0..12).rev() {
        out.push(HEX[((key >> (shift * 4)) & 0xf) as usize]);
    }
    for shift in (0..4).rev() {
        out.push(HEX[usize::from((salt >> (shift * 4)) & 0xf)]);
    }
    let mut gen = Filler::new(key, salt, len);
    out.extend((start + HEADER_LEN..start + len).map(|_| gen.next_byte()));
}

/// Why a value failed verification.
pub fn check(key: u64, flags: u32, value: &[u8], sizes: ValueSize) -> Result<(), String> {
    let len = value.len();
    if len < sizes.min || len > sizes.max {
        return Err(format!("value of {len} bytes, the load sets {sizes} bytes"));
    }
    let named = parse_hex(&value[..12]).ok_or("value header is not hex")?;
    if named != key & 0xffff_ffff_ffff {
        return Err(format!("value of key {named} returned for key {key}"));
    }
    let salt = parse_hex(&value[12..HEADER_LEN]).ok_or("value header is not hex")? as u16;
    if flags != flags_for(salt) {
        return Err(format!("flags {flags}, the value was set with {salt}"));
    }
    let mut gen = Filler::new(key, salt, len);
    if let Some(at) = value[HEADER_LEN..]
        .iter()
        .position(|&b| b != gen.next_byte())
    {
        return Err(format!("value differs at byte {}", HEADER_LEN + at));
    }
    Ok(())
}

/// The salt a value was set with, read from its header (for servers that
/// keep no flags); `None` when it has no header.
pub fn salt_of(value: &[u8]) -> Option<u32> {
    let header = value.get(12..HEADER_LEN)?;
    parse_hex(header).map(|s| s as u32)
}

fn parse_hex(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc << 4 | u64::from(v))
    })
}

/// splitmix64, eight filler bytes per step.
struct Filler {
    state: u64,
    word: u64,
    left: u32,
}

impl Filler {
    fn new(key: u64, salt: u16, len: usize) -> Filler {
        let seed = key ^ (u64::from(salt) << 48) ^ (len as u64).rotate_left(24);
        Filler {
            state: seed,
            word: 0,
            left: 0,
        }
    }

    fn next_byte(&mut self) -> u8 {
        if self.left == 0 {
            self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            self.word = z ^ (z >> 31);
            self.left = 8;
        }
        let b = ALPHABET[(self.word & 63) as usize];
        self.word >>= 8;
        self.left -= 1;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZES: ValueSize = ValueSize { min: 16, max: 200 };

    #[test]
    fn a_value_checks_against_its_own_key_only() {
        let mut v = Vec::new();
        fill(42, 0xbeef, 100, &mut v);
        assert_eq!(v.len(), 100);
        assert_eq!(&v[..16], b"00000000002abeef");
        assert_eq!(check(42, flags_for(0xbeef), &v, SIZES), Ok(()));
        assert!(check(43, flags_for(0xbeef), &v, SIZES).is_err());
        assert!(check(42, 7, &v, SIZES).is_err());
        let short = ValueSize { min: 16, max: 50 };
        assert!(check(42, flags_for(0xbeef), &v, short).is_err());
    }

    #[test]
    fn any_changed_or_missing_byte_is_caught() {
        let mut v = Vec::new();
        fill(9, 1, 64, &mut v);
        for i in 0..v.len() {
            let mut bad = v.clone();
            bad[i] ^= 0x01;
            assert!(check(9, 1, &bad, SIZES).is_err(), "flip at {i}");
        }
        assert!(check(9, 1, &v[..63], SIZES).is_err());
        let mut same = Vec::new();
        fill(9, 1, 64, &mut same);
        assert_eq!(v, same, "values are deterministic");
    }
}
