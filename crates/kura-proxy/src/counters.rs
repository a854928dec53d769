//! The proxy's own counters (the `stats` lines memcached has: connections,
//! gets, sets, hits), counted by the connections and protocol modules
//! through the context (`ctx.rs`) and reported by `stats.rs`.

use std::sync::atomic::{AtomicU64, Ordering};

/// The counters, shared by the workers.
#[derive(Default)]
pub struct Stats {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_touch: AtomicU64,
    pub cmd_flush: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    /// TLS handshakes that failed or timed out (memcached's name).
    pub ssl_handshake_errors: AtomicU64,
}

fn add(c: &AtomicU64, n: usize) {
    c.fetch_add(n as u64, Ordering::Relaxed);
}

impl Stats {
    pub fn count_get(&self, keys: usize, touch: bool) {
        add(&self.cmd_get, keys);
        if touch {
            add(&self.cmd_touch, keys);
        }
    }

    pub fn count_hits(&self, hits: usize, misses: usize) {
        add(&self.get_hits, hits);
        add(&self.get_misses, misses);
    }

    pub fn count_set(&self) {
        add(&self.cmd_set, 1);
    }

    pub fn count_touch(&self) {
        add(&self.cmd_touch, 1);
    }

    pub fn count_flush(&self) {
        add(&self.cmd_flush, 1);
    }
}
