//! What the log thread owes: records numbered (their writes applied to the
//! store, perhaps acknowledged) but not yet written to the log file, in
//! records, bytes and seconds, and the back-pressure that bounds it.
//!
//! A process crash loses exactly what the log thread owes, so under
//! `--fsync everysec` and `no` the debt is what an operator can lose. Left
//! alone it grows without limit when writers outrun the log thread (large
//! values, a slow disk, a log thread starved of CPU), and the item handles
//! it holds keep their memory. So a connection whose requests made records
//! checks the debt before it sends its replies; past either bound it waits
//! until its own records are written, as Redis delays writes when its AOF
//! falls behind. Each connection can then add at most one batch of
//! requests beyond the bound.
//!
//! The age of the debt is measured without a timestamp per record: the log
//! thread notes, when a batch starts, the last number given out and the
//! time; once everything up to that number is written, every record older
//! than that time is, so the oldest record still owed is younger than the
//! time noted ([`Lag::covered`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// Bounds on the log thread's debt (`--log-max-lag`, `--log-max-lag-bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LagLimits {
    /// Writers wait once the oldest record not yet written is this old.
    pub time: Duration,
    /// Writers wait once the records not yet written are this many bytes.
    pub bytes: u64,
}

/// The debt, shared by the sink (which adds to it), the log thread (which
/// pays it) and the connections (which wait on it).
#[derive(Debug)]
pub struct Lag {
    limits: LagLimits,
    base: Instant,
    owed_bytes: AtomicU64,
    /// The last record written to the file.
    written: watch::Sender<u64>,
    written_seq: AtomicU64,
    /// Nanoseconds after `base` before which every record was written.
    covered_ns: AtomicU64,
    waits: AtomicU64,
}

impl Lag {
    pub(super) fn new(limits: LagLimits, written: u64) -> Lag {
        Lag {
            limits,
            base: Instant::now(),
            owed_bytes: AtomicU64::new(0),
            written: watch::Sender::new(written),
            written_seq: AtomicU64::new(written),
            covered_ns: AtomicU64::new(0),
            waits: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// A record of `bytes` was numbered (called under a shard lock).
    #[inline]
    pub(super) fn owe(&self, bytes: usize) {
        self.owed_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Records of `bytes` in all, up to number `last`, were written.
    pub(super) fn paid(&self, last: u64, bytes: u64) {
        self.owed_bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.written_seq.store(last, Ordering::Release);
        self.written.send_replace(last);
    }

    /// The log was replaced or cut back (replication): its last record is
    /// now `last`.
    pub(super) fn restart(&self, last: u64) {
        self.written_seq.store(last, Ordering::Release);
        self.written.send_replace(last);
    }

    /// A point in time and the last record numbered by then, for
    /// [`Lag::covered`].
    pub(super) fn mark(&self, last_numbered: u64) -> (u64, u64) {
        (last_numbered, self.now_ns())
    }

    /// Everything numbered by the time of `mark` is written: the debt is
    /// younger than it.
    pub(super) fn covered(&self, mark: (u64, u64)) {
        self.covered_ns.fetch_max(mark.1, Ordering::Release);
    }

    /// A receiver that sees each new last written record.
    pub fn watch_written(&self) -> watch::Receiver<u64> {
        self.written.subscribe()
    }

    /// The last record written to the file.
    pub fn written(&self) -> u64 {
        self.written_seq.load(Ordering::Acquire)
    }

    /// Bytes of records numbered and not yet written.
    pub fn owed_bytes(&self) -> u64 {
        self.owed_bytes.load(Ordering::Relaxed)
    }

    /// An upper bound on the age of the oldest record not yet written
    /// (zero when none is owed); `next` is the number the next record gets.
    pub fn age(&self, next: u64) -> Duration {
        if self.written() + 1 >= next {
            return Duration::ZERO;
        }
        let since = self
            .now_ns()
            .saturating_sub(self.covered_ns.load(Ordering::Acquire));
        Duration::from_nanos(since)
    }

    /// Times a connection's writes waited for the log.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Whether the debt is past a bound.
    pub(super) fn over(&self, next: u64) -> bool {
        self.owed_bytes() > self.limits.bytes || self.age(next) > self.limits.time
    }

    /// Whether a connection that made records up to `seq` must wait for
    /// the log before replying: they are not all written and the debt is
    /// past a bound. Counts the wait.
    pub(super) fn must_wait(&self, seq: u64, next: u64) -> bool {
        let wait = self.written() < seq && self.over(next);
        if wait {
            self.waits.fetch_add(1, Ordering::Relaxed);
        }
        wait
    }

    /// Waits until record `seq` is written; false if it never will be
    /// (the log thread stopped).
    pub(super) async fn written_up_to(&self, seq: u64) -> bool {
        let mut rx = self.written.subscribe();
        let ok = rx.wait_for(|&w| w >= seq).await.is_ok();
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lag(bytes: u64) -> Lag {
        Lag::new(
            LagLimits {
                time: Duration::from_secs(3600),
                bytes,
            },
            10,
        )
    }

    #[test]
    fn nothing_owed_has_no_age_and_is_not_over() {
        let l = lag(100);
        assert_eq!(l.age(11), Duration::ZERO);
        assert!(!l.over(11));
    }

    #[test]
    fn bytes_past_the_bound_are_over_until_paid() {
        let l = lag(100);
        l.owe(60);
        assert!(!l.over(12));
        l.owe(60);
        assert!(l.over(13));
        l.paid(12, 120);
        assert_eq!(l.owed_bytes(), 0);
        assert!(!l.over(13));
    }

    #[test]
    fn the_age_runs_from_the_last_covered_mark() {
        let l = Lag::new(
            LagLimits {
                time: Duration::from_millis(20),
                bytes: u64::MAX,
            },
            10,
        );
        let first = l.mark(11);
        std::thread::sleep(Duration::from_millis(30));
        let second = l.mark(12);
        // Records owed since before anything was covered: over.
        assert!(l.over(13));
        l.covered(first);
        let older = l.age(13);
        assert!(older >= Duration::from_millis(30));
        l.covered(second);
        assert_eq!(l.covered_ns.load(Ordering::Relaxed), second.1);
        // A mark covered late does not move the bound back.
        l.covered(first);
        assert_eq!(l.covered_ns.load(Ordering::Relaxed), second.1);
        l.paid(12, 0);
        assert_eq!(l.age(13), Duration::ZERO);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_waiter_is_released_when_its_record_is_written() {
        let l = std::sync::Arc::new(lag(10));
        l.owe(100);
        assert!(l.must_wait(12, 13));
        assert_eq!(l.waits(), 1);
        let w = {
            let l = l.clone();
            tokio::spawn(async move { l.written_up_to(12).await })
        };
        tokio::task::yield_now().await;
        assert!(!w.is_finished());
        l.paid(12, 100);
        assert!(w.await.unwrap());
    }

    #[test]
    fn under_the_bounds_nobody_waits() {
        let l = lag(1000);
        l.owe(100);
        assert!(!l.must_wait(12, 13));
        l.owe(1000);
        // Over the bound, but the record is written already.
        l.paid(12, 0);
        assert!(!l.must_wait(12, 13));
        assert_eq!(l.waits(), 0);
    }
}
