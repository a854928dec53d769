//! Hearing of every change, and putting entries back: what a durable server
//! needs from the store.
//!
//! A [`ChangeSink`] attached with [`Store::attach`](crate::Store::attach)
//! is told the result of every mutation while the lock of the shard that
//! changed is still held, so the order in which it hears of the changes to
//! one key is the order in which they happened (and the order of their
//! replies). It hears the *result*, never the command: a set, an append or
//! an incr all report the entry as it now is, a touch its new deadline, an
//! eviction the key that left. Expiry is not reported: deadlines are
//! absolute, so an entry that expired is expired on replay too.
//!
//! A sink answers through the caller's [`Report`]: the number it gave the
//! record of a change (a durable server's reply waits until the log has
//! it), and whether it left work for the end of the caller's batch. The
//! caller passes its report into each operation ([`Store::reporting`]);
//! the plain operations pass a fresh one.
//!
//! A store without a sink does none of this: every hook is one branch on an
//! empty `OnceLock`.
//!
//! [`Store::reporting`]: crate::Store::reporting

use std::cell::Cell;

use crate::item::{Item, KEY_BINARY, STALE};
use crate::shard::Shard;

/// One change, as its result.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// The entry for `item.key()` now holds this.
    Put(EntryRef<'a>),
    /// The entry for `key` now expires at `exptime` (Unix time, 0 never).
    Touch { key: &'a [u8], exptime: u32 },
    /// `key` was deleted, or a store that failed took its old value away.
    Remove { key: &'a [u8] },
    /// `key` was evicted to make room.
    Evict { key: &'a [u8] },
    /// Every entry is dropped at Unix time `at` (0: dropped now).
    Flush { at: u32 },
}

/// An entry as the store holds it, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct EntryRef<'a> {
    pub item: &'a Item,
    pub cas: u64,
    /// Unix deadline, 0 for never.
    pub exptime: u32,
    /// Invalidated by meta `I`, served as stale.
    pub stale: bool,
    /// Stored with a base64 key through the meta protocol.
    pub binary_key: bool,
}

/// An entry to put back ([`Store::restore`](crate::Store::restore)) or
/// one read out for a snapshot ([`Store::entries`](crate::Store::entries)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub item: Item,
    pub cas: u64,
    /// Unix deadline, 0 for never.
    pub exptime: u32,
    pub stale: bool,
    pub binary_key: bool,
}

impl Entry {
    /// Borrows this entry as a change would carry it.
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            item: &self.item,
            cas: self.cas,
            exptime: self.exptime,
            stale: self.stale,
            binary_key: self.binary_key,
        }
    }
}

/// Hears every change of a store (see the module documentation).
///
/// `record` runs under a shard lock, on the thread that made the change:
/// it must be quick and must not call back into the store. What it tells
/// the caller goes into `report`.
pub trait ChangeSink: Send + Sync {
    fn record(&self, change: Change<'_>, report: &Report);
}

/// What the sinks that heard a caller's changes tell it back (see the
/// module documentation). One report may serve many operations: the
/// caller takes what accumulated when it needs it.
#[derive(Debug, Default)]
pub struct Report {
    batched: bool,
    seq: Cell<u64>,
    pending: Cell<bool>,
}

impl Report {
    /// The report of a caller that ends its work in batches and, at each
    /// batch's end, acts on [`Report::take_pending`]: sinks may leave work
    /// for then. (A plain report's caller does not: sinks do it at once.)
    pub fn batched() -> Report {
        Report {
            batched: true,
            ..Report::default()
        }
    }

    /// Whether the caller acts on what sinks leave for its batch's end.
    #[inline]
    pub fn is_batched(&self) -> bool {
        self.batched
    }

    /// Said by a sink that numbered a change's record `seq`.
    #[inline]
    pub fn made(&self, seq: u64) {
        self.seq.set(self.seq.get().max(seq));
    }

    /// Said by a sink of a batched report that left work for the batch's end.
    #[inline]
    pub fn defer(&self) {
        self.pending.set(true);
    }

    /// The highest record number made since the last take (0: none).
    #[inline]
    pub fn take_seq(&self) -> u64 {
        self.seq.take()
    }

    /// Whether work was left for the batch's end since the last take.
    #[inline]
    pub fn take_pending(&self) -> bool {
        self.pending.take()
    }
}

impl Shard {
    /// Tells `sink` what the operation just done left behind: the entries
    /// it evicted, then the state of `key` (present or not), when `changed`.
    pub(crate) fn report(
        &mut self,
        sink: &dyn ChangeSink,
        r: &Report,
        hash: u64,
        key: &[u8],
        changed: bool,
    ) {
        self.report_evictions(sink, r);
        if !changed {
            return;
        }
        match self.find(hash, key) {
            Some(off) => {
                let m = self.meta(off);
                let item = m.handle();
                let entry = EntryRef {
                    item: &item,
                    cas: m.cas(),
                    exptime: m.exptime(),
                    stale: m.marks() & STALE != 0,
                    binary_key: m.marks() & KEY_BINARY != 0,
                };
                sink.record(Change::Put(entry), r);
            }
            None => sink.record(Change::Remove { key }, r),
        }
    }

    /// Tells `sink` of the entries evicted since the last report.
    pub(crate) fn report_evictions(&mut self, sink: &dyn ChangeSink, r: &Report) {
        if let Some(evicted) = self.evicted.as_mut() {
            for item in evicted.drain(..) {
                sink.record(Change::Evict { key: item.key() }, r);
            }
        }
    }

    /// Puts an entry back as it was (recovery): its CAS, deadline and
    /// marks, replacing what the key holds, in a block of this shard. False
    /// when it does not fit.
    pub(crate) fn restore(&mut self, hash: u64, entry: Entry, now: u32) -> bool {
        let marks =
            if entry.stale { STALE } else { 0 } | if entry.binary_key { KEY_BINARY } else { 0 };
        self.observe_cas(entry.cas);
        let existing = self.find(hash, entry.item.key());
        // An expired entry (replay puts those back too) is not replaced in
        // place: making room reclaims expired entries, which could be this
        // one, from under the replacement. It goes, and the new one is
        // linked.
        let existing = match existing {
            Some(off) if crate::expiry::is_expired(self.meta(off).exptime(), now) => {
                self.unlink(hash, off);
                None
            }
            other => other,
        };
        let it = &entry.item;
        let value = [it.value()];
        let contents = self.contents(it.key(), it.flags(), &value, entry.exptime, entry.cas);
        let Some(item) = self.alloc(&contents, now, existing) else {
            if let Some(off) = existing {
                self.unlink(hash, off);
            }
            return false;
        };
        self.put(hash, existing, item, entry.exptime, entry.cas, marks, now);
        true
    }

    /// The live entries of this shard.
    pub(crate) fn entries(&self, now: u32) -> Vec<Entry> {
        self.offsets()
            .filter_map(|off| {
                let m = self.meta(off);
                if crate::expiry::is_expired(m.exptime(), now) {
                    return None;
                }
                Some(Entry {
                    item: m.handle(),
                    cas: m.cas(),
                    exptime: m.exptime(),
                    stale: m.marks() & STALE != 0,
                    binary_key: m.marks() & KEY_BINARY != 0,
                })
            })
            .collect()
    }
}
