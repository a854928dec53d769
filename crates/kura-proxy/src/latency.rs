//! Each backend's time to answer, as a Prometheus histogram: from the
//! moment a request is queued on a worker's connection to the backend to
//! the read that completed its reply. The reader's clock read of that read
//! is reused (`backend/`), so measuring costs no clock read a request.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in microseconds: 100 µs to 2.5 s.
const BOUNDS_US: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000,
];

/// Counts per bucket (not cumulative; their total is the count) and the
/// sum: two atomic additions a request.
#[derive(Default)]
pub struct Latency {
    buckets: [AtomicU64; BOUNDS_US.len() + 1],
    sum_us: AtomicU64,
    /// The recent time to answer: each reply moves it an eighth of the
    /// way to its own (a replicated pool's `read = "nearest"`).
    recent_us: AtomicU64,
}

impl Latency {
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        let old = self.recent_us.load(Ordering::Relaxed);
        self.recent_us
            .store(old - old / 8 + us.min(1 << 40) / 8, Ordering::Relaxed);
    }

    /// The recent time to answer, in microseconds (0 before any reply).
    pub fn recent_us(&self) -> u64 {
        self.recent_us.load(Ordering::Relaxed)
    }

    /// The histogram's lines for `name{labels,le=...}`, in seconds.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut total = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            total += b.load(Ordering::Relaxed);
            let le = match BOUNDS_US.get(i) {
                Some(&us) => format!("{}", us as f64 / 1e6),
                None => "+Inf".to_string(),
            };
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {total}");
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_bounded_by_their_le() {
        let l = Latency::default();
        for us in [50, 100, 101, 3_000, 9_000_000] {
            l.record(Duration::from_micros(us));
        }
        let mut out = String::new();
        l.render(&mut out, "x", "backend=\"b\"");
        assert!(
            out.contains("x_bucket{backend=\"b\",le=\"0.0001\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{backend=\"b\",le=\"0.00025\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{backend=\"b\",le=\"0.005\"} 4\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{backend=\"b\",le=\"2.5\"} 4\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{backend=\"b\",le=\"+Inf\"} 5\n"),
            "{out}"
        );
        assert!(out.contains("x_count{backend=\"b\"} 5\n"), "{out}");
        assert!(out.contains("x_sum{backend=\"b\"} 9.003251\n"), "{out}");
    }
}
