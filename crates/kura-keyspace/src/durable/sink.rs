//! The store's change sink: numbers each change under the shard lock that
//! made it and sends it, holding the item handle rather than a copy, to the
//! log thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use kura_log::{Mutation, MutationRef};
use kura_store::{Change, ChangeSink, EntryRef, Item, Report};

use super::lag::Lag;

/// A change, owned: what travels to the log thread.
pub(super) enum Owned {
    Put {
        item: Item,
        cas: u64,
        exptime: u32,
        stale: bool,
        binary_key: bool,
    },
    Touch(Box<[u8]>, u32),
    Remove(Box<[u8]>),
    Evict(Box<[u8]>),
    Flush(u32),
    /// A record of another server's log (a replica's copy).
    Copy(Mutation),
}

impl Owned {
    pub(super) fn of(change: Change<'_>) -> Owned {
        match change {
            Change::Put(EntryRef {
                item,
                cas,
                exptime,
                stale,
                binary_key,
            }) => Owned::Put {
                item: item.clone(),
                cas,
                exptime,
                stale,
                binary_key,
            },
            Change::Touch { key, exptime } => Owned::Touch(key.into(), exptime),
            Change::Remove { key } => Owned::Remove(key.into()),
            Change::Evict { key } => Owned::Evict(key.into()),
            Change::Flush { at } => Owned::Flush(at),
        }
    }

    pub(super) fn as_mutation(&self) -> MutationRef<'_> {
        match self {
            Owned::Put {
                item,
                cas,
                exptime,
                stale,
                binary_key,
            } => MutationRef::Set {
                key: item.key(),
                value: item.value(),
                flags: item.flags(),
                exptime: *exptime,
                cas: *cas,
                stale: *stale,
                binary_key: *binary_key,
            },
            Owned::Touch(key, exptime) => MutationRef::Touch {
                key,
                exptime: *exptime,
            },
            Owned::Remove(key) => MutationRef::Delete { key },
            Owned::Evict(key) => MutationRef::Evict { key },
            Owned::Flush(at) => MutationRef::Flush { at: *at },
            Owned::Copy(m) => m.as_ref(),
        }
    }
}

pub(super) enum Msg {
    /// A record and its encoded length.
    Record(u64, Owned, usize),
    /// Write and sync everything received, then answer with the number of
    /// the last record on disk.
    Sync(mpsc::Sender<u64>),
    /// Replace or cut back the log's history (replication; reset.rs).
    Reset(super::reset::Reset),
    Stop,
}

/// The store's change sink: numbers changes and sends them to the log
/// thread.
pub struct LogSink {
    pub(super) next: AtomicU64,
    pub(super) tx: mpsc::Sender<Msg>,
    pub(super) lag: Arc<Lag>,
    /// On a replica: the log holds the primary's records, numbered by the
    /// primary, and the store's own changes are not logged.
    pub(super) following: AtomicBool,
    /// A write reached the store while it was following (a write under way
    /// when the server became a replica): what it holds is no longer the
    /// primary's history.
    pub(super) diverged: AtomicBool,
    /// The fixed-length tables, whose writes are logged too (tables.rs).
    pub(super) tables: crate::Tables,
}

impl LogSink {
    /// Numbers and logs a change made outside the store (a table write),
    /// under the lock that orders it, as [`ChangeSink::record`] does: its
    /// record's number (0 when none was made).
    pub(super) fn record_copy(&self, m: Mutation) -> u64 {
        if self.following.load(Ordering::Relaxed) {
            self.diverged.store(true, Ordering::Relaxed);
            return 0;
        }
        let seq = self.next.fetch_add(1, Ordering::AcqRel);
        let owned = Owned::Copy(m);
        let len = owned.as_mutation().encoded_len();
        self.lag.owe(len);
        let _ = self.tx.send(Msg::Record(seq, owned, len));
        seq
    }
}

impl ChangeSink for LogSink {
    fn record(&self, change: Change<'_>, report: &Report) {
        if self.following.load(Ordering::Relaxed) {
            // Evictions and flushes coming due are the replica's own
            // business (replay never reports); a write is not.
            if matches!(
                change,
                Change::Put(_) | Change::Touch { .. } | Change::Remove { .. }
            ) {
                self.diverged.store(true, Ordering::Relaxed);
            }
            return;
        }
        let seq = self.next.fetch_add(1, Ordering::AcqRel);
        report.made(seq);
        let owned = Owned::of(change);
        let len = owned.as_mutation().encoded_len();
        self.lag.owe(len);
        // A closed channel means the log thread stopped on an I/O error;
        // it said so, and the server is stopping.
        let _ = self.tx.send(Msg::Record(seq, owned, len));
    }
}
