//! Paul Hsieh's SuperFastHash as twemproxy builds it for x86-64: 16-bit
//! halves read little-endian and unsigned, but the third byte of a
//! three-byte tail read as a C `char` (sign-extended).

use super::c_char;

fn half(b: &[u8]) -> u32 {
    u32::from(b[0]) | (u32::from(b[1]) << 8)
}

/// SuperFastHash with initial value 0; the empty key hashes to 0.
pub fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let mut h: u32 = 0;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        h = h.wrapping_add(half(&c[..2]));
        let t = (half(&c[2..]) << 11) ^ h;
        h = (h << 16) ^ t;
        h = h.wrapping_add(h >> 11);
    }
    match chunks.remainder() {
        [a, b, c] => {
            h = h.wrapping_add(half(&[*a, *b]));
            h ^= h << 16;
            h ^= c_char(*c) << 18;
            h = h.wrapping_add(h >> 11);
        }
        [a, b] => {
            h = h.wrapping_add(half(&[*a, *b]));
            h ^= h << 11;
            h = h.wrapping_add(h >> 17);
        }
        [a] => {
            h = h.wrapping_add(u32::from(*a));
            h ^= h << 10;
            h = h.wrapping_add(h >> 1);
        }
        _ => {}
    }
    h ^= h << 3;
    h = h.wrapping_add(h >> 5);
    h ^= h << 4;
    h = h.wrapping_add(h >> 17);
    h ^= h << 25;
    h.wrapping_add(h >> 6)
}

#[cfg(test)]
mod tests {
    use super::super::vectors::check;
    use super::*;

    #[test]
    fn hsieh_matches_libhashkit() {
        check(
            hsieh,
            &[
                3738850110, 3636226060, 3821074029, 3489929160, 3485772682, 80540287, 1805464076,
                1895033657, 409795758, 979934958, 3634096985, 1284445480, 2265380744, 707972988,
                353823508, 1549198350, 1327930172, 9304163, 4220749037, 2493964934, 2777873870,
                2057831732, 1510213931, 2027828987, 3395453351,
            ],
        );
    }
}
