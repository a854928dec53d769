//! delta-seconds (RFC 9111 §1.2.2): a non-negative count of seconds, as in `max-age=60` and
//! `Age: 60`. A value too large to represent, or a calculation that would overflow, becomes
//! 2^31 seconds (about 68 years), so a huge number never wraps to a small one.

use std::time::Duration;

/// The value the RFC gives every delta-seconds too large to represent: 2^31.
pub const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// Parses delta-seconds: one or more ASCII digits and nothing else (no sign, no fraction, no
/// white space). Values from 2^31 up, however many digits, are 2^31 (§1.2.2).
pub fn parse(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for digit in bytes {
        value = value * 10 + u64::from(digit - b'0');
        if value >= DELTA_SECONDS_MAX {
            return Some(DELTA_SECONDS_MAX);
        }
    }
    Some(value)
}

/// A duration as delta-seconds for a header (whole seconds, rounded down, at most 2^31).
pub fn from_duration(duration: Duration) -> u64 {
    duration.as_secs().min(DELTA_SECONDS_MAX)
}

/// Delta-seconds as a duration.
pub fn to_duration(seconds: u64) -> Duration {
    Duration::from_secs(seconds.min(DELTA_SECONDS_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 9111 §1.2.2: delta-seconds = 1*DIGIT.
    #[test]
    fn digits_only() {
        assert_eq!(parse(b"0"), Some(0));
        assert_eq!(parse(b"60"), Some(60));
        assert_eq!(parse(b"007"), Some(7));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"1 ",
            b"1e3",
            b"abc",
            b"\xff",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    // RFC 9111 §1.2.2: larger than the greatest integer representable -> 2^31.
    #[test]
    fn huge_values_become_two_to_the_31() {
        assert_eq!(parse(b"2147483647"), Some(2_147_483_647));
        assert_eq!(parse(b"2147483648"), Some(DELTA_SECONDS_MAX));
        assert_eq!(
            parse(b"99999999999999999999999999999999"),
            Some(DELTA_SECONDS_MAX)
        );
        let many = vec![b'9'; 100_000];
        assert_eq!(parse(&many), Some(DELTA_SECONDS_MAX));
    }

    #[test]
    fn durations_are_capped() {
        assert_eq!(from_duration(Duration::from_millis(1_999)), 1);
        assert_eq!(from_duration(Duration::MAX), DELTA_SECONDS_MAX);
        assert_eq!(
            to_duration(u64::MAX),
            Duration::from_secs(DELTA_SECONDS_MAX)
        );
    }
}
