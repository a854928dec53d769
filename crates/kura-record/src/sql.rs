//! The SQL the cache sends, for MariaDB/MySQL and PostgreSQL through
//! sqlx's `Any` driver: the two differ in placeholders (`?` against `$n`)
//! and in the outbox's DDL, nothing else.

use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::Any;

use crate::table::{IndexValue, Table};

/// Which database the pool talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    MySql,
    Postgres,
}

impl Backend {
    /// The backend of a database URL.
    pub fn from_url(url: &str) -> Option<Backend> {
        let scheme = url.split(':').next()?;
        match scheme {
            "mysql" | "mariadb" => Some(Backend::MySql),
            "postgres" | "postgresql" => Some(Backend::Postgres),
            _ => None,
        }
    }

    /// Placeholders for binds `from..from+n` (0-based), comma-separated:
    /// `?, ?` or `$1, $2`.
    pub fn params(self, from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| match self {
                Backend::MySql => "?".to_string(),
                Backend::Postgres => format!("${}", i + 1),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `DDL` of the outbox table.
    pub(crate) fn outbox_ddl(self, table: &str) -> String {
        let text = match self {
            Backend::MySql => "LONGTEXT",
            Backend::Postgres => "TEXT",
        };
        format!("CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY, cache_keys {text} NOT NULL)")
    }
}

/// `SELECT <columns> FROM t WHERE pk IN (...)`.
pub(crate) fn select_by_ids(b: Backend, t: &Table, n: usize) -> String {
    let cols: Vec<&str> = t.columns.iter().map(|(c, _)| c.as_str()).collect();
    format!(
        "SELECT {} FROM {} WHERE {} IN ({})",
        cols.join(", "),
        t.name,
        t.primary_key,
        b.params(0, n)
    )
}

/// `SELECT pk, <index columns> FROM t WHERE (cols) IN ((...), ...)`.
pub(crate) fn select_ids_by_index(b: Backend, t: &Table, idx: &[String], n: usize) -> String {
    let width = idx.len();
    let tuples: Vec<String> = (0..n)
        .map(|i| {
            let p = b.params(i * width, width);
            if width == 1 {
                p
            } else {
                format!("({p})")
            }
        })
        .collect();
    let lhs = if width == 1 {
        idx[0].clone()
    } else {
        format!("({})", idx.join(", "))
    };
    format!(
        "SELECT {}, {} FROM {} WHERE {lhs} IN ({}) ORDER BY {}",
        t.primary_key,
        idx.join(", "),
        t.name,
        tuples.join(", "),
        t.primary_key
    )
}

/// The index columns' values of some rows, locked for the transaction
/// (`FOR UPDATE`) when `lock`.
pub(crate) fn select_index_values(b: Backend, t: &Table, n: usize, lock: bool) -> String {
    let mut cols = vec![t.primary_key.clone()];
    cols.extend(t.indexed_columns());
    format!(
        "SELECT {} FROM {} WHERE {} IN ({}){}",
        cols.join(", "),
        t.name,
        t.primary_key,
        b.params(0, n),
        if lock { " FOR UPDATE" } else { "" }
    )
}

pub(crate) fn bind_value<'q>(
    q: Query<'q, Any, AnyArguments<'q>>,
    v: &IndexValue,
) -> Query<'q, Any, AnyArguments<'q>> {
    match v {
        IndexValue::Int(i) => q.bind(*i),
        IndexValue::Text(s) => q.bind(s.clone()),
    }
}
