//! The record cache: a database pool, a kura-client cluster, settings and
//! counters, shared by the table handles ([`Cached`]) and transactions.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use kura_client::Client;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, FromRow};

use crate::error::{Error, Result};
use crate::sql::Backend;
use crate::stats::{Counters, Stats};
use crate::table::{prefix, Table};

/// A row type the cache can read from the database and keep in the cache.
/// Derive `serde::Serialize`, `serde::Deserialize` and `sqlx::FromRow`,
/// and say which field is the primary key.
pub trait Record:
    Serialize + DeserializeOwned + for<'r> FromRow<'r, AnyRow> + Send + Sync + Unpin + 'static
{
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
    /// TTL of records and index entries, seconds.
    pub ttl: u32,
    /// TTL of the tombstone an invalidation leaves, seconds. A fill whose
    /// read started more than half of it ago is not written back.
    pub tombstone_ttl: u32,
    /// Bound on each cache operation; past it, reads go to the database.
    pub cache_timeout: Duration,
    /// Bound on each database query.
    pub db_timeout: Duration,
    /// The outbox table's name.
    pub outbox_table: String,
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
            ttl: 2 * 86_400,
            tombstone_ttl: 60,
            cache_timeout: Duration::from_millis(200),
            db_timeout: Duration::from_secs(5),
            outbox_table: "kura_record_outbox".into(),
            fill_lock_ttl: 5,
            fill_lock_wait: Duration::from_millis(500),
            write_back: WriteBack::Batched,
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
    pub(crate) pool: AnyPool,
    pub(crate) backend: Backend,
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
    /// `postgres://`), creates the outbox table if needed and drains it:
    /// invalidations a crashed process left undone are done now.
    ///
    /// # Errors
    /// [`Error::Url`], or the database's error.
    pub async fn connect(url: &str, client: Client, cfg: Config) -> Result<RecordCache> {
        let backend = Backend::from_url(url).ok_or_else(|| Error::Url(url.to_string()))?;
        sqlx::any::install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(cfg.db_timeout)
            .connect(url)
            .await
            .map_err(Error::db("connect"))?;
        let cache = RecordCache::new(pool, backend, client, cfg);
        cache.start().await?;
        Ok(cache)
    }

    /// A cache over an existing pool. Call [`RecordCache::start`] before
    /// writing (it creates the outbox table and drains it).
    pub fn new(pool: AnyPool, backend: Backend, client: Client, cfg: Config) -> RecordCache {
        RecordCache::with_hooks(pool, backend, client, cfg, Hooks::default())
    }

    /// As [`RecordCache::new`], with [`Hooks`] (for crash and race tests).
    pub fn with_hooks(
        pool: AnyPool,
        backend: Backend,
        client: Client,
        cfg: Config,
        hooks: Hooks,
    ) -> RecordCache {
        RecordCache {
            inner: Arc::new(Inner {
                pool,
                backend,
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
        let ddl = self.inner.backend.outbox_ddl(&self.inner.cfg.outbox_table);
        sqlx::query(&ddl)
            .execute(&self.inner.pool)
            .await
            .map_err(Error::db("create the outbox"))?;
        self.drain_outbox().await
    }

    /// A handle on a declared table whose rows are `T`.
    ///
    /// # Errors
    /// [`Error::Declaration`] when the declaration is unusable.
    pub fn table<T: Record>(&self, table: Table) -> Result<Cached<T>> {
        table.check()?;
        let prefix = prefix(&self.inner.cfg.namespace, &table);
        Ok(Cached {
            cache: self.clone(),
            info: Arc::new(TableInfo { table, prefix }),
            _rows: PhantomData,
        })
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.inner.stats.snapshot()
    }

    /// The database pool.
    pub fn pool(&self) -> &AnyPool {
        &self.inner.pool
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
        self.inner.backend
    }
}

pub(crate) struct TableInfo {
    pub(crate) table: Table,
    pub(crate) prefix: String,
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
