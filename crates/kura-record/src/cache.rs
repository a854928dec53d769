//! The record cache: a database pool, a kura-client cluster, settings and
//! counters, shared by the table handles ([`Cached`]) and transactions.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use kura_client::Client;
use serde::de::DeserializeOwned;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::sql::Backend;
use crate::stats::{Counters, Stats};
use crate::table::{prefix, Table};

/// A row type the cache reads from the database and from the cache: a
/// `serde::Deserialize` type whose fields are the declared columns, by
/// name (docs/record.md lists the Rust types each SQL type fills). The
/// cache keeps the row's values, not the type, so `Serialize` is not
/// needed; deriving `sqlx::FromRow` is not needed either.
pub trait Record: DeserializeOwned + Send + Sync + Unpin + 'static {
    /// The row's primary key.
    fn id(&self) -> i64;
}

/// How misses are written back to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteBack {
    /// One quiet multi-add (and multi-CAS) per server: the default.
    Batched,
    /// One awaited `add`/`cas` per key, as identity_cache and
    /// second_level_cache do; for comparison only.
    PerKey,
}

/// The cache's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Put in every key, before the table's name and schema digest.
    pub namespace: String,
    /// Folded into every key's schema digest. None (the default): the kind
    /// and name of the database (`mysql:app`), so that two databases with
    /// one schema (shards, a staging copy) never share entries in one
    /// cache. The host is not in it: databases of one name on two hosts
    /// share unless given scopes of their own. Set one scope on two
    /// databases to make them share.
    pub scope: Option<String>,
    /// TTL of records and index entries, seconds (a table may set its own:
    /// [`Table::ttl`]).
    pub ttl: u32,
    /// Whether an id with no row is cached as absent (an empty record,
    /// filled and expired as records are), as identity_cache caches "not
    /// found": a fetch of a missing id then costs no query after the first.
    pub cache_absence: bool,
    /// TTL of the tombstone an invalidation leaves, seconds. A fill whose
    /// read started more than half of it ago is not written back.
    pub tombstone_ttl: u32,
    /// Bound on each cache operation; past it, reads go to the database.
    pub cache_timeout: Duration,
    /// Bound on each database query.
    pub db_timeout: Duration,
    /// The database pool's size and timeouts (used by `connect`).
    pub pool: PoolConfig,
    /// The outbox table's name.
    pub outbox_table: String,
    /// The drainer ([`RecordCache::spawn_drainer`]) leaves outbox rows
    /// younger than this to the commits that wrote them (they tombstone
    /// their keys and delete their rows themselves). Longer than a commit's
    /// own invalidation takes (`cache_timeout`), plus the clock skew
    /// between the application's hosts.
    pub outbox_grace: Duration,
    /// Lifetime of a fill lock, seconds.
    pub fill_lock_ttl: u32,
    /// How long a reader waits for another reader's fill.
    pub fill_lock_wait: Duration,
    /// Batched (default) or one write per key.
    pub write_back: WriteBack,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            namespace: "kr".into(),
            scope: None,
            ttl: 2 * 86_400,
            cache_absence: true,
            tombstone_ttl: 60,
            cache_timeout: Duration::from_millis(200),
            db_timeout: Duration::from_secs(5),
            pool: PoolConfig::default(),
            outbox_table: "kura_record_outbox".into(),
            outbox_grace: Duration::from_secs(5),
            fill_lock_ttl: 5,
            fill_lock_wait: Duration::from_millis(500),
            write_back: WriteBack::Batched,
        }
    }
}

/// The database pool's settings (sqlx's pool options).
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Most connections open at once.
    pub max_connections: u32,
    /// Connections kept open when idle.
    pub min_connections: u32,
    /// How long a query waits for a free connection (and for a new one
    /// to connect) before failing with [`Error::Database`].
    pub acquire_timeout: Duration,
    /// An idle connection is closed after this long.
    pub idle_timeout: Option<Duration>,
    /// A connection is replaced after this long.
    pub max_lifetime: Option<Duration>,
}

impl Default for PoolConfig {
    fn default() -> PoolConfig {
        PoolConfig {
            max_connections: 16,
            min_connections: 0,
            acquire_timeout: Duration::from_secs(5),
            idle_timeout: Some(Duration::from_secs(600)),
            max_lifetime: Some(Duration::from_secs(1800)),
        }
    }
}

/// Points where tests stop or pause the cache: the crash test kills the
/// process in `after_commit`, the race tests hold a reader in
/// `before_write_back` while a writer commits.
#[derive(Clone, Default)]
pub struct Hooks {
    /// Runs after the database committed, before the cache is told.
    pub after_commit: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Awaited by a read after its database query, before its write-back.
    pub before_write_back: Option<Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>>,
}

pub(crate) struct Inner {
    pub(crate) db: Db,
    pub(crate) client: Client,
    pub(crate) cfg: Config,
    pub(crate) stats: Counters,
    pub(crate) hooks: Hooks,
}

/// The record cache. Cheap to clone.
#[derive(Clone)]
pub struct RecordCache {
    pub(crate) inner: Arc<Inner>,
}

impl RecordCache {
    /// Connects to the database at `url` (`mysql://`, `mariadb://` or
    /// `postgres://`) with `cfg.pool`'s size and timeouts, creates the
    /// outbox table if needed and drains it: invalidations a crashed
    /// process left undone are done now.
    ///
    /// # Errors
    /// [`Error::Url`], or the database's error.
    pub async fn connect(url: &str, client: Client, cfg: Config) -> Result<RecordCache> {
        let db = Db::connect(url, &cfg).await?;
        let cache = RecordCache::new(db, client, cfg);
        cache.start().await?;
        Ok(cache)
    }

    /// A cache over an existing pool. Call [`RecordCache::start`] before
    /// writing (it creates the outbox table and drains it).
    pub fn new(db: Db, client: Client, cfg: Config) -> RecordCache {
        RecordCache::with_hooks(db, client, cfg, Hooks::default())
    }

    /// As [`RecordCache::new`], with [`Hooks`] (for crash and race tests).
    pub fn with_hooks(db: Db, client: Client, mut cfg: Config, hooks: Hooks) -> RecordCache {
        if cfg.scope.is_none() {
            // Not the host: application servers that reach one database by
            // different names must share its entries.
            cfg.scope = Some(match &db {
                Db::MySql(p) => {
                    format!("mysql:{}", p.connect_options().get_database().unwrap_or(""))
                }
                Db::Postgres(p) => {
                    format!(
                        "postgres:{}",
                        p.connect_options().get_database().unwrap_or("")
                    )
                }
            });
        }
        RecordCache {
            inner: Arc::new(Inner {
                db,
                client,
                cfg,
                stats: Counters::default(),
                hooks,
            }),
        }
    }

    /// Creates the outbox table if needed and drains it. Returns how many
    /// outbox rows were drained.
    ///
    /// # Errors
    /// The database's error.
    pub async fn start(&self) -> Result<usize> {
        let ddl = self.backend().outbox_ddl(&self.inner.cfg.outbox_table);
        self.inner
            .db
            .execute(&ddl, &[])
            .await
            .map_err(Error::db("create the outbox"))?;
        self.drain_outbox().await
    }

    /// A handle on a declared table whose rows are `T`. The declared
    /// columns are checked against the database: a column kura-record
    /// cannot represent, a missing column, or an indexed column that is
    /// not an integer (`Kind::Int`) or text (`Kind::Text`) is refused here,
    /// with its name and SQL type.
    ///
    /// # Errors
    /// [`Error::Declaration`] when the declaration is unusable, or the
    /// database's error.
    pub async fn table<T: Record>(&self, table: Table) -> Result<Cached<T>> {
        table.check()?;
        let text = format!(
            "SELECT {} FROM {} WHERE 1 = 0",
            table
                .columns
                .iter()
                .map(|(c, _)| c.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            table.name
        );
        let after = self.inner.cfg.db_timeout;
        match tokio::time::timeout(after, self.inner.db.describe(&text)).await {
            Ok(Ok(described)) => table.check_types(&described)?,
            Ok(Err(sqlx::Error::Database(e))) => {
                return Err(Error::Declaration(format!("table {}: {e}", table.name)))
            }
            // The database is unreachable: the table is declared unchecked,
            // so that what is cached is still served (a column that cannot be
            // represented is then refused at its first read, as
            // Error::Decode with its name and type).
            Ok(Err(e)) => {
                tracing::warn!(table = %table.name, %e, "declared without checking the columns' types");
            }
            Err(_) => {
                tracing::warn!(table = %table.name, ?after, "declared without checking the columns' types");
            }
        }
        let scope = self.inner.cfg.scope.as_deref().unwrap_or("");
        let prefix = prefix(&self.inner.cfg.namespace, scope, &table);
        Ok(Cached {
            cache: self.clone(),
            info: Arc::new(TableInfo {
                names: table.columns.iter().map(|(c, _)| c.clone()).collect(),
                ttl: table.ttl.unwrap_or(self.inner.cfg.ttl),
                table,
                prefix,
            }),
            _rows: PhantomData,
        })
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.inner.stats.snapshot()
    }

    /// The database pool.
    pub fn db(&self) -> &Db {
        &self.inner.db
    }

    /// The cache client.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    /// The database's kind.
    pub fn backend(&self) -> Backend {
        self.inner.db.backend()
    }
}

pub(crate) struct TableInfo {
    pub(crate) table: Table,
    pub(crate) prefix: String,
    /// The declared columns' names, in order (the row's layout).
    pub(crate) names: Vec<String>,
    /// The TTL of the table's records and index entries.
    pub(crate) ttl: u32,
}

/// A cached table whose rows are `T`: the reads live in `fetch.rs` and
/// `index.rs`.
pub struct Cached<T> {
    pub(crate) cache: RecordCache,
    pub(crate) info: Arc<TableInfo>,
    _rows: PhantomData<fn() -> T>,
}

impl<T> Clone for Cached<T> {
    fn clone(&self) -> Cached<T> {
        Cached {
            cache: self.cache.clone(),
            info: self.info.clone(),
            _rows: PhantomData,
        }
    }
}

impl<T> Cached<T> {
    /// The key of record `id` (for tests and tools).
    pub fn record_key(&self, id: i64) -> String {
        crate::table::record_key(&self.info.prefix, id)
    }

    /// The key of an index entry.
    ///
    /// # Errors
    /// As [`Cached::fetch_by_index`].
    pub fn index_key(&self, columns: &[&str], values: &[crate::IndexValue]) -> Result<String> {
        let i = self.info.table.index_of(columns)?;
        crate::table::index_key(&self.info.prefix, i, values)
    }

    /// The table's declaration.
    pub fn table(&self) -> &Table {
        &self.info.table
    }
}
