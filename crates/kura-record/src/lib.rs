//! kura-record: a record cache over MariaDB/MySQL and PostgreSQL (sqlx)
//! and a memcached cluster (kura-client, kura or memcached servers).
//!
//! - Declare a cached table ([`Table`]: primary key, columns, cached
//!   indexes) and read it through [`Cached::fetch`],
//!   [`Cached::fetch_multi`], [`Cached::fetch_by_index`] and
//!   [`Cached::fetch_multi_by_index`]. An index entry is the list of
//!   primary keys under one index value; records come from one multi-get,
//!   the misses from one `WHERE pk IN (...)` query, written back with one
//!   quiet multi-add per server.
//! - Keys carry the namespace and a digest of the declared schema; values
//!   are postcard (docs/record.md has the measurements).
//! - Writes go through [`RecordTx`] ([`RecordCache::begin`],
//!   [`RecordCache::transaction`]): the affected records and index entries,
//!   old and new values, are written to an outbox table in the same
//!   transaction and tombstoned after the commit; start-up drains what a
//!   crash left.
//! - Fills are race-safe: ADD where the key was absent, CAS over the
//!   tombstone read otherwise. [`Cached::fetch_locked`] adds a fill lock.
//! - A down or slow cache sends reads to the database and lets writes
//!   commit; a down database still serves cached records, and misses get
//!   [`Error::Database`]. [`RecordCache::stats`] counts both.
//!
//! docs/record.md is the guide; its example runs as a doc test.

mod assoc;
mod cache;
mod db;
mod de;
mod error;
mod expire;
mod fetch;
mod fill;
mod index;
mod json;
mod lock;
mod outbox;
mod sql;
mod stats;
mod table;
mod tx;
mod value;

pub use assoc::HasMany;
pub use cache::{Cached, Config, Hooks, PoolConfig, Record, RecordCache, WriteBack};
pub use db::{Conn, Db};
pub use error::{Error, Result};
pub use json::Json;
pub use sql::{translate, Backend};
pub use value::Value;

/// Builds a record from a row of values, by column name, as the cache
/// builds every record it reads (for tools and benchmarks).
///
/// # Errors
/// [`Error::Decode`] naming the column that did not fit.
pub fn record_from_row<T: serde::de::DeserializeOwned>(names: &[&str], row: &[Value]) -> Result<T> {
    de::from_row(names, row).map_err(|e| Error::decode("a row", e))
}

pub use stats::Stats;
pub use table::{IndexValue, Kind, Table};
pub use tx::{Committed, RecordTx, TxFuture};
/// The crates whose types the API takes, at the versions it was built
/// with: the database drivers (sqlx), the cache client (kura-client), and
/// the date and time types of [`Value`] (chrono) and its UUIDs (uuid).
pub use {chrono, kura_client, sqlx, uuid};

/// The guide (docs/record.md); its example runs as a doc test against
/// MariaDB (`$KURA_RECORD_MYSQL`) and a kura server in the process.
#[doc = include_str!("../../../docs/record.md")]
pub mod guide {}
