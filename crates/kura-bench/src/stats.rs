//! Counting: each connection keeps a [`Tally`] (counters and a latency
//! histogram in nanoseconds); the tallies of a run are merged and turned
//! into a [`RunSummary`], the serializable figures of one run.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency the histogram tells apart: 100 s, in nanoseconds.
const MAX_LATENCY_NS: u64 = 100_000_000_000;
/// Error messages kept as examples.
const ERROR_SAMPLES: usize = 5;

/// What one connection (or a merge of several) counted.
#[derive(Debug, Clone)]
pub struct Tally {
    pub requests: u64,
    pub gets: u64,
    pub sets: u64,
    pub hits: u64,
    pub misses: u64,
    pub wrong_values: u64,
    pub server_errors: u64,
    pub quiet_failures: u64,
    /// Requests sent on a connection that failed before they were answered.
    pub lost: u64,
    pub connection_errors: u64,
    pub error_samples: Vec<String>,
    /// Latency of every answered request, nanoseconds.
    pub latency: Histogram<u64>,
    /// When the last reply arrived.
    pub last_reply: Option<Instant>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            requests: 0,
            gets: 0,
            sets: 0,
            hits: 0,
            misses: 0,
            wrong_values: 0,
            server_errors: 0,
            quiet_failures: 0,
            lost: 0,
            connection_errors: 0,
            error_samples: Vec::new(),
            // The bounds are constants that hdrhistogram accepts.
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
                .expect("valid histogram bounds"),
            last_reply: None,
        }
    }
}

impl Tally {
    /// Every kind of error, added up (a failed connection counts once, and
    /// so does each request it lost).
    pub fn errors(&self) -> u64 {
        self.wrong_values
            + self.server_errors
            + self.quiet_failures
            + self.lost
            + self.connection_errors
    }

    /// Keeps `what` as an example if there are few yet.
    pub fn sample_error(&mut self, what: impl FnOnce() -> String) {
        if self.error_samples.len() < ERROR_SAMPLES {
            self.error_samples.push(what());
        }
    }

    pub fn record_latency(&mut self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.latency.saturating_record(ns);
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Tally) {
        self.requests += other.requests;
        self.gets += other.gets;
        self.sets += other.sets;
        self.hits += other.hits;
        self.misses += other.misses;
        self.wrong_values += other.wrong_values;
        self.server_errors += other.server_errors;
        self.quiet_failures += other.quiet_failures;
        self.lost += other.lost;
        self.connection_errors += other.connection_errors;
        for e in &other.error_samples {
            if self.error_samples.len() < ERROR_SAMPLES {
                self.error_samples.push(e.clone());
            }
        }
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&other.latency);
        self.last_reply = self.last_reply.max(other.last_reply);
    }

    /// The figures of a run that started at `start`.
    pub fn summary(&self, start: Instant, offered_rate: Option<f64>) -> RunSummary {
        let end = self.last_reply.unwrap_or(start).max(start);
        let elapsed = (end - start).as_secs_f64();
        let us = |ns: u64| ns as f64 / 1000.0;
        let h = &self.latency;
        let latency_us = Latency {
            samples: h.len(),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        };
        RunSummary {
            offered_rate,
            requests: self.requests,
            gets: self.gets,
            sets: self.sets,
            hits: self.hits,
            misses: self.misses,
            errors: self.errors(),
            error_kinds: ErrorKinds {
                wrong_value: self.wrong_values,
                server: self.server_errors,
                quiet_set: self.quiet_failures,
                lost: self.lost,
                connections: self.connection_errors,
            },
            error_samples: self.error_samples.clone(),
            elapsed_secs: elapsed,
            throughput: if elapsed > 0.0 {
                self.requests as f64 / elapsed
            } else {
                0.0
            },
            latency_us,
        }
    }
}

/// The figures of one run (one rate of a sweep).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Requests per second asked for (open loop), or `None` (closed loop).
    pub offered_rate: Option<f64>,
    /// Requests answered (or, for quiet sets, sent) in all.
    pub requests: u64,
    pub gets: u64,
    pub sets: u64,
    /// Keys found, over all gets (a multi-get counts each key).
    pub hits: u64,
    /// Keys not found.
    pub misses: u64,
    /// Requests that failed, of every kind below.
    pub errors: u64,
    pub error_kinds: ErrorKinds,
    /// The first few errors, as examples.
    pub error_samples: Vec<String>,
    /// From the start to the last reply.
    pub elapsed_secs: f64,
    /// Requests per second achieved.
    pub throughput: f64,
    /// Latency of answered requests (quiet sets have none), microseconds.
    pub latency_us: Latency,
}

/// The kinds of error counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorKinds {
    /// Gets that returned a value other than one set for that key.
    pub wrong_value: u64,
    /// Error replies (`SERVER_ERROR`, `NOT_STORED`, a failure status ...).
    pub server: u64,
    /// Failure replies to quiet sets (meta and binary only).
    pub quiet_set: u64,
    /// Requests whose connection failed before they were answered.
    pub lost: u64,
    /// Connections that failed (refused, closed, or an unframeable reply).
    pub connections: u64,
}

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub samples: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_tallies_add_up() {
        let start = Instant::now();
        let mut a = Tally {
            requests: 3,
            gets: 3,
            misses: 1,
            wrong_values: 1,
            ..Tally::default()
        };
        a.sample_error(|| "a".into());
        for us in [100, 200, 300] {
            a.record_latency(Duration::from_micros(us));
        }
        let mut b = Tally {
            requests: 1,
            sets: 1,
            lost: 1,
            connection_errors: 1,
            ..Tally::default()
        };
        b.record_latency(Duration::from_micros(1000));
        b.last_reply = Some(start + Duration::from_secs(2));
        a.merge(&b);
        let s = a.summary(start, None);
        assert_eq!((s.requests, s.gets, s.sets, s.errors), (4, 3, 1, 3));
        assert_eq!(s.latency_us.samples, 4);
        assert!((s.latency_us.max - 1000.0).abs() < 1.0);
        assert!((s.latency_us.p50 - 200.0).abs() < 1.0);
        assert!((s.throughput - 2.0).abs() < 1e-9);
        assert_eq!(s.error_samples, vec!["a".to_string()]);
    }
}
