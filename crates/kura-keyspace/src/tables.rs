//! The fixed-length tables a server holds (`--table`), by name: opened
//! with the keyspace (in the data dir, once it is locked, when no path is
//! given), routed to by key (`NAME:ID`), and each write logged or
//! journalled under the record's own lock ([`Keyspace::table_logger`]).
//!
//! [`Keyspace::table_logger`]: crate::Keyspace::table_logger

use std::path::Path;
use std::sync::Arc;

use crate::config::{TableSpec, TablesConfig};

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

    /// Opens every table of `config`: a table without a path of its own
    /// lives in `data_dir` as `NAME.ktbl`, or in memory without one.
    ///
    /// # Errors
    /// A table's file cannot be opened or does not match its declaration.
    pub fn open(config: &TablesConfig, data_dir: Option<&Path>) -> Result<Tables, TableOpenError> {
        let mut tables = Tables::default();
        for spec in &config.specs {
            let table =
                open_one(spec, config.durability, data_dir).map_err(|error| TableOpenError {
                    name: spec.name.clone(),
                    error,
                })?;
            tables.add(&spec.name, table);
        }
        Ok(tables)
    }
}

/// A table that could not be opened (its message says why, whole).
#[derive(Debug, thiserror::Error)]
#[error("table {name}: {error}")]
pub struct TableOpenError {
    pub name: String,
    pub error: kura_table::TableError,
}

fn open_one(
    spec: &TableSpec,
    durability: kura_table::Durability,
    data_dir: Option<&Path>,
) -> Result<kura_table::Table, kura_table::TableError> {
    let path = spec
        .path
        .clone()
        .or_else(|| data_dir.map(|d| d.join(format!("{}.ktbl", spec.name))));
    if let Some(dir) = path.as_ref().and_then(|p| p.parent()) {
        std::fs::create_dir_all(dir).ok();
    }
    kura_table::Table::open(
        path.as_deref(),
        kura_table::TableOptions {
            width: spec.width,
            max: spec.max,
            durability,
        },
    )
}
