//! The store's clock: Unix seconds, read from a monotonic clock so a wall
//! clock step does not expire or revive items. Tests can move it forward.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch as the store sees them.
#[derive(Debug)]
pub struct Clock {
    base_unix: u32,
    start: Instant,
    skew: AtomicU32,
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
            start: Instant::now(),
            skew: AtomicU32::new(0),
        }
    }

    /// The current time in Unix seconds.
    #[inline]
    pub fn now(&self) -> u32 {
        let elapsed = u32::try_from(self.start.elapsed().as_secs()).unwrap_or(u32::MAX);
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
