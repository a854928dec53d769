//! What the record tests share: the cache servers (kura servers of this
//! workspace and Debian's memcached, from kura-testkit), the
//! two databases (MariaDB and PostgreSQL on loopback, `$KURA_RECORD_MYSQL`
//! and `$KURA_RECORD_POSTGRES`; skipped with a message when unreachable, a
//! failure under CI), and a table of items under a name of its own per
//! test, so tests and parallel runs never share one.
#![allow(dead_code)]

/// Two tests of one scenario, on MariaDB and on PostgreSQL:
/// `per_database!(scenario(args) => mysql_name, postgres_name);` calls
/// `scenario(url, args)`.
#[macro_export]
macro_rules! per_database {
    ($f:ident($($arg:expr),*) => $my:ident, $pg:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $my() {
            $f(&support::mysql_url() $(, $arg)*).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $pg() {
            $f(&support::postgres_url() $(, $arg)*).await;
        }
    };
}

/// The cache servers (kura-testkit's).
#[allow(unused_imports)] // each test file uses its own part
pub mod servers {
    pub use kura_testkit::fake::silent_server;
    pub use kura_testkit::servers::{kura_on, memcached_on, servers};
    pub use kura_testkit::{addrs, free_port, Proc};
}

/// `sqlx::FromRow` for a struct read by one driver's rows, each field from the
/// column of its name (what sqlx's derive does; the derive would build sqlx's
/// macros and a second copy of both drivers for the host, for four test structs).
#[macro_export]
macro_rules! from_row {
    ($row:ty => $name:ident { $($field:ident),* $(,)? }) => {
        impl<'r> sqlx::FromRow<'r, $row> for $name {
            fn from_row(row: &'r $row) -> Result<Self, sqlx::Error> {
                use sqlx::Row;
                Ok($name {
                    $($field: row.try_get(stringify!($field))?,)*
                })
            }
        }
    };
}

pub mod gate;
pub mod rows;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kura_client::Client;
use kura_record::{Backend, Cached, Config, Db, Hooks, Kind, Record, RecordCache, Table};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyPoolOptions;
use sqlx::AnyPool;

/// A row of the items table: seed 000's user items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub id: i64,
    pub user_id: i64,
    pub kind: i64,
    pub count: i64,
    pub name: String,
}

from_row!(sqlx::any::AnyRow => Item { id, user_id, kind, count, name });

impl Record for Item {
    fn id(&self) -> i64 {
        self.id
    }
}

pub fn mysql_url() -> String {
    std::env::var("KURA_RECORD_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
}

pub fn postgres_url() -> String {
    std::env::var("KURA_RECORD_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn required() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
        || std::env::var("KURA_REQUIRE_DATABASES").as_deref() == Ok("1")
}

/// A pool on `url`, or None (after saying why) when the database cannot
/// be reached and CI does not require it.
pub async fn pool(url: &str) -> Option<AnyPool> {
    sqlx::any::install_default_drivers();
    match AnyPoolOptions::new()
        .max_connections(40)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await
    {
        Ok(p) => Some(p),
        Err(e) => {
            assert!(!required(), "database {url} unreachable and required: {e}");
            println!("skipped: database {url} unreachable: {e}");
            None
        }
    }
}

/// Both databases' URLs.
pub fn databases() -> [String; 2] {
    [mysql_url(), postgres_url()]
}

/// A name no other test or run uses.
pub fn unique(what: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let r: u32 = rand::random::<u32>() % 1_000_000;
    format!(
        "kr_{what}_{}_{}_{r}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The items table's declaration (indexes on user_id, on (user_id, kind)
/// and on name).
pub fn items_table(name: &str) -> Table {
    Table::new(name, "id")
        .column("user_id", Kind::Int)
        .column("kind", Kind::Int)
        .column("count", Kind::Int)
        .column("name", Kind::Text)
        .index(&["user_id"])
        .index(&["user_id", "kind"])
        .index(&["name"])
}

/// Creates the items table `name` with `rows`.
pub async fn create_items(pool: &AnyPool, name: &str, rows: &[Item]) {
    sqlx::query(&format!(
        "CREATE TABLE {name} (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, kind BIGINT NOT NULL, \
         count BIGINT NOT NULL, name VARCHAR(100) NOT NULL)"
    ))
    .execute(pool)
    .await
    .expect("create table");
    sqlx::query(&format!("CREATE INDEX {name}_u ON {name} (user_id)"))
        .execute(pool)
        .await
        .expect("create index");
    insert_items(pool, name, rows).await;
}

pub async fn insert_items(pool: &AnyPool, name: &str, rows: &[Item]) {
    let backend = backend_of(pool);
    for part in rows.chunks(500) {
        let tuples: Vec<String> = (0..part.len())
            .map(|i| format!("({})", backend.params(i * 5, 5)))
            .collect();
        let text = format!(
            "INSERT INTO {name} (id, user_id, kind, count, name) VALUES {}",
            tuples.join(", ")
        );
        let mut q = sqlx::query(&text);
        for r in part {
            q = q
                .bind(r.id)
                .bind(r.user_id)
                .bind(r.kind)
                .bind(r.count)
                .bind(r.name.clone());
        }
        q.execute(pool).await.expect("insert items");
    }
}

pub fn backend_of(pool: &AnyPool) -> Backend {
    let url = pool.connect_options().database_url.to_string();
    Backend::from_url(&url).expect("a known database")
}

pub async fn drop_table(pool: &AnyPool, name: &str) {
    let _ = sqlx::query(&format!("DROP TABLE IF EXISTS {name}"))
        .execute(pool)
        .await;
}

/// All rows of the items table, by id.
pub async fn db_items(pool: &AnyPool, name: &str) -> Vec<Item> {
    sqlx::query_as::<_, Item>(&format!(
        "SELECT id, user_id, kind, count, name FROM {name} ORDER BY id"
    ))
    .fetch_all(pool)
    .await
    .expect("read items")
}

pub fn item(id: i64, user_id: i64) -> Item {
    Item {
        id,
        user_id,
        kind: id % 7,
        count: id * 10,
        name: format!("item-{id}"),
    }
}

/// A client of `addrs` (meta protocol; timeouts short enough for the
/// silent-cache tests, long enough that a live server on a loaded machine
/// is never taken for a silent one, which would add database queries to
/// tests that count them).
pub fn client(addrs: &[String]) -> Client {
    Client::builder(addrs)
        .timeouts(Duration::from_secs(1), Duration::from_secs(2))
        .build()
        .expect("client")
}

/// A record cache over `pool` with its own outbox table.
pub async fn cache(pool: &AnyPool, addrs: &[String], hooks: Hooks) -> RecordCache {
    let cfg = Config {
        outbox_table: unique("outbox"),
        ..Config::default()
    };
    cache_with(pool, addrs, cfg, hooks).await
}

pub async fn cache_with(
    pool: &AnyPool,
    addrs: &[String],
    cfg: Config,
    hooks: Hooks,
) -> RecordCache {
    let c = RecordCache::with_hooks(db_of(pool, &cfg).await, client(addrs), cfg, hooks);
    c.start().await.expect("start the record cache");
    c
}

/// The record cache's own pool on the database of `pool` (the tests set
/// up their tables through sqlx's `Any` pool; the cache uses the drivers).
pub async fn db_of(pool: &AnyPool, cfg: &Config) -> Db {
    let url = pool.connect_options().database_url.to_string();
    let mut cfg = cfg.clone();
    cfg.pool.max_connections = 40;
    cfg.pool.acquire_timeout = Duration::from_secs(10);
    Db::connect(&url, &cfg).await.expect("the cache's pool")
}

pub async fn drop_outbox(c: &RecordCache) {
    let name = outbox_name(c);
    let _ = c
        .db()
        .execute(&format!("DROP TABLE IF EXISTS {name}"), &[])
        .await;
}

pub fn outbox_name(c: &RecordCache) -> String {
    c.config().outbox_table.clone()
}

/// Everything a test sets up, dropped at its end.
pub struct Setup {
    pub pool: AnyPool,
    pub table: String,
    pub cache: RecordCache,
    pub items: Cached<Item>,
}

impl Setup {
    pub async fn new(url: &str, addrs: &[String], rows: &[Item], hooks: Hooks) -> Option<Setup> {
        let pool = pool(url).await?;
        let table = unique("items");
        create_items(&pool, &table, rows).await;
        let cache = cache(&pool, addrs, hooks).await;
        let items = cache
            .table::<Item>(items_table(&table))
            .await
            .expect("declaration");
        Some(Setup {
            pool,
            table,
            cache,
            items,
        })
    }

    pub async fn teardown(self) {
        drop_table(&self.pool, &self.table).await;
        drop_outbox(&self.cache).await;
    }
}
