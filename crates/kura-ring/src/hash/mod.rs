//! The 32-bit key hashes of twemproxy's `hash:` setting (libmemcached's
//! hashkit family), by their twemproxy names, plus the 64-bit hashes the
//! other rings use.
//!
//! Several of these read each key byte through a C `char`, which is signed
//! on x86-64: a byte of 0x80 or more enters the arithmetic sign-extended
//! (0xE4 as 0xFFFF_FFE4). That changes the hash of every non-ASCII key, and
//! the rings here reproduce it, because it is what twemproxy built for
//! x86-64 (Debian's nutcracker) does; a build for a platform whose `char` is
//! unsigned (ARM) places UTF-8 keys differently. The differential tests
//! check it against nutcracker with UTF-8 keys.

mod crc;
mod fnv;
mod hsieh;
mod jenkins;
pub(crate) mod md5;
pub(crate) mod murmur;

use std::fmt;
use std::str::FromStr;

pub use fnv::fnv1a_64_full;

/// The MD5 digest of `data` in lowercase hex (a configuration's digest,
/// as mcrouter's `__mcrouter__.config_md5_digest` gives it).
pub fn md5_hex(data: &[u8]) -> String {
    md5::words(data)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A key hash of twemproxy's `hash:` setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hash {
    /// Bob Jenkins' one-at-a-time hash (libmemcached's default).
    OneAtATime,
    /// The first four bytes of the key's MD5 digest, little-endian.
    Md5,
    /// CRC-16/XMODEM steps on a 32-bit register (twemproxy 0.5.0).
    Crc16,
    /// libmemcached's CRC-32 variant: bits 16..31 of the CRC, 15 bits kept.
    Crc32,
    /// The standard CRC-32 (zlib's).
    Crc32a,
    /// FNV-1 with the 64-bit constants, truncated to 32 bits.
    Fnv1_64,
    /// FNV-1a with the 64-bit constants, truncated to 32 bits: twemproxy's
    /// default.
    Fnv1a64,
    /// FNV-1, 32-bit.
    Fnv1_32,
    /// FNV-1a, 32-bit.
    Fnv1a32,
    /// Paul Hsieh's SuperFastHash.
    Hsieh,
    /// MurmurHash2 seeded with the key's length times 0xdeadbeef.
    Murmur,
    /// Bob Jenkins' lookup3 (`hashlittle`) with initial value 13.
    Jenkins,
}

impl Hash {
    /// Every hash, in twemproxy's order.
    pub const ALL: [Hash; 12] = [
        Hash::OneAtATime,
        Hash::Md5,
        Hash::Crc16,
        Hash::Crc32,
        Hash::Crc32a,
        Hash::Fnv1_64,
        Hash::Fnv1a64,
        Hash::Fnv1_32,
        Hash::Fnv1a32,
        Hash::Hsieh,
        Hash::Murmur,
        Hash::Jenkins,
    ];

    /// The name twemproxy's configuration uses for it.
    pub fn name(self) -> &'static str {
        match self {
            Hash::OneAtATime => "one_at_a_time",
            Hash::Md5 => "md5",
            Hash::Crc16 => "crc16",
            Hash::Crc32 => "crc32",
            Hash::Crc32a => "crc32a",
            Hash::Fnv1_64 => "fnv1_64",
            Hash::Fnv1a64 => "fnv1a_64",
            Hash::Fnv1_32 => "fnv1_32",
            Hash::Fnv1a32 => "fnv1a_32",
            Hash::Hsieh => "hsieh",
            Hash::Murmur => "murmur",
            Hash::Jenkins => "jenkins",
        }
    }

    /// Hashes `key` as twemproxy (x86-64) does.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            Hash::OneAtATime => jenkins::one_at_a_time(key),
            Hash::Md5 => md5::word(key, 0),
            Hash::Crc16 => crc::crc16(key),
            Hash::Crc32 => crc::crc32_libmemcached(key),
            Hash::Crc32a => crc32fast::hash(key),
            Hash::Fnv1_64 => fnv::fnv1_64(key),
            Hash::Fnv1a64 => fnv::fnv1a_64(key),
            Hash::Fnv1_32 => fnv::fnv1_32(key),
            Hash::Fnv1a32 => fnv::fnv1a_32(key),
            Hash::Hsieh => hsieh::hsieh(key),
            Hash::Murmur => murmur::murmur2(key),
            Hash::Jenkins => jenkins::lookup3(key),
        }
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A hash name that twemproxy does not know.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown hash {0:?} (one of: one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins)")]
pub struct UnknownHash(pub String);

impl FromStr for Hash {
    type Err = UnknownHash;

    fn from_str(s: &str) -> Result<Hash, UnknownHash> {
        Hash::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| UnknownHash(s.to_string()))
    }
}

/// A key byte as a C `char` on x86-64 turns it into a 32-bit unsigned value:
/// sign-extended.
#[inline]
pub(crate) fn c_char(b: u8) -> u32 {
    b as i8 as i32 as u32
}

#[cfg(test)]
pub(crate) mod vectors {
    //! The key list of libmemcached's hash tests (tests/hash_results.h),
    //! whose expected values each hash module checks: twemproxy's hashkit
    //! is libmemcached's.

    pub const KEYS: [&str; 25] = [
        "apple",
        "beat",
        "carrot",
        "daikon",
        "eggplant",
        "flower",
        "green",
        "hide",
        "ick",
        "jack",
        "kick",
        "lime",
        "mushrooms",
        "nectarine",
        "orange",
        "peach",
        "quant",
        "ripen",
        "strawberry",
        "tang",
        "up",
        "volumne",
        "when",
        "yellow",
        "zip",
    ];

    pub fn check(hash: impl Fn(&[u8]) -> u32, want: &[u32; 25]) {
        for (key, want) in KEYS.iter().zip(want) {
            assert_eq!(hash(key.as_bytes()), *want, "key {key:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in Hash::ALL {
            assert_eq!(h.name().parse::<Hash>(), Ok(h));
        }
        assert!("sha1".parse::<Hash>().is_err());
    }

    #[test]
    fn c_char_sign_extends_high_bytes() {
        assert_eq!(c_char(b'a'), 0x61);
        assert_eq!(c_char(0x7f), 0x7f);
        assert_eq!(c_char(0x80), 0xffff_ff80);
        assert_eq!(c_char(0xe4), 0xffff_ffe4);
    }
}
