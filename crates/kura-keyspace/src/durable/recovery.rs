//! Recovery at startup: a recovered record applied to the store, and the
//! progress shown while a large data dir loads.

use std::time::{Duration, Instant};

use std::path::Path;

use kura_log::{read_snapshot, LogReader, Mutation};
use kura_store::{Change, EntryRef, Item, Store};

use super::tables::{Replay, TableMismatch};
use crate::Tables;

/// Applies a recovered record to the store or, for a table record, to
/// `tables` (tables.rs).
///
/// # Errors
/// A table record this server cannot hold (nothing was changed).
pub(crate) fn apply(store: &Store, tables: &Tables, m: &Mutation) -> Result<(), TableMismatch> {
    match m {
        Mutation::Set {
            key,
            value,
            flags,
            exptime,
            cas,
            stale,
            binary_key,
        } => {
            let item = Item::new(key, *flags, value);
            store.replay(Change::Put(EntryRef {
                item: &item,
                cas: *cas,
                exptime: *exptime,
                stale: *stale,
                binary_key: *binary_key,
            }));
        }
        Mutation::Delete { key } => {
            store.replay(Change::Remove { key });
        }
        Mutation::Evict { key } => {
            store.replay(Change::Evict { key });
        }
        Mutation::Touch { key, exptime } => {
            store.replay(Change::Touch {
                key,
                exptime: *exptime,
            });
        }
        Mutation::Flush { at } => {
            store.replay(Change::Flush { at: *at });
        }
        Mutation::TablePut { .. } | Mutation::TableDelete { .. } => {
            return super::tables::apply_table(tables, m);
        }
    }
    Ok(())
}

/// Loads the snapshot at `path` into `store`; returns the record it was
/// taken at and its entries.
pub(super) fn load_snapshot(
    into: &mut Replay<'_>,
    path: &Path,
    progress: &mut Progress,
) -> anyhow::Result<(u64, u64)> {
    tracing::info!("loading snapshot {}", path.display());
    Ok(read_snapshot(path, |r| {
        into.apply(&r.mutation);
        progress.tick("snapshot entries");
    })?)
}

/// Replays the log of `dir` after record `after` into the store and
/// tables; returns how many records it applied.
pub(super) fn replay_log(
    dir: &Path,
    into: &mut Replay<'_>,
    after: u64,
    progress: &mut Progress,
) -> anyhow::Result<u64> {
    let mut replayed = 0u64;
    for r in LogReader::from_seq(dir, after + 1)? {
        into.apply(&r?.mutation);
        replayed += 1;
        progress.tick("log records");
    }
    Ok(replayed)
}

/// Logs progress about once a second while a large data dir loads.
pub(super) struct Progress {
    count: u64,
    last: Instant,
}

impl Progress {
    pub(super) fn new() -> Progress {
        Progress {
            count: 0,
            last: Instant::now(),
        }
    }

    pub(super) fn tick(&mut self, what: &str) {
        self.count += 1;
        if self.count.is_multiple_of(4096) && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            tracing::info!("loading: {} {what} so far", self.count);
        }
    }
}
