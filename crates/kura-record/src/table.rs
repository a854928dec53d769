//! A cached table's declaration: its name, primary key, columns and cached
//! indexes, and the keys made from it. Every key carries the namespace and
//! a digest of the declared schema, so changing a column (adding one,
//! renaming one, changing its kind) moves every key of the table and the
//! old entries are never read again.

use std::fmt::Write as _;

use crate::db::Described;
use crate::error::{Error, Result};
use crate::value::Class;

/// The kind of a column's values, part of the schema digest and how an
/// indexed column's values are read and bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer column (read as `i64`).
    Int,
    /// A text column.
    Text,
    /// Anything else kura-record can represent (docs/record.md lists the
    /// types): cached, but not usable in a cached index.
    Other,
}

/// A value of an indexed column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IndexValue {
    Int(i64),
    Text(String),
}

impl From<i64> for IndexValue {
    fn from(v: i64) -> IndexValue {
        IndexValue::Int(v)
    }
}

impl From<&str> for IndexValue {
    fn from(v: &str) -> IndexValue {
        IndexValue::Text(v.to_string())
    }
}

impl From<String> for IndexValue {
    fn from(v: String) -> IndexValue {
        IndexValue::Text(v)
    }
}

/// A cached table, declared by the application.
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) name: String,
    pub(crate) primary_key: String,
    pub(crate) columns: Vec<(String, Kind)>,
    pub(crate) indexes: Vec<Vec<String>>,
    /// Whether each index is unique (one row per value).
    pub(crate) unique: Vec<bool>,
    /// The table's own TTL, seconds.
    pub(crate) ttl: Option<u32>,
}

impl Table {
    /// A table whose integer primary key is `primary_key`; the key column
    /// is also the first column of every record.
    pub fn new(name: &str, primary_key: &str) -> Table {
        Table {
            name: name.to_string(),
            primary_key: primary_key.to_string(),
            columns: vec![(primary_key.to_string(), Kind::Int)],
            indexes: Vec::new(),
            unique: Vec::new(),
            ttl: None,
        }
    }

    /// Declares a column the record type reads.
    pub fn column(mut self, name: &str, kind: Kind) -> Table {
        self.columns.push((name.to_string(), kind));
        self
    }

    /// Declares a cached index on one or more columns (their values'
    /// list of primary keys is cached).
    pub fn index(mut self, columns: &[&str]) -> Table {
        self.indexes
            .push(columns.iter().map(|c| c.to_string()).collect());
        self.unique.push(false);
        self
    }

    /// Declares a cached unique index (a user's email): read with
    /// [`crate::Cached::fetch_by_unique`], one record or none.
    pub fn unique_index(mut self, columns: &[&str]) -> Table {
        self = self.index(columns);
        if let Some(u) = self.unique.last_mut() {
            *u = true;
        }
        self
    }

    /// The TTL of this table's records and index entries, seconds,
    /// instead of `Config::ttl`.
    pub fn ttl(mut self, seconds: u32) -> Table {
        self.ttl = Some(seconds);
        self
    }

    /// Checks the declaration: identifiers, indexed columns' kinds.
    pub(crate) fn check(&self) -> Result<()> {
        let ident = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !s.as_bytes()[0].is_ascii_digit()
        };
        for name in std::iter::once(&self.name).chain(self.columns.iter().map(|(c, _)| c)) {
            if !ident(name) {
                return Err(Error::Declaration(format!(
                    "{name:?} is not a plain SQL identifier (letters, digits, _)"
                )));
            }
        }
        for (i, (c, _)) in self.columns.iter().enumerate() {
            if self.columns[..i].iter().any(|(d, _)| d == c) {
                return Err(Error::Declaration(format!("column {c} declared twice")));
            }
        }
        for idx in &self.indexes {
            if idx.is_empty() {
                return Err(Error::Declaration("an index with no column".into()));
            }
            for c in idx {
                match self.kind_of(c) {
                    Some(Kind::Int | Kind::Text) => {}
                    Some(Kind::Other) => {
                        return Err(Error::Declaration(format!(
                            "column {c} is indexed but of kind Other (Int or Text only)"
                        )))
                    }
                    None => {
                        return Err(Error::Declaration(format!(
                            "index on {c}, which is not a declared column"
                        )))
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks the declared columns against the database's description of
    /// them.
    pub(crate) fn check_types(&self, described: &[Described]) -> Result<()> {
        for ((c, kind), d) in self.columns.iter().zip(described) {
            if !d.name.eq_ignore_ascii_case(c) {
                return Err(Error::Declaration(format!(
                    "table {}: column {c} described as {}",
                    self.name, d.name
                )));
            }
            let Some(class) = d.class else {
                return Err(Error::Declaration(format!(
                    "column {c} of table {} is of type {}, which kura-record cannot represent",
                    self.name, d.sql_type
                )));
            };
            let fits = match kind {
                Kind::Int => matches!(class, Class::Int(_) | Class::UInt),
                Kind::Text => matches!(class, Class::Text | Class::Bytes),
                Kind::Other => true,
            };
            let pk = c == &self.primary_key;
            if !fits || pk && !matches!(class, Class::Int(_) | Class::UInt) {
                return Err(Error::Declaration(format!(
                    "column {c} of table {} is declared {kind:?}{} but is of type {}",
                    self.name,
                    if pk { " (the primary key)" } else { "" },
                    d.sql_type
                )));
            }
        }
        if described.len() != self.columns.len() {
            return Err(Error::Declaration(format!(
                "table {}: {} columns declared, {} described",
                self.name,
                self.columns.len(),
                described.len()
            )));
        }
        Ok(())
    }

    /// The indexed columns, each once, in the order of the indexes.
    pub(crate) fn indexed_columns(&self) -> Vec<String> {
        let mut cols: Vec<String> = Vec::new();
        for c in self.indexes.iter().flatten() {
            if !cols.contains(c) {
                cols.push(c.clone());
            }
        }
        cols
    }

    pub(crate) fn kind_of(&self, column: &str) -> Option<Kind> {
        self.columns
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, k)| *k)
    }

    /// The schema digest: FNV-1a over the format version, the table, its
    /// key and its columns in order with their kinds.
    pub fn digest(&self) -> u64 {
        let mut h = Fnv::new();
        // 2: records are stored as rows of values (value.rs).
        h.write(b"kura-record 2\0");
        h.write(self.name.as_bytes());
        h.write(b"\0");
        h.write(self.primary_key.as_bytes());
        for (c, k) in &self.columns {
            h.write(b"\0");
            h.write(c.as_bytes());
            h.write(format!(":{k:?}").as_bytes());
        }
        h.0
    }

    /// The position of the index on exactly `columns`.
    pub(crate) fn index_of(&self, columns: &[&str]) -> Result<usize> {
        self.indexes
            .iter()
            .position(|idx| {
                idx.len() == columns.len() && idx.iter().zip(columns).all(|(a, b)| a == b)
            })
            .ok_or_else(|| {
                Error::Declaration(format!(
                    "no cached index on ({}) in table {}",
                    columns.join(", "),
                    self.name
                ))
            })
    }
}

/// FNV-1a, 64 bits: stable across builds and platforms, which a key's
/// version must be.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The key prefix of a table: `<namespace>:<table>:<digest>`, the digest
/// also covering the scope (the database's name by default).
pub(crate) fn prefix(namespace: &str, scope: &str, table: &Table) -> String {
    let mut h = Fnv(table.digest());
    h.write(b"\0scope:");
    h.write(scope.as_bytes());
    format!("{namespace}:{}:{:012x}", table.name, h.0 >> 16)
}

/// A record's key.
pub(crate) fn record_key(prefix: &str, id: i64) -> String {
    format!("{prefix}:r:{id}")
}

/// An index entry's key: the index's position and its values, text
/// escaped so that no value can contain a space, a control byte or the
/// separators. Over memcached's 250 bytes is an error, never a collision.
pub(crate) fn index_key(prefix: &str, index: usize, values: &[IndexValue]) -> Result<String> {
    let mut k = format!("{prefix}:i{index}");
    for v in values {
        match v {
            IndexValue::Int(i) => {
                let _ = write!(k, ":{i}");
            }
            IndexValue::Text(s) => {
                k.push_str(":s");
                for b in s.bytes() {
                    if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.' {
                        k.push(b as char);
                    } else {
                        let _ = write!(k, "%{b:02x}");
                    }
                }
            }
        }
    }
    if k.len() > kura_client::KEY_MAX {
        return Err(Error::KeyTooLong(k.len()));
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items() -> Table {
        Table::new("items", "id")
            .column("user_id", Kind::Int)
            .column("name", Kind::Text)
            .index(&["user_id"])
    }

    #[test]
    fn a_column_change_moves_the_digest() {
        let a = items();
        let b = items().column("count", Kind::Int);
        let c = Table::new("items", "id")
            .column("user_id", Kind::Text)
            .column("name", Kind::Text);
        assert_ne!(a.digest(), b.digest());
        assert_ne!(a.digest(), c.digest());
        assert_eq!(a.digest(), items().digest());
        assert_ne!(prefix("ns", "db", &a), prefix("other", "db", &a));
        assert_ne!(prefix("ns", "db", &a), prefix("ns", "db2", &a));
    }

    #[test]
    fn index_keys_escape_text_and_refuse_long_keys() {
        let k = index_key("p", 0, &["a b\r\n:%".into(), 7.into()]).expect("short");
        assert_eq!(k, "p:i0:sa%20b%0d%0a%3a%25:7");
        assert!(kura_client::check_key(k.as_bytes()).is_ok());
        let long = "x".repeat(300);
        assert!(matches!(
            index_key("p", 0, &[long.into()]),
            Err(Error::KeyTooLong(_))
        ));
    }

    #[test]
    fn declarations_are_checked() {
        assert!(items().check().is_ok());
        assert!(items().index(&["nope"]).check().is_err());
        assert!(Table::new("x; drop", "id").check().is_err());
        assert!(items().column("name", Kind::Text).check().is_err());
        assert!(items()
            .column("blob", Kind::Other)
            .index(&["blob"])
            .check()
            .is_err());
    }
}
