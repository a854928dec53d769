//! State every connection of one server shares: the store, the settings,
//! the counters and the shutdown signal.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

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

/// The fixed-length tables, by name.
#[derive(Debug, Default, Clone)]
pub struct Tables(Vec<(Box<[u8]>, Arc<kura_table::Table>)>);

impl Tables {
    /// Adds table `name`.
    pub fn add(&mut self, name: &str, table: kura_table::Table) {
        self.0.push((name.as_bytes().into(), Arc::new(table)));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The table `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<kura_table::Table>> {
        self.0
            .iter()
            .find(|(n, _)| **n == *name.as_bytes())
            .map(|(_, t)| t)
    }

    /// The table named `name`.
    pub fn by_name(&self, name: &[u8]) -> Option<&kura_table::Table> {
        self.0.iter().find(|(n, _)| **n == *name).map(|(_, t)| &**t)
    }

    /// Every table with its name, in the order declared.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &kura_table::Table)> {
        self.0.iter().map(|(n, t)| (&**n, &**t))
    }

    /// The table a key `NAME:REST` belongs to, and `REST`; `None` for an
    /// ordinary key.
    pub fn route<'k>(&self, key: &'k [u8]) -> Option<(&kura_table::Table, &'k [u8])> {
        if self.0.is_empty() {
            return None;
        }
        let colon = key.iter().position(|&b| b == b':')?;
        let (name, rest) = (&key[..colon], &key[colon + 1..]);
        self.0
            .iter()
            .find(|(n, _)| **n == *name)
            .map(|(_, t)| (&**t, rest))
    }
}

/// Whether and how the server is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Running,
    Stopping,
}

/// Shared by every connection of a server.
#[derive(Debug)]
pub struct Shared {
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
    /// The update log and snapshots (`--data-dir`).
    pub durable: Option<Arc<crate::durable::Durable>>,
    /// Fixed-length tables (`--table`).
    pub tables: Tables,
    /// Room for values being received (`budget`).
    pub values: crate::budget::ValueBudget,
    /// The listening sockets, for `stats conns`.
    pub listeners: Vec<crate::metrics::Listener>,
    /// Replication: this server's replicas, or its primary.
    pub replication: crate::replication::ReplicationState,
    /// Invalidation subscriptions (`mt`), observing the store from the
    /// first one on.
    pub tracking: Arc<crate::tracking::Registry>,
    pub tracking_observed: std::sync::Once,
    /// Dumps, watchers, hot keys and the crawler's settings (`inspect/`).
    pub inspect: crate::inspect::Inspection,
    state: watch::Sender<RunState>,
}

impl Shared {
    pub fn new(config: ServerConfig, store: Arc<Store>) -> Shared {
        let (state, _) = watch::channel(RunState::Running);
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
            durable: None,
            tables: Tables::default(),
            values: crate::budget::ValueBudget::for_config(&config),
            listeners: Vec::new(),
            replication: crate::replication::ReplicationState::new(config.replica_of.clone()),
            tracking: Arc::default(),
            tracking_observed: std::sync::Once::new(),
            inspect: Default::default(),
            store,
            config,
            state,
        }
    }

    /// Starts a shutdown: listeners stop, connections finish and close.
    pub fn shutdown(&self) {
        self.state.send_replace(RunState::Stopping);
    }

    /// A receiver that sees the shutdown.
    pub fn watch(&self) -> watch::Receiver<RunState> {
        self.state.subscribe()
    }

    pub fn is_stopping(&self) -> bool {
        *self.state.borrow() == RunState::Stopping
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
