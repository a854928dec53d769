//! State every connection of one server shares: the settings of the front
//! end (network, limits, TLS, authentication), the counters, the value
//! budget, and the keyspace (store, tables, log, replication), whose run
//! state is the server's shutdown signal.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use kura_keyspace::Keyspace;
pub use kura_keyspace::RunState;
use kura_store::Store;
use tokio::sync::watch;

use crate::config::ServerConfig;
use crate::metrics::{ConnCounters, Conns, StatsTotals, ThreadStats};

/// The version `version` (text and binary) and `stats` report: the version
/// of memcached whose protocol kura speaks, as memcached writes it, so that
/// clients which parse it (as three numbers, say) read memcached's.
pub const VERSION: &str = "1.6.18";

/// kura's own version, in `stats` as `kura_version` and in `kura --version`.
pub const KURA_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Shared by every connection of a server.
#[derive(Debug)]
pub struct Shared {
    /// The keyspace's store (the same one), at hand for every request.
    pub store: Arc<Store>,
    pub config: ServerConfig,
    pub limits: kura_proto::Limits,
    /// Per worker thread, one for UDP, then one per worker's task thread
    /// (conn/direct/).
    pub thread_stats: Vec<Arc<ThreadStats>>,
    pub conns: Arc<Conns>,
    pub counters: ConnCounters,
    pub verbosity: AtomicU8,
    pub started: u32,
    pub pid: u32,
    /// Who may connect, when authentication is on (`-S`, `-Y`).
    pub credentials: Option<crate::reload::Reloadable<crate::auth::Credentials>>,
    /// The certificate and key TLS listeners use (`-Z`).
    pub tls: Option<crate::tls::TlsContext>,
    /// The keys this server holds: the store above, the tables, the
    /// update log and replication.
    pub keyspace: Arc<Keyspace>,
    /// Room for values being received (`budget`).
    pub values: crate::budget::ValueBudget,
    /// The listening sockets, for `stats conns`.
    pub listeners: Vec<crate::metrics::Listener>,
    /// Invalidation subscriptions (`mt`), observing the store from the
    /// first one on.
    pub tracking: Arc<crate::tracking::Registry>,
    pub tracking_observed: std::sync::Once,
    /// Dumps, watchers, hot keys and the crawler's settings (`inspect/`).
    pub inspect: crate::inspect::Inspection,
}

impl Shared {
    pub fn new(config: ServerConfig, keyspace: Arc<Keyspace>) -> Shared {
        let store: Arc<Store> = keyspace.store().clone();
        Shared {
            limits: config.limits(),
            thread_stats: (0..=config.threads * 2).map(|_| Arc::default()).collect(),
            conns: Arc::default(),
            counters: ConnCounters::default(),
            verbosity: AtomicU8::new(config.verbosity),
            started: store.now(),
            pid: std::process::id(),
            credentials: None,
            tls: None,
            values: crate::budget::ValueBudget::for_config(&config),
            listeners: Vec::new(),
            tracking: Arc::default(),
            tracking_observed: std::sync::Once::new(),
            inspect: Default::default(),
            store,
            keyspace,
            config,
        }
    }

    /// Starts a shutdown: listeners stop, connections finish and close.
    pub fn shutdown(&self) {
        self.keyspace.shutdown();
    }

    /// A receiver that sees the shutdown.
    pub fn watch(&self) -> watch::Receiver<RunState> {
        self.keyspace.watch()
    }

    pub fn is_stopping(&self) -> bool {
        self.keyspace.is_stopping()
    }

    pub fn verbosity(&self) -> u8 {
        self.verbosity.load(Ordering::Relaxed)
    }

    /// Sums the per-thread counters.
    pub fn totals(&self) -> StatsTotals {
        let mut t = StatsTotals::default();
        for s in &self.thread_stats {
            s.add_to(&mut t);
        }
        t
    }
}
