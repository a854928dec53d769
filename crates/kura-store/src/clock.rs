//! The store's clock: Unix seconds, read from a monotonic clock so a wall
//! clock step does not expire or revive items. Tests can move it forward.
//!
//! Every operation reads it, and only whole seconds matter, so on Linux it
//! reads the coarse monotonic clock (updated every tick, a few
//! milliseconds, and cheaper to read than the precise one).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch as the store sees them.
#[derive(Debug)]
pub struct Clock {
    base_unix: u32,
    /// The monotonic seconds at which the clock started.
    start: u64,
    skew: AtomicU32,
}

/// Seconds of the coarse monotonic clock (Linux).
#[cfg(target_os = "linux")]
fn monotonic_secs() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and CLOCK_MONOTONIC_COARSE exists on every Linux since 2.6.32.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc == 0 {
        u64::try_from(ts.tv_sec).unwrap_or(0)
    } else {
        fallback_secs()
    }
}

#[cfg(not(target_os = "linux"))]
fn monotonic_secs() -> u64 {
    fallback_secs()
}

/// Seconds since the first call, from `Instant`.
fn fallback_secs() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs()
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock reading the current time.
    pub fn new() -> Clock {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Clock {
            base_unix: u32::try_from(unix).unwrap_or(u32::MAX),
            start: monotonic_secs(),
            skew: AtomicU32::new(0),
        }
    }

    /// The current time in Unix seconds.
    #[inline]
    pub fn now(&self) -> u32 {
        let elapsed = monotonic_secs().saturating_sub(self.start);
        let elapsed = u32::try_from(elapsed).unwrap_or(u32::MAX);
        self.base_unix
            .saturating_add(elapsed)
            .saturating_add(self.skew.load(Ordering::Relaxed))
    }

    /// The Unix time at which this clock started.
    pub fn started(&self) -> u32 {
        self.base_unix
    }

    /// Moves the clock forward by `secs` (for tests and simulations).
    pub fn advance(&self, secs: u32) {
        self.skew.fetch_add(secs, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn seconds_follow_the_precise_clock() {
        let precise = Instant::now();
        let coarse = monotonic_secs();
        std::thread::sleep(Duration::from_millis(1100));
        let elapsed = monotonic_secs() - coarse;
        let took = precise.elapsed().as_secs();
        // The coarse clock lags by at most a tick, so the whole seconds
        // agree within one.
        assert!(
            elapsed.abs_diff(took) <= 1,
            "coarse {elapsed} s, precise {took} s"
        );
        assert!(elapsed >= 1, "no second passed on the coarse clock");
    }

    #[test]
    fn advance_moves_now() {
        let c = Clock::new();
        let before = c.now();
        c.advance(100);
        assert!(c.now() >= before + 100);
        assert!(c.now() <= before + 102);
    }
}
