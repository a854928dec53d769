//! MD5 digests read as four little-endian 32-bit words: word 0 is the
//! `md5` key hash of libmemcached and twemproxy, and ketama takes all four
//! as four points on the continuum.

use md5::{Digest, Md5};

/// The digest's four words.
pub fn words(data: &[u8]) -> [u32; 4] {
    let d = Md5::digest(data);
    std::array::from_fn(|i| {
        u32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]])
    })
}

/// Word `i` (0 to 3) of the digest.
pub fn word(data: &[u8], i: usize) -> u32 {
    words(data)[i]
}

#[cfg(test)]
mod tests {
    use super::super::vectors::check;
    use super::*;

    #[test]
    fn md5_matches_libhashkit() {
        check(
            |k| word(k, 0),
            &[
                3195025439, 2556848621, 3724893440, 3332385401, 245758794, 2550894432, 121710495,
                3053817768, 1250994555, 1862072655, 2631955953, 2951528551, 1451250070, 2820856945,
                2060845566, 3646985608, 2138080750, 217675895, 2230934345, 1234361223, 3968582726,
                2455685270, 1293568479, 199067604, 2042482093,
            ],
        );
    }

    #[test]
    fn words_are_the_digest_little_endian() {
        // MD5("") = d41d8cd98f00b204e9800998ecf8427e
        assert_eq!(
            words(b""),
            [0xd98c_1dd4, 0x04b2_008f, 0x9809_80e9, 0x7e42_f8ec]
        );
    }
}
