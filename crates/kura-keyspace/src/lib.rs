//! kura-keyspace: the keys a kura server holds, in memory, logged and
//! replicated. One [`Keyspace`] handle holds the store, the fixed-length
//! tables, the durable mode (`durable/`: recovery, the update log, group
//! commit, snapshots) and replication (`replication/`: the backlog, the
//! primary's streams, the replica's thread, role changes). It has no client
//! listeners and speaks no memcached protocol: kura-server, the front end,
//! reads requests, runs them on [`Keyspace::store`] and
//! [`Keyspace::tables`], and before it replies hands the write's [`Ticket`]
//! back ([`Keyspace::settle`], [`Keyspace::replicated`]). Replication's own
//! link to a primary and its stream's wire format live here.

pub mod config;
pub mod durable;
mod reload;
pub mod replication;
mod tables;
mod ticket;

use std::sync::Arc;

use kura_store::Store;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

pub use config::{KeyspaceConfig, Login, ReplicationConfig, TableSpec, TablesConfig};
pub use durable::Durable;
pub use kura_store::Report;
pub use reload::Reloadable;
pub use replication::{ReplicaOfError, ReplicationState};
pub use tables::{TableOpenError, Tables};
pub use ticket::Ticket;

/// Whether the server is running or stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Running,
    Stopping,
}

/// Why a keyspace could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Tables(#[from] TableOpenError),
    /// The data directory could not be recovered (the message names the
    /// file and offset).
    #[error("{0:#}")]
    Durable(anyhow::Error),
}

/// Why a request that changes data is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// This server is a read-only replica of this primary.
    Replica(String),
    /// The update log cannot be written (why, if a write failed).
    LogUnwritable(Option<String>),
}

/// See the crate documentation.
#[derive(Debug)]
pub struct Keyspace {
    pub(crate) store: Arc<Store>,
    pub(crate) tables: Tables,
    pub(crate) durable: Option<Arc<Durable>>,
    pub(crate) replication: ReplicationState,
    pub(crate) config: KeyspaceConfig,
    state: watch::Sender<RunState>,
}

impl Keyspace {
    /// Opens the keyspace on `store`: with a data dir, takes its lock,
    /// opens the tables and recovers the store and the tables (durable/);
    /// without, opens the tables.
    ///
    /// # Errors
    /// A table cannot be opened; the data dir is in use, unreadable or
    /// damaged beyond recovery.
    pub fn open(config: KeyspaceConfig, store: Arc<Store>) -> Result<Arc<Keyspace>, OpenError> {
        let data_dir = config.durable.as_ref().map(|d| d.dir.clone());
        let open_tables = || Tables::open(&config.tables, data_dir.as_deref());
        let (durable, tables) = match &config.durable {
            Some(d) => {
                let (d, tables) =
                    Durable::open(d.clone(), &store, || open_tables().map_err(Into::into))
                        .map_err(OpenError::Durable)?;
                (Some(Arc::new(d)), tables)
            }
            None => (None, open_tables()?),
        };
        let keyspace = Keyspace::assemble(config, store, tables, durable);
        if let Some(d) = &keyspace.durable {
            let weak = Arc::downgrade(&keyspace);
            d.on_failure(move || {
                if let Some(k) = weak.upgrade() {
                    k.shutdown();
                }
            });
        }
        Ok(keyspace)
    }

    /// A keyspace of `store` alone: in memory, no tables, no replica of
    /// anything (a server without `--data-dir`, `--table` or
    /// `--replica-of`).
    pub fn in_memory(store: Arc<Store>) -> Arc<Keyspace> {
        let config = KeyspaceConfig::default();
        Keyspace::assemble(config, store, Tables::default(), None)
    }

    fn assemble(
        config: KeyspaceConfig,
        store: Arc<Store>,
        tables: Tables,
        durable: Option<Arc<Durable>>,
    ) -> Arc<Keyspace> {
        let (state, _) = watch::channel(RunState::Running);
        let keyspace = Arc::new(Keyspace {
            replication: ReplicationState::new(config.replication.replica_of.clone()),
            store,
            tables,
            durable,
            config,
            state,
        });
        keyspace.replication.bind(&keyspace);
        keyspace
    }

    /// The cache.
    #[inline]
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The fixed-length tables (`--table`).
    #[inline]
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The update log and snapshots (`--data-dir`).
    #[inline]
    pub fn durable(&self) -> Option<&Arc<Durable>> {
        self.durable.as_ref()
    }

    /// Replication: this server's replicas, or its primary.
    #[inline]
    pub fn replication(&self) -> &ReplicationState {
        &self.replication
    }

    pub fn config(&self) -> &KeyspaceConfig {
        &self.config
    }

    /// Starts following the primary of `--replica-of`, if any.
    ///
    /// # Errors
    /// The replica's thread cannot be started.
    pub fn start(&self) -> Result<(), ReplicaOfError> {
        match self.config.replication.replica_of.clone() {
            Some(primary) => self.replication.follow(primary),
            None => Ok(()),
        }
    }

    /// Starts a shutdown: streams to replicas end, the replica's thread
    /// stops at its next look.
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

    /// At shutdown, once every connection is closed: stops following and
    /// writes and syncs the rest of the log.
    pub fn close(&self) {
        // The replica's thread may be logging what it applies.
        self.replication.stop_following();
        if let Some(d) = &self.durable {
            d.close();
        }
    }

    /// Whether requests that change data may be refused (a replica, or a
    /// data dir whose log may fail): one branch before [`Keyspace::refusal`].
    #[inline]
    pub fn guarded(&self) -> bool {
        self.durable.is_some() || self.replication.is_replica()
    }

    /// Why a request that changes data is refused now, if it is.
    pub fn refusal(&self) -> Option<Refusal> {
        if self.replication.is_replica() {
            if let Some(p) = self.replication.primary() {
                return Some(Refusal::Replica(p));
            }
        }
        let h = self.durable.as_deref()?.health();
        h.refusing().then(|| Refusal::LogUnwritable(h.reason()))
    }

    /// The last record the writes reported into `report` made since the
    /// last take, if any (ticket.rs).
    #[inline]
    pub fn take_ticket(&self, report: &Report) -> Ticket {
        Ticket::of(report.take_seq())
    }

    /// Said by a connection after a batch of requests, before it writes
    /// their replies or waits for anything: what the batch appended to the
    /// journal (its batched `report` says) goes to the replicas
    /// (replication/primary/direct.rs).
    #[inline]
    pub fn batch_done(&self, report: &Report) {
        replication::primary::batch_done(&self.replication, report);
    }

    /// Before a connection acknowledges writes up to `ticket`: waits until
    /// the log has them as `--fsync` and the log's bounds ask
    /// ([`Durable::settle`]). False if they never will be logged.
    pub async fn settle(&self, ticket: Ticket) -> bool {
        match &self.durable {
            Some(d) if !ticket.is_none() => d.settle(ticket.seq()).await,
            _ => true,
        }
    }

    /// With `--min-replicas-ack`: waits until the write of `ticket` is
    /// settled in the log, sent, and acknowledged by enough replicas, the
    /// timeout at most. False if the log failed or the replicas did not
    /// acknowledge in time.
    pub async fn replicated(&self, ticket: Ticket) -> Replicated {
        if !self.settle(ticket).await {
            return Replicated::LogFailed;
        }
        replication::primary::send_soon(&self.replication);
        let r = &self.config.replication;
        if self
            .replication
            .wait_acks(ticket.seq(), r.min_replicas_ack, r.min_replicas_timeout)
            .await
        {
            Replicated::Acknowledged
        } else {
            Replicated::TimedOut
        }
    }

    /// What logs a change of record `id` of table `name`, under the
    /// record's lock ([`kura_table::Table::edit`]'s hook): the update log
    /// with a data dir, else the journal once a replica connected; the
    /// record's number goes into `report`, as a store write's does.
    pub fn table_logger<'k>(
        &'k self,
        name: &'k [u8],
        id: u64,
        report: &'k Report,
    ) -> impl FnOnce(Option<(&[u8], u32)>) + 'k {
        let durable = self.durable.as_deref();
        let journal = self.replication.journal.get();
        move |new| {
            if let Some(d) = durable {
                report.made(d.log_table(name, id, new));
            } else if let Some(j) = journal {
                j.table(name, id, new, report);
            }
        }
    }

    /// Serves a replica at `peer` that asked (`replicate`) for the records
    /// after `after` of history `history` (`-`: none), on its connection
    /// `stream`, until it goes or the server stops. `direct`: a second
    /// handle on the connection's socket when it is plain TCP, which the
    /// threads that write records then send on (primary/direct.rs).
    pub async fn serve_replica<S>(
        &self,
        stream: &mut S,
        direct: Option<std::net::TcpStream>,
        peer: &str,
        history: &[u8],
        after: u64,
    ) where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        replication::primary::serve(stream, direct, self, peer, history, after).await;
    }
}

/// How a write waiting for its replicas ended ([`Keyspace::replicated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicated {
    Acknowledged,
    TimedOut,
    /// The log failed: the write will never be acknowledged.
    LogFailed,
}
