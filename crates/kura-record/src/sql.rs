//! The SQL the cache sends, for MariaDB/MySQL and PostgreSQL: the two
//! differ in placeholders (`?` against `$n`) and in the outbox's DDL.
//! [`translate`] turns the application's `?` into `$n` for PostgreSQL.

use crate::table::{IndexValue, Table};
use crate::value::Value;

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

/// `sql` with its `?` placeholders numbered `$1, $2, ...` for PostgreSQL
/// (unchanged for MariaDB/MySQL). A `?` inside a quoted string, a quoted
/// identifier or a comment is left alone; so is text that has no `?`.
pub fn translate(sql: &str, backend: Backend) -> String {
    if backend == Backend::MySql || !sql.contains('?') {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                // To the closing quote; a doubled quote is an escaped one.
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                out.push(c);
                let mut prev = ' ';
                for d in chars.by_ref() {
                    out.push(d);
                    if prev == '*' && d == '/' {
                        break;
                    }
                    prev = d;
                }
            }
            '?' => {
                n += 1;
                out.push_str(&format!("${n}"));
            }
            _ => out.push(c),
        }
    }
    out
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

/// The bind of an index value.
pub(crate) fn bind_of(v: &IndexValue) -> Value {
    match v {
        IndexValue::Int(i) => Value::Int(*i),
        IndexValue::Text(s) => Value::Text(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_postgres_outside_quotes() {
        let sql = "UPDATE t SET a = ?, b = 'what?' /* ? */ WHERE c = ? -- ?\n AND \"x?\" = ?";
        assert_eq!(
            translate(sql, Backend::Postgres),
            "UPDATE t SET a = $1, b = 'what?' /* ? */ WHERE c = $2 -- ?\n AND \"x?\" = $3"
        );
        assert_eq!(translate(sql, Backend::MySql), sql);
        assert_eq!(translate("SELECT $1", Backend::Postgres), "SELECT $1");
    }
}
