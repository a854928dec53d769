//! The journal of a server without a data dir: its changes numbered in
//! sequence and kept, encoded as log records, in the replication backlog
//! (backlog.rs), which is then its only backlog. Each change is numbered
//! and encoded under the lock of the shard that changed (the backlog's own
//! lock taken inside it), so that the records of one key are in the order
//! of its changes and the backlog never holds more than its size however
//! fast writers go. It is made when the first replica connects (a server
//! nobody replicates from pays nothing), and numbers from the record after
//! the last the server applied as a replica, so a promoted replica's
//! history goes on. While the server follows a primary its own changes are
//! not numbered: the replica thread puts the primary's records in the
//! backlog as it applies them, so that it can have replicas of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kura_log::MutationRef;
use kura_store::{Change, ChangeSink, EntryRef, Report, Store};

use super::backlog::Backlog;

/// See the module documentation.
#[derive(Debug)]
pub struct Journal {
    sink: Arc<MemSink>,
}

#[derive(Debug)]
struct MemSink {
    backlog: Arc<Backlog>,
    following: AtomicBool,
}

impl ChangeSink for MemSink {
    fn record(&self, change: Change<'_>, report: &Report) {
        if self.following.load(Ordering::Acquire) {
            return;
        }
        let seq = self.backlog.append(&mutation(&change));
        report.made(seq);
        super::primary::appended(&self.backlog, report);
    }
}

/// A change as a log record's mutation.
fn mutation<'a>(change: &'a Change<'a>) -> MutationRef<'a> {
    match change {
        Change::Put(EntryRef {
            item,
            cas,
            exptime,
            stale,
            binary_key,
        }) => MutationRef::Set {
            key: item.key(),
            value: item.value(),
            flags: item.flags(),
            exptime: *exptime,
            cas: *cas,
            stale: *stale,
            binary_key: *binary_key,
        },
        Change::Touch { key, exptime } => MutationRef::Touch {
            key,
            exptime: *exptime,
        },
        Change::Remove { key } => MutationRef::Delete { key },
        Change::Evict { key } => MutationRef::Evict { key },
        Change::Flush { at } => MutationRef::Flush { at: *at },
    }
}

impl Journal {
    /// Starts numbering `store`'s changes after record `last`, into a
    /// backlog of `limit` bytes that full resyncs may grow by `resync`
    /// (backlog/hold.rs); `following` while the server is a replica.
    pub fn start(
        store: &Store,
        last: u64,
        limit: usize,
        resync: usize,
        following: bool,
    ) -> Journal {
        let backlog = Arc::new(Backlog::new(limit, last).holding(resync));
        backlog.activate();
        let sink = Arc::new(MemSink {
            backlog,
            following: AtomicBool::new(following),
        });
        // A store has one sink: a server without a data dir has none yet.
        store.attach(sink.clone());
        Journal { sink }
    }

    /// Numbers a table write (its result: the record's bytes and flags, or
    /// `None` when deleted), telling `report`; called under the record's
    /// lock.
    pub fn table(&self, table: &[u8], id: u64, new: Option<(&[u8], u32)>, report: &Report) {
        if self.sink.following.load(Ordering::Acquire) {
            return;
        }
        let m = match new {
            Some((value, flags)) => MutationRef::TablePut {
                table,
                id,
                value,
                flags,
            },
            None => MutationRef::TableDelete { table, id },
        };
        let seq = self.sink.backlog.append(&m);
        report.made(seq);
        super::primary::appended(&self.sink.backlog, report);
    }

    /// The backlog it feeds.
    pub fn backlog(&self) -> &Arc<Backlog> {
        &self.sink.backlog
    }

    /// The number the next change gets.
    pub fn next_seq(&self) -> u64 {
        self.sink.backlog.last() + 1
    }

    /// Stops or starts numbering the store's own changes (a replica's
    /// records come from its primary, numbered); numbering goes on after
    /// `last` when it starts again.
    pub fn set_following(&self, on: bool, last: u64) {
        if !on && self.sink.backlog.last() != last {
            self.sink.backlog.restart(last);
        }
        self.sink.following.store(on, Ordering::Release);
    }

    /// The primary's records `first..=last`, as it sent them, applied.
    pub fn replicated(&self, first: u64, last: u64, bytes: &[u8]) {
        self.sink
            .backlog
            .push(first, last, bytes::Bytes::copy_from_slice(bytes));
    }

    /// What the server holds was replaced by a snapshot at record `at`.
    pub fn restart(&self, at: u64) {
        self.sink.backlog.restart(at);
    }
}
