//! Per-request latency, by command family, for the Prometheus endpoint.
//! Each worker's [`Latencies`] sits in its `ThreadStats` and only that
//! worker writes it: a request adds one to a bucket and its time to a sum
//! with relaxed loads and stores, no locked instruction. A request's time
//! runs from when its bytes are in the read buffer (or the previous
//! request of the batch is done) to when its reply is composed; writing
//! the reply is not included.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kura_proto::binary::{BinFrame, Command};
use kura_proto::{Frame, Request};

use crate::metrics::add;

pub use kura_store::monotonic_nanos as now_ns;

/// Upper bounds of the buckets, in microseconds (the last bucket, +Inf,
/// takes the rest).
pub const BOUNDS_US: [u64; 13] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 100_000, 1_000_000,
];
const BUCKETS: usize = BOUNDS_US.len() + 1;

/// The command families timed, with the label each is exported under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Family {
    Get,
    Set,
    Delete,
    IncrDecr,
    Touch,
    MetaGet,
    MetaSet,
    MetaDelete,
    MetaArith,
    Other,
}

impl Family {
    pub const ALL: [Family; 10] = [
        Family::Get,
        Family::Set,
        Family::Delete,
        Family::IncrDecr,
        Family::Touch,
        Family::MetaGet,
        Family::MetaSet,
        Family::MetaDelete,
        Family::MetaArith,
        Family::Other,
    ];

    /// The `command` label.
    pub fn label(self) -> &'static str {
        match self {
            Family::Get => "get",
            Family::Set => "set",
            Family::Delete => "delete",
            Family::IncrDecr => "incr_decr",
            Family::Touch => "touch",
            Family::MetaGet => "mg",
            Family::MetaSet => "ms",
            Family::MetaDelete => "md",
            Family::MetaArith => "ma",
            Family::Other => "other",
        }
    }

    /// The family of a text or meta frame (a bad request is `Other`).
    pub fn of_text(frame: &Frame<'_>) -> Family {
        let Frame::Request { request, .. } = frame else {
            return Family::Other;
        };
        match request {
            Request::Get(g) if g.touch.is_some() => Family::Touch,
            Request::Get(_) => Family::Get,
            Request::Store(_) => Family::Set,
            Request::Delete(_) => Family::Delete,
            Request::Arith(_) => Family::IncrDecr,
            Request::Touch(_) => Family::Touch,
            Request::MetaGet(_) => Family::MetaGet,
            Request::MetaSet(_) => Family::MetaSet,
            Request::MetaDelete(_) => Family::MetaDelete,
            Request::MetaArith(_) => Family::MetaArith,
            _ => Family::Other,
        }
    }

    /// The family of a binary frame.
    pub fn of_binary(frame: &BinFrame<'_>) -> Family {
        let BinFrame::Request { request, .. } = frame else {
            return Family::Other;
        };
        match &request.command {
            Command::Get { touch: Some(_), .. } => Family::Touch,
            Command::Get { .. } => Family::Get,
            Command::Store { .. } => Family::Set,
            Command::Delete { .. } => Family::Delete,
            Command::Arith { .. } => Family::IncrDecr,
            _ => Family::Other,
        }
    }
}

/// One family's histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// A sum of histograms: per-bucket counts (not cumulative) and the total
/// time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramTotals {
    pub buckets: [u64; BUCKETS],
    pub sum_ns: u64,
}

impl HistogramTotals {
    /// Requests counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// One worker's histograms, one per family.
#[derive(Debug, Default)]
pub struct Latencies {
    families: [Histogram; Family::ALL.len()],
}

impl Latencies {
    /// Counts one request of `family` that took `took`. Only the owning
    /// thread may call this.
    #[inline]
    pub fn record(&self, family: Family, took: Duration) {
        self.record_ns(family, u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records a request of `family` that began at `start` (a [`now_ns`]
    /// reading); returns the time now, where the next request begins.
    #[inline]
    pub fn record_since(&self, family: Family, start: u64) -> u64 {
        let now = now_ns();
        self.record_ns(family, now.saturating_sub(start));
        now
    }

    fn record_ns(&self, family: Family, ns: u64) {
        let us = ns / 1_000;
        let bucket = BOUNDS_US
            .iter()
            .position(|&b| us < b)
            .unwrap_or(BOUNDS_US.len());
        let h = &self.families[family as usize];
        add(&h.buckets[bucket], 1);
        add(&h.sum_ns, ns);
    }

    /// Adds this worker's counts into `t`, by family.
    pub fn add_to(&self, t: &mut [HistogramTotals; Family::ALL.len()]) {
        for (h, t) in self.families.iter().zip(t.iter_mut()) {
            for (b, tb) in h.buckets.iter().zip(t.buckets.iter_mut()) {
                *tb += b.load(Ordering::Relaxed);
            }
            t.sum_ns += h.sum_ns.load(Ordering::Relaxed);
        }
    }

    /// Zeroes the histograms (`stats reset`).
    pub fn reset(&self) {
        for h in &self.families {
            for b in &h.buckets {
                b.store(0, Ordering::Relaxed);
            }
            h.sum_ns.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_fall_in_the_bucket_of_their_time() {
        let l = Latencies::default();
        l.record(Family::Get, Duration::from_micros(3));
        l.record(Family::Get, Duration::from_micros(5));
        l.record(Family::Get, Duration::from_secs(5));
        l.record(Family::Set, Duration::from_micros(300));
        let mut t = [HistogramTotals::default(); Family::ALL.len()];
        l.add_to(&mut t);
        let get = t[Family::Get as usize];
        assert_eq!(get.count(), 3);
        assert_eq!(get.buckets[0], 1, "under 5 us");
        assert_eq!(get.buckets[1], 1, "5 us is not under 5 us");
        assert_eq!(get.buckets[BUCKETS - 1], 1, "+Inf");
        assert_eq!(get.sum_ns, 5_000_008_000);
        assert_eq!(t[Family::Set as usize].buckets[6], 1, "250 to 500 us");
        l.reset();
        let mut t = [HistogramTotals::default(); Family::ALL.len()];
        l.add_to(&mut t);
        assert_eq!(t[Family::Get as usize].count(), 0);
    }

    #[test]
    fn families_follow_the_command() {
        let limits = kura_proto::Limits::default();
        let text = |b: &[u8]| Family::of_text(&kura_proto::parse(b, &limits));
        assert_eq!(text(b"get a b\r\n"), Family::Get);
        assert_eq!(text(b"gat 10 a\r\n"), Family::Touch);
        assert_eq!(text(b"set a 0 0 1\r\nx\r\n"), Family::Set);
        assert_eq!(text(b"ms a 1\r\nx\r\n"), Family::MetaSet);
        assert_eq!(text(b"decr a 1\r\n"), Family::IncrDecr);
        assert_eq!(text(b"bogus\r\n"), Family::Other);
        for (f, label) in Family::ALL.iter().zip(["get", "set", "delete"]) {
            assert_eq!(f.label(), label);
        }
    }
}
