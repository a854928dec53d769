//! A pool's rate limit (`rate_limit`, `rate_burst`): a token bucket kept
//! as one number, the time its next token is due (GCRA): a request is
//! taken when that time is at most `burst - 1` intervals ahead of now, and
//! moves it one interval on. So `burst` requests pass at once after a
//! quiet while, then one every `1 / rate` seconds. One atomic per request
//! of a limited pool, and nothing for the others.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::config::RateLimit;

pub struct Bucket {
    /// Nanoseconds between tokens.
    interval: u64,
    /// How far ahead of now the next token may be due.
    ahead: u64,
    /// When the next token is due, in nanoseconds since `base`.
    due: AtomicU64,
    base: Instant,
    /// Requests refused (`stats`: `pool:NAME:rate_limited`).
    pub refused: AtomicU64,
}

impl Bucket {
    pub fn new(l: RateLimit) -> Bucket {
        let interval = (1e9 / l.rate).max(1.0) as u64;
        Bucket {
            interval,
            ahead: ((l.burst - 1.0).max(0.0) * interval as f64) as u64,
            due: AtomicU64::new(0),
            base: Instant::now(),
            refused: AtomicU64::new(0),
        }
    }

    /// Takes a token now if there is one.
    pub fn admit(&self) -> bool {
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.admit_at(now)
    }

    fn admit_at(&self, now: u64) -> bool {
        let mut due = self.due.load(Ordering::Relaxed);
        loop {
            let from = due.max(now);
            if from - now > self.ahead {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            let next = from.saturating_add(self.interval);
            match self
                .due
                .compare_exchange_weak(due, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(d) => due = d,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_at_once_then_one_per_interval() {
        // 10 a second (one per 100 ms), 3 at once.
        let b = Bucket::new(RateLimit {
            rate: 10.0,
            burst: 3.0,
        });
        let ms = 1_000_000;
        let passed = |at: u64, n: usize| (0..n).filter(|_| b.admit_at(at)).count();
        assert_eq!(passed(0, 5), 3);
        assert_eq!(b.refused.load(Ordering::Relaxed), 2);
        // 50 ms on: no token yet; 100 ms on: one.
        assert_eq!(passed(50 * ms, 2), 0);
        assert_eq!(passed(100 * ms, 2), 1);
        // After a quiet second the bucket is full again, not fuller.
        assert_eq!(passed(2_000 * ms, 10), 3);
    }

    #[test]
    fn the_rate_holds_over_a_long_run() {
        let b = Bucket::new(RateLimit {
            rate: 1000.0,
            burst: 1.0,
        });
        // Offered 10 a millisecond for a second: about 1,000 pass.
        let passed = (0..10_000u64).filter(|i| b.admit_at(i * 100_000)).count();
        assert!((999..=1001).contains(&passed), "{passed}");
    }
}
