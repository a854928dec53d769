//! Fixed-length tables (`--table`) in the update log: a table write is
//! logged as its result (`TablePut`, `TableDelete`), numbered under the
//! record's own lock by the same sequence as the store's changes; replay
//! (recovery, a replica) sets the slot to the logged bytes; a snapshot
//! holds every record present. See docs/tables.md.
//!
//! The log is the authority: a table file the crash left unclean may hold
//! writes the log never got (the log thread had not written them), so after
//! recovery a record of such a table that neither the snapshot nor the log
//! mentions is removed, and one they mention holds their last word. A table
//! the data dir has no record of at all is taken as its file holds it (a
//! table from before tables were logged, or a new one) and a snapshot is
//! asked for at once, so that its records enter the log's history.

use std::collections::BTreeMap;

use kura_log::{Mutation, SnapshotWriter};
use kura_store::Store;
use kura_table::{Edit, Table};

use super::Durable;
use crate::Tables;

/// A table record this server cannot hold.
#[derive(Debug, thiserror::Error)]
pub enum TableMismatch {
    #[error("a record of table {0:?}, which this server does not declare (--table)")]
    Unknown(String),
    #[error("record {id} of table {name:?} does not fit the table here (width {width}, max {max}): {len} bytes")]
    Shape {
        name: String,
        id: u64,
        len: usize,
        width: u32,
        max: u64,
    },
}

/// Applies a table record: the slot takes the logged bytes (or is
/// cleared). A record that does not fit changes nothing.
///
/// # Errors
/// The table is not declared here, or the record does not fit it.
pub(crate) fn apply_table(tables: &Tables, m: &Mutation) -> Result<(), TableMismatch> {
    let (name, id, new) = match m {
        Mutation::TablePut {
            table,
            id,
            value,
            flags,
        } => (table, *id, Some((value, *flags))),
        Mutation::TableDelete { table, id } => (table, *id, None),
        _ => return Ok(()),
    };
    let name_str = || String::from_utf8_lossy(name).into_owned();
    let t = tables
        .by_name(name)
        .ok_or_else(|| TableMismatch::Unknown(name_str()))?;
    let len = new.as_ref().map_or(0, |(v, _)| v.len());
    if id == 0 || id > t.max() || len > t.width() as usize {
        return Err(TableMismatch::Shape {
            name: name_str(),
            id,
            len,
            width: t.width(),
            max: t.max(),
        });
    }
    let edit = match new {
        Some((v, flags)) => Edit::Put(v.clone(), flags),
        None => Edit::Delete,
    };
    // Checked above; an error left is a failed sync under `always`.
    if let Err(e) = t.edit(id, |_| edit, |_| {}) {
        tracing::error!("table {}: {e}", name_str());
    }
    Ok(())
}

/// Empties every table (a full resync, a rewind: what they held is
/// replaced).
pub(crate) fn clear_tables(tables: &Tables) {
    for (name, t) in tables.iter() {
        if let Err(e) = t.clear() {
            tracing::error!("table {}: {e}", String::from_utf8_lossy(name));
        }
    }
}

/// Adds every table record to a snapshot; returns how many.
pub(super) fn snapshot_tables(tables: &Tables, w: &mut SnapshotWriter) -> anyhow::Result<u64> {
    let mut n = 0;
    for (name, t) in tables.iter() {
        let mut failed = None;
        t.range(
            &kura_table::RangeSpec::all(),
            usize::MAX,
            |id, value, flags| {
                if failed.is_some() {
                    return;
                }
                let m = kura_log::MutationRef::TablePut {
                    table: name,
                    id,
                    value,
                    flags,
                };
                match w.push(&m) {
                    Ok(()) => n += 1,
                    Err(e) => failed = Some(e),
                }
            },
        );
        if let Some(e) = failed {
            return Err(e.into());
        }
    }
    Ok(n)
}

/// Bytes the tables' records take in a snapshot, about.
pub(super) fn snapshot_bytes(tables: &Tables) -> u64 {
    tables
        .iter()
        .map(|(name, t)| t.len() * (u64::from(t.width()) + name.len() as u64 + 32))
        .sum()
}

/// Replay of recovered records into the store and the tables, noting which
/// records of tables left unclean the data dir mentions.
pub(crate) struct Replay<'a> {
    pub(crate) store: &'a Store,
    tables: &'a Tables,
    /// Per unclean table (by name): the ids the snapshot and log mention.
    mentioned: BTreeMap<Vec<u8>, Vec<u64>>,
    /// Tables the data dir has records of.
    seen: BTreeMap<Vec<u8>, ()>,
    /// Records that could not be applied, by table.
    misfits: BTreeMap<String, u64>,
}

impl<'a> Replay<'a> {
    /// A replay into `store` and `tables`; with `after_crash`, tables not
    /// closed cleanly are made to hold what the log says and no more.
    pub(crate) fn new(store: &'a Store, tables: &'a Tables, after_crash: bool) -> Replay<'a> {
        let mentioned = tables
            .iter()
            .filter(|(_, t)| after_crash && t.open_report().checked)
            .map(|(name, t)| {
                (
                    name.to_vec(),
                    vec![0u64; (t.max() as usize).div_ceil(64) + 1],
                )
            })
            .collect();
        Replay {
            store,
            tables,
            mentioned,
            seen: BTreeMap::new(),
            misfits: BTreeMap::new(),
        }
    }

    /// Applies one recovered record.
    pub(crate) fn apply(&mut self, m: &Mutation) {
        let (name, id) = match m {
            Mutation::TablePut { table, id, .. } | Mutation::TableDelete { table, id } => {
                (table, *id)
            }
            other => {
                // Store records never fail.
                let _ = super::apply(self.store, self.tables, other);
                return;
            }
        };
        if let Err(e) = apply_table(self.tables, m) {
            let key = match e {
                TableMismatch::Unknown(n) => format!("{n} (not declared)"),
                TableMismatch::Shape { name, .. } => format!("{name} (records that do not fit)"),
            };
            *self.misfits.entry(key).or_default() += 1;
            return;
        }
        if !self.seen.contains_key(name) {
            self.seen.insert(name.clone(), ());
        }
        if let Some(bits) = self.mentioned.get_mut(name) {
            if let Some(w) = bits.get_mut((id / 64) as usize) {
                *w |= 1 << (id % 64);
            }
        }
    }

    /// Ends the replay: warns of records that could not be applied, removes
    /// from unclean tables the records the log does not know; returns
    /// whether a snapshot should be taken (a table holds records the data
    /// dir has none of).
    pub(crate) fn finish(self) -> bool {
        for (table, n) in &self.misfits {
            tracing::warn!("recovery skipped {n} records of table {table}: declare it as it was to keep them, the next snapshot drops them");
        }
        let mut snapshot = false;
        for (name, t) in self.tables.iter() {
            let label = String::from_utf8_lossy(name);
            if !self.seen.contains_key(name) {
                if !t.is_empty() {
                    tracing::info!("table {label}: {} records the update log has none of; a snapshot now takes them in", t.len());
                    snapshot = true;
                }
                continue;
            }
            let Some(bits) = self.mentioned.get(name) else {
                continue;
            };
            let unlogged = unmentioned(t, bits);
            if unlogged > 0 {
                tracing::warn!("table {label}: removed {unlogged} records the crash left in its file but not in the update log");
            }
        }
        snapshot
    }
}

/// Removes the records of `t` whose bit is clear; returns how many.
fn unmentioned(t: &Table, bits: &[u64]) -> u64 {
    let mut ids = Vec::new();
    t.range(&kura_table::RangeSpec::all(), usize::MAX, |id, _, _| {
        let known = bits
            .get((id / 64) as usize)
            .is_some_and(|w| w & (1 << (id % 64)) != 0);
        if !known {
            ids.push(id);
        }
    });
    let mut n = 0;
    for id in ids {
        if matches!(t.edit(id, |_| Edit::Delete, |_| {}), Ok(true)) {
            n += 1;
        }
    }
    n
}

impl Durable {
    /// Logs a table write (its result: `new` is the record's bytes and
    /// flags, or `None` when it was deleted). Called under the record's
    /// lock ([`Table::edit`]'s hook), so the log orders the writes of one
    /// id as they happened; the connection then settles like any write
    /// (on the returned record number, 0 when none was made).
    pub(crate) fn log_table(&self, table: &[u8], id: u64, new: Option<(&[u8], u32)>) -> u64 {
        let m = match new {
            Some((value, flags)) => Mutation::TablePut {
                table: table.to_vec(),
                id,
                value: value.to_vec(),
                flags,
            },
            None => Mutation::TableDelete {
                table: table.to_vec(),
                id,
            },
        };
        self.sink.record_copy(m)
    }

    /// The tables recovery replays into and snapshots read.
    pub(crate) fn tables(&self) -> &Tables {
        &self.sink.tables
    }
}
