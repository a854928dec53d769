//! Latency histograms with fixed buckets, as Prometheus histograms: a request adds one to its
//! bucket, its time to the sum and one to the count (three relaxed atomic additions, no lock),
//! and `/metrics` shows the buckets cumulated.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::CacheOutcome;

/// The buckets' upper bounds in microseconds (100 µs to 10 s); one more bucket holds the rest.
const BOUNDS: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// One histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Adds one observation.
    pub fn record(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = BOUNDS.partition_point(|&bound| bound < micros);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Appends its lines as `name` with `labels` (`outcome="hit",` or empty).
    fn write(&self, name: &str, labels: &str, out: &mut String) {
        let mut cumulated = 0;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulated += bucket.load(Ordering::Relaxed);
            let le = match BOUNDS.get(i) {
                Some(&bound) => format!("{}", bound as f64 / 1e6),
                None => "+Inf".to_owned(),
            };
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {cumulated}");
        }
        let labels = labels.trim_end_matches(',');
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let count = self.count.load(Ordering::Relaxed);
        if labels.is_empty() {
            let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
        } else {
            let _ = writeln!(
                out,
                "{name}_sum{{{labels}}} {sum}\n{name}_count{{{labels}}} {count}"
            );
        }
    }
}

/// The request and backend histograms on `/metrics`.
pub(super) fn durations(by_outcome: &[Histogram; 7], first_byte: &Histogram, out: &mut String) {
    let name = "kura_http_request_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time from a request to its response head, by cache outcome.\n# TYPE {name} histogram"
    );
    for outcome in CacheOutcome::ALL {
        let labels = format!("outcome=\"{}\",", outcome.name());
        by_outcome[outcome as usize].write(name, &labels, out);
    }
    let name = "kura_http_backend_first_byte_seconds";
    let _ = writeln!(
        out,
        "# HELP {name} Time from a backend request to the backend's response head.\n# TYPE {name} histogram"
    );
    first_byte.write(name, "", out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulated_and_bounds_inclusive() {
        let h = Histogram::default();
        h.record(Duration::from_micros(100));
        h.record(Duration::from_micros(101));
        h.record(Duration::from_secs(60));
        let mut out = String::new();
        h.write("x", "a=\"b\",", &mut out);
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.0001\"} 1\n"), "{out}");
        assert!(
            out.contains("x_bucket{a=\"b\",le=\"0.00025\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("x_bucket{a=\"b\",le=\"10\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_sum{a=\"b\"} 60.000201\n"), "{out}");
        assert!(out.contains("x_count{a=\"b\"} 3\n"), "{out}");
        assert_eq!(h.count(), 3);
    }
}
