//! Number parsing with the exact acceptance rules of memcached's `safe_strto*`
//! helpers, so that kura accepts and rejects the same tokens memcached does.
//!
//! memcached parses numeric tokens with C's `strtol`/`strtoull`: leading
//! whitespace and a sign are allowed, the digits must be followed by
//! whitespace or the end of the token, and an unsigned value written with a
//! minus sign is accepted only when it does not wrap (so `-0` is 0 and `-1`
//! is an error). Values that do not fit are errors.

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits a token into (negative, digits) the way `strtol` reads it, checking
/// that only whitespace follows the digits.
fn split_sign_digits(tok: &[u8]) -> Option<(bool, &[u8])> {
    let mut i = 0;
    while i < tok.len() && is_c_space(tok[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < tok.len() && (tok[i] == b'+' || tok[i] == b'-') {
        negative = tok[i] == b'-';
        i += 1;
    }
    let start = i;
    while i < tok.len() && tok[i].is_ascii_digit() {
        i += 1;
    }
    if i == start {
        return None;
    }
    let digits = &tok[start..i];
    if tok[i..].iter().any(|&b| !is_c_space(b)) {
        return None;
    }
    Some((negative, digits))
}

fn digits_to_u64(digits: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(v)
}

/// Parses an unsigned 64-bit decimal as memcached's `safe_strtoull`.
pub fn parse_u64(tok: &[u8]) -> Option<u64> {
    let (negative, digits) = split_sign_digits(tok)?;
    let v = digits_to_u64(digits)?;
    if !negative {
        return Some(v);
    }
    // strtoull negates modulo 2^64; memcached rejects the result only when it
    // looks negative as a signed number.
    let wrapped = v.wrapping_neg();
    if (wrapped as i64) < 0 {
        None
    } else {
        Some(wrapped)
    }
}

/// Parses an unsigned 32-bit decimal (client flags). memcached silently
/// truncates values above `u32::MAX`; kura rejects them instead.
pub fn parse_u32(tok: &[u8]) -> Option<u32> {
    parse_u64(tok).and_then(|v| u32::try_from(v).ok())
}

/// Parses a signed 32-bit decimal as memcached's `safe_strtol` (exptimes,
/// lengths): `strtol` reads a 64-bit `long`, rejecting only values that do
/// not fit in it, and the result is then truncated to 32 bits, so
/// `99999999999` reads as `1215752191` and `2147483648` as `i32::MIN`.
pub fn parse_i32(tok: &[u8]) -> Option<i32> {
    let (negative, digits) = split_sign_digits(tok)?;
    let v = digits_to_u64(digits)?;
    let long = if negative {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        (v as i64).wrapping_neg()
    } else {
        i64::try_from(v).ok()?
    };
    Some(long as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_rules() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"+7"), Some(7));
        assert_eq!(parse_u64(b"\t7"), Some(7));
        assert_eq!(parse_u64(b"7\r"), Some(7));
        assert_eq!(parse_u64(b"7a"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-"), None);
    }

    #[test]
    fn i32_rules() {
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"2147483647"), Some(i32::MAX));
        assert_eq!(parse_i32(b"2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"99999999999"), Some(1_215_752_191));
        assert_eq!(parse_i32(b"-99999999999"), Some(-1_215_752_191));
        assert_eq!(parse_i32(b"4294967297"), Some(1));
        assert_eq!(parse_i32(b"9223372036854775807"), Some(-1));
        assert_eq!(parse_i32(b"9223372036854775808"), None);
        assert_eq!(parse_i32(b"-9223372036854775808"), Some(0));
        assert_eq!(parse_i32(b"-9223372036854775809"), None);
        assert_eq!(parse_i32(b"abc"), None);
    }

    #[test]
    fn u32_rejects_overflow() {
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), None);
    }
}
