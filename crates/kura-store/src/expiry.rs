//! When an item expires. [`Expiry::from_exptime`] applies memcached's rules
//! for the exptime field; in-process users can use [`Expiry::after`].

use std::time::Duration;

/// memcached treats exptimes up to 30 days as relative, larger ones as
/// absolute Unix times.
pub const RELATIVE_EXPTIME_MAX: i64 = 60 * 60 * 24 * 30;

/// Deadline value meaning "already expired" (any time in the past works).
pub(crate) const EXPIRED: u32 = 1;

/// When an item stops being visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Never (it may still be evicted).
    Never,
    /// This many seconds from now.
    In(u32),
    /// At this Unix time.
    At(u32),
    /// Immediately: the item is stored but never visible.
    Expired,
}

impl Expiry {
    /// memcached's exptime: 0 never expires, up to 30 days is relative,
    /// larger is an absolute Unix time, negative is already expired.
    pub fn from_exptime(exptime: i64) -> Expiry {
        match exptime {
            0 => Expiry::Never,
            e if e < 0 => Expiry::Expired,
            e if e <= RELATIVE_EXPTIME_MAX => Expiry::In(e as u32),
            e => Expiry::At(u32::try_from(e).unwrap_or(u32::MAX)),
        }
    }

    /// Expires after `d`, rounded up to whole seconds.
    pub fn after(d: Duration) -> Expiry {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        Expiry::In(u32::try_from(secs).unwrap_or(u32::MAX))
    }

    /// The deadline in Unix seconds (0 = never) given the current time.
    pub fn deadline(self, now: u32) -> u32 {
        match self {
            Expiry::Never => 0,
            Expiry::In(s) => now.saturating_add(s),
            Expiry::At(t) if t <= now => EXPIRED,
            Expiry::At(t) => t,
            Expiry::Expired => EXPIRED,
        }
    }
}

/// Whether an item with `deadline` is expired at `now`.
#[inline]
pub(crate) fn is_expired(deadline: u32, now: u32) -> bool {
    deadline != 0 && deadline <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_rules() {
        assert_eq!(Expiry::from_exptime(0), Expiry::Never);
        assert_eq!(Expiry::from_exptime(-1), Expiry::Expired);
        assert_eq!(Expiry::from_exptime(10), Expiry::In(10));
        assert_eq!(Expiry::from_exptime(2_592_000), Expiry::In(2_592_000));
        assert_eq!(Expiry::from_exptime(2_592_001), Expiry::At(2_592_001));
        let now = 1_700_000_000;
        assert_eq!(Expiry::In(10).deadline(now), now + 10);
        assert!(is_expired(Expiry::At(now - 5).deadline(now), now));
        assert!(!is_expired(Expiry::At(now + 5).deadline(now), now));
        assert!(is_expired(Expiry::Expired.deadline(now), now));
        assert!(!is_expired(Expiry::Never.deadline(now), now));
    }

    #[test]
    fn after_rounds_up() {
        assert_eq!(Expiry::after(Duration::from_millis(1500)), Expiry::In(2));
        assert_eq!(Expiry::after(Duration::from_secs(3)), Expiry::In(3));
    }
}
