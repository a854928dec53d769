//! The database: MariaDB/MySQL or PostgreSQL through sqlx's own drivers
//! (not `Any`, which cannot read dates, decimals or MariaDB's booleans and
//! text), a pool of either, transactions of either, and rows read as
//! [`Value`]s by the class of each column's SQL type.
//!
//! The application's own SQL goes through [`Db::execute`],
//! [`Db::fetch_as`] and [`crate::RecordTx::execute`] with `?`
//! placeholders on both databases (rewritten to `$1, $2, ...` for
//! PostgreSQL), or straight to the driver's pool or connection
//! ([`Db::mysql`], [`Db::postgres`], [`crate::RecordTx::conn`]).

mod mysql;
pub(crate) mod numeric;
mod postgres;

use serde::de::DeserializeOwned;
use sqlx::mysql::{MySqlPoolOptions, MySqlRow};
use sqlx::postgres::{PgPoolOptions, PgRow};
use sqlx::{
    Column, Executor, MySql, MySqlConnection, MySqlPool, PgConnection, PgPool, Postgres, Row,
    Statement, Transaction, TypeInfo,
};

use crate::cache::Config;
use crate::error::{Error, Result};
use crate::sql::{translate, Backend};
use crate::value::{Class, Value};

/// A pool on MariaDB/MySQL or on PostgreSQL. Cheap to clone.
#[derive(Clone, Debug)]
pub enum Db {
    MySql(MySqlPool),
    Postgres(PgPool),
}

/// A transaction on either database.
pub(crate) enum DbTx {
    MySql(Transaction<'static, MySql>),
    Postgres(Transaction<'static, Postgres>),
}

/// A transaction's connection, for statements the crate has no method for.
pub enum Conn<'a> {
    MySql(&'a mut MySqlConnection),
    Postgres(&'a mut PgConnection),
}

/// Rows as the driver gave them.
pub(crate) enum Rows {
    MySql(Vec<MySqlRow>),
    Postgres(Vec<PgRow>),
}

/// A column of a statement's result: its name, the database's name for
/// its type, and how kura-record reads it (None: it cannot).
#[derive(Debug, Clone)]
pub(crate) struct Described {
    pub(crate) name: String,
    pub(crate) sql_type: String,
    pub(crate) class: Option<Class>,
}

impl Db {
    /// Connects a pool to `url` (`mysql://`, `mariadb://`, `postgres://`)
    /// with `cfg`'s pool size and timeouts.
    ///
    /// # Errors
    /// [`Error::Url`] or the database's error.
    pub async fn connect(url: &str, cfg: &Config) -> Result<Db> {
        let backend = Backend::from_url(url).ok_or_else(|| Error::Url(url.to_string()))?;
        let p = &cfg.pool;
        Ok(match backend {
            Backend::MySql => {
                // sqlx's MySQL driver does not know the mariadb:// scheme.
                let url = url.replacen("mariadb://", "mysql://", 1);
                Db::MySql(
                    MySqlPoolOptions::new()
                        .max_connections(p.max_connections)
                        .min_connections(p.min_connections)
                        .acquire_timeout(p.acquire_timeout)
                        .idle_timeout(p.idle_timeout)
                        .max_lifetime(p.max_lifetime)
                        .connect(&url)
                        .await
                        .map_err(Error::db("connect"))?,
                )
            }
            Backend::Postgres => Db::Postgres(
                PgPoolOptions::new()
                    .max_connections(p.max_connections)
                    .min_connections(p.min_connections)
                    .acquire_timeout(p.acquire_timeout)
                    .idle_timeout(p.idle_timeout)
                    .max_lifetime(p.max_lifetime)
                    .connect(url)
                    .await
                    .map_err(Error::db("connect"))?,
            ),
        })
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        match self {
            Db::MySql(_) => Backend::MySql,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// The MariaDB/MySQL pool, if it is one.
    pub fn mysql(&self) -> Option<&MySqlPool> {
        match self {
            Db::MySql(p) => Some(p),
            Db::Postgres(_) => None,
        }
    }

    /// The PostgreSQL pool, if it is one.
    pub fn postgres(&self) -> Option<&PgPool> {
        match self {
            Db::Postgres(p) => Some(p),
            Db::MySql(_) => None,
        }
    }

    /// Runs a statement with `?` placeholders (on PostgreSQL too) bound to
    /// `args`; returns the rows it affected.
    ///
    /// # Errors
    /// The database's error.
    pub async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64, sqlx::Error> {
        let sql = translate(sql, self.backend());
        match self {
            Db::MySql(p) => mysql::execute(p, &sql, args).await,
            Db::Postgres(p) => postgres::execute(p, &sql, args).await,
        }
    }

    /// Runs a query with `?` placeholders and builds a `T` from each row
    /// by column name, as cached records are built (docs/record.md has
    /// the types each SQL type fills). Not cached.
    ///
    /// # Errors
    /// [`Error::Database`], or [`Error::Decode`] when a row does not fit `T`.
    pub async fn fetch_as<T: DeserializeOwned>(&self, sql: &str, args: &[Value]) -> Result<Vec<T>> {
        let sql = translate(sql, self.backend());
        let rows = self.rows(&sql, args).await.map_err(Error::db("query"))?;
        let names = rows.names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let values = rows.values().map_err(|e| Error::decode("query", e))?;
        values
            .iter()
            .map(|v| crate::de::from_row(&names, v).map_err(|e| Error::decode("query", e)))
            .collect()
    }

    /// Begins a transaction.
    pub(crate) async fn begin(&self) -> Result<DbTx, sqlx::Error> {
        Ok(match self {
            Db::MySql(p) => DbTx::MySql(p.begin().await?),
            Db::Postgres(p) => DbTx::Postgres(p.begin().await?),
        })
    }

    /// Runs a query of the crate's (placeholders already the backend's).
    pub(crate) async fn rows(&self, sql: &str, args: &[Value]) -> Result<Rows, sqlx::Error> {
        Ok(match self {
            Db::MySql(p) => Rows::MySql(mysql::fetch(p, sql, args).await?),
            Db::Postgres(p) => Rows::Postgres(postgres::fetch(p, sql, args).await?),
        })
    }

    /// The columns `sql` would return, without running it.
    pub(crate) async fn describe(&self, sql: &str) -> Result<Vec<Described>, sqlx::Error> {
        Ok(match self {
            Db::MySql(p) => {
                let st = p.prepare(sql).await?;
                st.columns()
                    .iter()
                    .map(|c| {
                        let t = c.type_info().name().to_string();
                        Described {
                            name: c.name().to_string(),
                            class: Class::of_mysql(&t),
                            sql_type: t,
                        }
                    })
                    .collect()
            }
            Db::Postgres(p) => {
                let st = p.prepare(sql).await?;
                st.columns()
                    .iter()
                    .map(|c| {
                        let ti = c.type_info();
                        let t = ti.name().to_string();
                        Described {
                            name: c.name().to_string(),
                            class: postgres::class(ti),
                            sql_type: t,
                        }
                    })
                    .collect()
            }
        })
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match self {
            Db::MySql(p) => p.close().await,
            Db::Postgres(p) => p.close().await,
        }
    }
}

impl DbTx {
    pub(crate) async fn rows(&mut self, sql: &str, args: &[Value]) -> Result<Rows, sqlx::Error> {
        Ok(match self {
            DbTx::MySql(t) => Rows::MySql(mysql::fetch(&mut **t, sql, args).await?),
            DbTx::Postgres(t) => Rows::Postgres(postgres::fetch(&mut **t, sql, args).await?),
        })
    }

    pub(crate) async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, sqlx::Error> {
        match self {
            DbTx::MySql(t) => mysql::execute(&mut **t, sql, args).await,
            DbTx::Postgres(t) => postgres::execute(&mut **t, sql, args).await,
        }
    }

    pub(crate) fn conn(&mut self) -> Conn<'_> {
        match self {
            DbTx::MySql(t) => Conn::MySql(t),
            DbTx::Postgres(t) => Conn::Postgres(t),
        }
    }

    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            DbTx::MySql(t) => t.commit().await,
            DbTx::Postgres(t) => t.commit().await,
        }
    }

    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            DbTx::MySql(t) => t.rollback().await,
            DbTx::Postgres(t) => t.rollback().await,
        }
    }
}

impl Rows {
    pub(crate) fn len(&self) -> usize {
        match self {
            Rows::MySql(r) => r.len(),
            Rows::Postgres(r) => r.len(),
        }
    }

    /// The columns' names (empty when there are no rows).
    pub(crate) fn names(&self) -> Vec<String> {
        fn of<R: Row>(rows: &[R]) -> Vec<String> {
            rows.first()
                .map(|r| r.columns().iter().map(|c| c.name().to_string()).collect())
                .unwrap_or_default()
        }
        match self {
            Rows::MySql(r) => of(r),
            Rows::Postgres(r) => of(r),
        }
    }

    /// Every row's values, each column read by the class of its type.
    ///
    /// # Errors
    /// A column of a type kura-record cannot read, or a value its type
    /// cannot hold (MariaDB's zero dates, a `TIME` past 24 hours), named.
    pub(crate) fn values(&self) -> Result<Vec<Vec<Value>>, String> {
        match self {
            Rows::MySql(rows) => {
                let Some(first) = rows.first() else {
                    return Ok(Vec::new());
                };
                let classes = classes(first.columns(), |c| Class::of_mysql(c.type_info().name()))?;
                rows.iter().map(|r| mysql::values(r, &classes)).collect()
            }
            Rows::Postgres(rows) => {
                let Some(first) = rows.first() else {
                    return Ok(Vec::new());
                };
                let classes = classes(first.columns(), |c| postgres::class(c.type_info()))?;
                rows.iter().map(|r| postgres::values(r, &classes)).collect()
            }
        }
    }
}

fn classes<C: Column>(
    cols: &[C],
    class: impl Fn(&C) -> Option<Class>,
) -> Result<Vec<Class>, String> {
    cols.iter()
        .map(|c| {
            class(c).ok_or_else(|| {
                format!(
                    "column {} is of type {}, which kura-record cannot represent",
                    c.name(),
                    c.type_info().name()
                )
            })
        })
        .collect()
}

/// A column's value could not be read: its name and why.
pub(crate) fn column_error<R: Row>(row: &R, i: usize, e: impl std::fmt::Display) -> String {
    let (name, ty) = row
        .columns()
        .get(i)
        .map(|c| (c.name().to_string(), c.type_info().name().to_string()))
        .unwrap_or_default();
    format!("column {name} ({ty}): {e}")
}
