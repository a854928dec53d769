//! Counters for `stats`. Each worker thread owns a [`ThreadStats`] that only
//! it writes (plain relaxed loads and stores, no locked instructions on the
//! request path); `stats` sums them. Connection-level counters are global
//! atomics touched only on connect and disconnect.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

macro_rules! thread_stats {
    ($($name:ident),* $(,)?) => {
        /// One worker's request counters, named as memcached names them.
        #[derive(Debug, Default)]
        #[repr(align(128))]
        pub struct ThreadStats {
            $(pub $name: AtomicU64,)*
            /// Request latency by command family (`--metrics-listen`).
            pub latency: crate::latency::Latencies,
            /// The keys this thread read, while `stats topkeys` is on.
            pub hot_keys: crate::inspect::topkeys::Sketch,
        }

        /// A sum of [`ThreadStats`].
        #[derive(Debug, Default, Clone, Copy)]
        pub struct StatsTotals {
            $(pub $name: u64,)*
        }

        impl ThreadStats {
            /// Adds this thread's counters into `t`.
            pub fn add_to(&self, t: &mut StatsTotals) {
                $(t.$name += self.$name.load(Ordering::Relaxed);)*
            }

            /// Zeroes the counters (`stats reset`).
            pub fn reset(&self) {
                $(self.$name.store(0, Ordering::Relaxed);)*
                self.latency.reset();
            }
        }
    };
}

thread_stats!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    delete_misses,
    delete_hits,
    incr_misses,
    incr_hits,
    decr_misses,
    decr_hits,
    cas_misses,
    cas_hits,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
    auth_cmds,
    auth_errors,
    idle_kicks,
    bytes_read,
    bytes_written,
    conn_yields,
);

/// Adds `n` to a counter that only the calling thread writes.
#[inline]
pub fn add(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Adds one to a single-writer counter.
#[inline]
pub fn incr(counter: &AtomicU64) {
    add(counter, 1);
}

/// What a connection is doing, for `stats conns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ConnState {
    Waiting = 0,
    ParseCmd = 1,
    Write = 2,
    Swallow = 3,
    Closing = 4,
}

impl ConnState {
    fn name(v: u8) -> &'static str {
        match v {
            1 => "conn_parse_cmd",
            2 => "conn_mwrite",
            3 => "conn_swallow",
            4 => "conn_closing",
            _ => "conn_waiting",
        }
    }
}

/// One open connection as `stats conns` shows it.
#[derive(Debug)]
pub struct ConnInfo {
    pub addr: String,
    pub listen_addr: String,
    state: AtomicU8,
    last_cmd: AtomicU32,
}

impl ConnInfo {
    pub fn set_state(&self, s: ConnState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    pub fn set_last_cmd(&self, now: u32) {
        self.last_cmd.store(now, Ordering::Relaxed);
    }
}

/// A listening socket as `stats conns` shows it (memcached lists its
/// listeners among the connections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The socket's file descriptor, as memcached numbers its entries.
    pub id: u64,
    /// `tcp:HOST:PORT`, `udp:HOST:PORT` or `unix:PATH`.
    pub addr: String,
    pub udp: bool,
}

/// Open connections, keyed by file descriptor like memcached's.
#[derive(Debug, Default)]
pub struct Conns {
    map: Mutex<BTreeMap<u64, Arc<ConnInfo>>>,
}

impl Conns {
    /// Registers a connection; it is removed when the guard drops.
    pub fn register(
        self: &Arc<Self>,
        id: u64,
        addr: String,
        listen_addr: String,
        now: u32,
    ) -> ConnGuard {
        let info = Arc::new(ConnInfo {
            addr,
            listen_addr,
            state: AtomicU8::new(ConnState::Waiting as u8),
            last_cmd: AtomicU32::new(now),
        });
        self.map.lock().insert(id, info.clone());
        ConnGuard {
            conns: self.clone(),
            id,
            info,
        }
    }

    /// `(id, addr, listen_addr, state, last_cmd)` for each connection.
    pub fn snapshot(&self) -> Vec<(u64, String, String, &'static str, u32)> {
        self.map
            .lock()
            .iter()
            .map(|(id, c)| {
                (
                    *id,
                    c.addr.clone(),
                    c.listen_addr.clone(),
                    ConnState::name(c.state.load(Ordering::Relaxed)),
                    c.last_cmd.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}

/// Keeps a connection registered while alive.
#[derive(Debug)]
pub struct ConnGuard {
    conns: Arc<Conns>,
    id: u64,
    pub info: Arc<ConnInfo>,
}

impl ConnGuard {
    /// The connection's file descriptor.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.conns.map.lock().remove(&self.id);
    }
}

/// Server-wide connection counters.
#[derive(Debug, Default)]
pub struct ConnCounters {
    pub curr: AtomicU64,
    pub total: AtomicU64,
    pub rejected: AtomicU64,
    /// TLS handshakes that failed or timed out (`ssl_handshake_errors`).
    pub ssl_handshake_errors: AtomicU64,
}
