//! Counters of what the cache did, read with [`crate::RecordCache::stats`]
//! and printed as memcached-style `STAT` lines or Prometheus text.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($name:ident: $doc:literal,)*) => {
        #[derive(Default)]
        pub(crate) struct Counters {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A snapshot of the counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Stats {
            $(#[doc = $doc] pub $name: u64,)*
        }

        impl Counters {
            pub(crate) fn snapshot(&self) -> Stats {
                Stats { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl Stats {
            /// `(name, value, help)` for every counter.
            pub fn fields(&self) -> Vec<(&'static str, u64, &'static str)> {
                vec![$((stringify!($name), self.$name, $doc),)*]
            }
        }
    };
}

counters! {
    record_hits: "records served from the cache",
    record_misses: "records not in the cache (absent or tombstoned)",
    index_hits: "index entries served from the cache",
    index_misses: "index entries not in the cache",
    cache_calls: "multi-operations sent to the cache",
    cache_round_trips: "cache round trips (one per server a multi-operation touched)",
    cache_errors: "cache operations that failed or timed out (reads went to the database)",
    db_queries: "database queries made for reads",
    db_rows: "rows read from the database for reads",
    db_errors: "database reads that failed or timed out",
    write_back_micros: "microseconds spent writing misses back",
    fills_stored: "entries written back (ADD where absent, CAS over a tombstone)",
    fills_refused: "write-backs refused because an invalidation came first",
    fills_skipped: "write-backs by ADD skipped: the read took longer than half the tombstone TTL",
    fills_fenced: "write-backs not sent: the server's connection is newer than the read (it may have restarted)",
    index_stale: "cached index entries refilled because a member no longer matched",
    decode_errors: "rows that did not fit the record type (not database errors)",
    fill_lock_waits: "fetches that waited for another reader's fill",
    invalidated_keys: "keys tombstoned after a commit or by the outbox",
    invalidation_errors: "invalidations the cache refused or missed (left in the outbox)",
    outbox_drained: "outbox rows expired and removed",
    commits: "transactions committed through the helper",
    expires: "expire calls for writes made outside RecordTx",
}

impl Counters {
    pub(crate) fn add(&self, c: &AtomicU64, n: u64) {
        let _ = self;
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl Stats {
    /// memcached-style `STAT name value` lines.
    pub fn stat_lines(&self) -> String {
        self.fields()
            .iter()
            .map(|(n, v, _)| format!("STAT record_{n} {v}\r\n"))
            .collect()
    }

    /// Prometheus text exposition, counters named `kura_record_<name>_total`.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        for (n, v, help) in self.fields() {
            out.push_str(&format!(
                "# HELP kura_record_{n}_total {help}\n# TYPE kura_record_{n}_total counter\nkura_record_{n}_total {v}\n"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_print_as_stat_lines_and_prometheus() {
        let c = Counters::default();
        c.add(&c.db_errors, 2);
        c.add(&c.cache_errors, 1);
        let s = c.snapshot();
        assert_eq!((s.db_errors, s.cache_errors), (2, 1));
        let lines = s.stat_lines();
        assert!(lines.contains("STAT record_db_errors 2\r\n"));
        assert!(lines.contains("STAT record_cache_errors 1\r\n"));
        let prom = s.prometheus();
        assert!(prom.contains(
            "# TYPE kura_record_db_errors_total counter\nkura_record_db_errors_total 2\n"
        ));
        assert_eq!(prom.matches("# HELP").count(), s.fields().len());
    }
}
