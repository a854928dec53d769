//! The replication backlog: the newest records, as the log holds them
//! (length, CRC, number, fields), in memory, bounded in bytes
//! (`--repl-backlog-size`). A primary's streams send from it without
//! reading a file or copying a byte (chunks are shared `Bytes`); a replica
//! that reconnects within it gets a partial resync. On a durable server it
//! is fed by the log thread once a replica has connected, and replicas
//! farther behind read the log's files; on a server without a data dir it
//! is the only backlog (journal.rs feeds it), and a replica that falls
//! behind it resyncs whole.
//!
//! A full resync from memory holds the records written while it is sent
//! (hold.rs), beyond the backlog's size up to `--repl-resync-buffer`, so
//! that a large store sent while writes go on does not fall behind the
//! backlog before its stream has begun.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use kura_log::record::RECORD_HEADER_LEN;
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;

use crate::replication::primary::{Direct, Sender};
use tokio::sync::Notify;

mod hold;
pub use hold::Hold;

/// Records in a row, whole.
#[derive(Debug, Clone)]
struct Chunk {
    first: u64,
    last: u64,
    bytes: Bytes,
}

#[derive(Debug)]
struct Ring {
    chunks: VecDeque<Chunk>,
    /// Records appended one by one (a journal), not yet a chunk: they
    /// become one when read or when it grows to [`OPEN_CHUNK`].
    open: Vec<u8>,
    open_first: u64,
    bytes: usize,
    /// The first record held (the one after `last` when none is).
    first: u64,
    /// The last record pushed (or the record it starts after).
    last: u64,
    /// Full resyncs being sent: (hold, the first record it keeps).
    holds: Vec<(u64, u64)>,
    next_hold: u64,
    /// Holds given up because the backlog outgrew the resync buffer.
    holds_lost: u64,
}

/// Where a reader stands against the backlog.
#[derive(Debug)]
pub enum Read {
    /// Whole records from the one asked for on, in order.
    Records { bytes: Vec<Bytes>, last: u64 },
    /// The record asked for is no longer held (or never was).
    Behind { first: u64 },
    /// The record asked for is not written yet.
    Wait,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Backlog {
    ring: Mutex<Ring>,
    limit: usize,
    /// Fed only once a reader wants it (a durable server's log thread
    /// copies nothing until a replica connects).
    active: AtomicBool,
    /// The last record pushed, and readers waiting for more: an append
    /// wakes them only when one is waiting (a flag read), so that a
    /// server streaming to replicas pays a wake-up per frame, not per
    /// change.
    last: AtomicU64,
    waiting: AtomicBool,
    more: Notify,
    /// Live streams over plain TCP, sent to by whoever adds records
    /// (primary/direct.rs), and whether there are any (read per append).
    directs: RwLock<Vec<Arc<Direct>>>,
    has_directs: AtomicBool,
    /// The thread that sends to them for an in-memory primary's workers.
    sender: Sender,
    /// Bytes the backlog may hold beyond `limit` for full resyncs, and
    /// their senders, told when their hold is given up.
    resync_buffer: usize,
    lost: Notify,
}

impl Drop for Backlog {
    fn drop(&mut self) {
        self.sender.stop();
    }
}

impl Backlog {
    /// An empty backlog of at most `limit` bytes, after record `last`.
    pub fn new(limit: usize, last: u64) -> Backlog {
        Backlog {
            ring: Mutex::new(Ring {
                chunks: VecDeque::new(),
                open: Vec::new(),
                open_first: last + 1,
                bytes: 0,
                first: last + 1,
                last,
                holds: Vec::new(),
                next_hold: 0,
                holds_lost: 0,
            }),
            limit: limit.max(1),
            active: AtomicBool::new(false),
            last: AtomicU64::new(last),
            waiting: AtomicBool::new(false),
            more: Notify::new(),
            directs: RwLock::new(Vec::new()),
            has_directs: AtomicBool::new(false),
            sender: Sender::default(),
            resync_buffer: 0,
            lost: Notify::new(),
        }
    }

    /// Lets full resyncs hold up to `bytes` beyond the backlog's size
    /// (hold.rs).
    #[must_use]
    pub fn holding(mut self, bytes: usize) -> Backlog {
        self.resync_buffer = bytes;
        self
    }

    /// The thread that sends to the live streams for workers.
    pub(crate) fn sender(&self) -> &Sender {
        &self.sender
    }

    /// Whether it is being fed.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Starts feeding it (a replica connected).
    pub fn activate(&self) {
        self.active.store(true, Ordering::Release);
    }

    /// Sends to `d` from whichever thread adds records, until
    /// [`Backlog::remove_direct`].
    pub(crate) fn add_direct(&self, d: Arc<Direct>) {
        let mut all = self.directs.write();
        all.push(d);
        self.has_directs.store(true, Ordering::SeqCst);
    }

    pub(crate) fn remove_direct(&self, d: &Arc<Direct>) {
        let mut all = self.directs.write();
        all.retain(|x| !Arc::ptr_eq(x, d));
        self.has_directs.store(!all.is_empty(), Ordering::SeqCst);
    }

    /// Whether any stream is sent to directly.
    #[inline]
    pub(crate) fn has_directs(&self) -> bool {
        self.has_directs.load(Ordering::Relaxed)
    }

    /// Sends what was added to every live stream (never waits for one).
    pub(crate) fn flush_directs(&self) {
        if !self.has_directs() {
            return;
        }
        for d in self.directs.read().iter() {
            d.flush(self);
        }
    }

    /// Tells every direct stream's task to look (records were added on a
    /// thread that does not send).
    pub(crate) fn kick_directs(&self) {
        for d in self.directs.read().iter() {
            d.kick();
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.ring.lock().bytes
    }

    /// The last record pushed.
    pub fn last(&self) -> u64 {
        self.last.load(Ordering::SeqCst)
    }

    /// Waits until a record after `seen` is pushed.
    pub async fn wait_past(&self, seen: u64) {
        loop {
            let notified = self.more.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Said before the check, read by a pusher after its store: one
            // of the two sees the other (both sequentially consistent).
            self.waiting.store(true, Ordering::SeqCst);
            if self.last() > seen {
                return;
            }
            notified.await;
        }
    }

    /// Tells waiting readers that record `last` is pushed.
    fn pushed(&self, last: u64) {
        self.last.store(last, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.waiting.store(false, Ordering::SeqCst);
            self.more.notify_waiters();
        }
    }

    /// Appends whole records `first..=last`. Records that do not follow
    /// the last held (the backlog was not fed for a while, or the log
    /// started over) replace everything held.
    pub fn push(&self, first: u64, last: u64, bytes: Bytes) {
        if bytes.is_empty() || last < first {
            return;
        }
        {
            let mut ring = self.ring.lock();
            ring.seal();
            if first != ring.last + 1 {
                ring.chunks.clear();
                ring.bytes = 0;
                ring.first = first;
                self.give_up_holds(&mut ring);
            }
            ring.bytes += bytes.len();
            ring.last = last;
            ring.open_first = last + 1;
            ring.chunks.push_back(Chunk { first, last, bytes });
            self.trim(&mut ring);
        }
        self.pushed(last);
        self.flush_directs();
    }

    /// Numbers a change (the record after the last) and appends it;
    /// returns its number. The journal of a server without a data dir
    /// calls it under the lock of the shard that changed, so that the
    /// records of one key are numbered in the order of its changes, and
    /// the backlog never holds more than its size, however fast writers go.
    pub fn append(&self, m: &kura_log::MutationRef<'_>) -> u64 {
        let seq = {
            let mut ring = self.ring.lock();
            let seq = ring.last + 1;
            let before = ring.open.len();
            m.encode(seq, &mut ring.open);
            ring.bytes += ring.open.len() - before;
            ring.last = seq;
            if ring.open.len() >= OPEN_CHUNK {
                ring.seal();
            }
            self.trim(&mut ring);
            seq
        };
        self.pushed(seq);
        seq
    }

    /// Forgets everything and starts after record `last` (the history
    /// was replaced or cut back).
    pub fn restart(&self, last: u64) {
        {
            let mut ring = self.ring.lock();
            ring.chunks.clear();
            ring.open.clear();
            ring.open_first = last + 1;
            ring.bytes = 0;
            ring.first = last + 1;
            ring.last = last;
            self.give_up_holds(&mut ring);
        }
        self.pushed(last);
    }

    /// Bytes of the records held after record `seq` (`None` when the
    /// backlog no longer holds them all).
    pub fn bytes_after(&self, seq: u64) -> Option<u64> {
        self.ring.lock().bytes_after(seq, u64::MAX)
    }

    /// The records from `next` on, about `max` bytes of them at most (at
    /// least one chunk's worth when any is there).
    pub fn read(&self, next: u64, max: usize) -> Read {
        let mut ring = self.ring.lock();
        if next < ring.first {
            return Read::Behind { first: ring.first };
        }
        if next > ring.last {
            return Read::Wait;
        }
        if next >= ring.open_first {
            ring.seal();
        }
        // A live stream reads what was just sealed: look at the newest
        // chunk before searching them all (thousands when frames are small).
        let start = match ring.chunks.back() {
            Some(c) if c.first <= next => ring.chunks.len() - 1,
            _ => ring.chunks.partition_point(|c| c.last < next),
        };
        let mut out = Vec::new();
        let mut size = 0;
        let mut last = next - 1;
        for c in ring.chunks.range(start..) {
            let mut bytes = c.bytes.clone();
            if c.first < next {
                // Skip the records before `next` within the chunk.
                bytes = bytes.slice(skip(&bytes, next - c.first)..);
            }
            size += bytes.len();
            out.push(bytes);
            last = c.last;
            if size >= max {
                break;
            }
        }
        Read::Records { bytes: out, last }
    }
}

/// Appended records become a chunk at this size.
const OPEN_CHUNK: usize = 64 * 1024;

impl Ring {
    /// Bytes of the records after record `seq` (`None` when not all of
    /// them are held), counted from the newest back; the count stops once
    /// past `cap` (somewhere above it).
    fn bytes_after(&self, seq: u64, cap: u64) -> Option<u64> {
        if seq + 1 < self.first {
            return None;
        }
        if seq >= self.last {
            return Some(0);
        }
        // The part of `b` (records from `first` on) after `seq`.
        let after = |b: &[u8], first: u64| (b.len() - skip(b, seq + 1 - first)) as u64;
        let mut n = 0u64;
        if !self.open.is_empty() {
            if self.open_first <= seq {
                return Some(after(&self.open, self.open_first));
            }
            n += self.open.len() as u64;
        }
        for c in self.chunks.iter().rev() {
            if n > cap || c.last <= seq {
                break;
            }
            n += if c.first > seq {
                c.bytes.len() as u64
            } else {
                after(&c.bytes, c.first)
            };
        }
        Some(n)
    }

    /// Makes the appended records a chunk.
    fn seal(&mut self) {
        if self.open.is_empty() {
            return;
        }
        // A copy of exactly its size, keeping the open buffer's capacity:
        // a stream reads (and so seals) every few records, and taking the
        // buffer would start each next one from empty, growing it again by
        // doubling (a reallocation and copy every few records).
        let bytes = Bytes::copy_from_slice(&self.open);
        self.open.clear();
        // A huge record leaves no huge buffer behind.
        self.open.shrink_to(2 * OPEN_CHUNK);
        self.chunks.push_back(Chunk {
            first: self.open_first,
            last: self.last,
            bytes,
        });
        self.open_first = self.last + 1;
    }

    /// Drops the oldest chunks while over `limit` (the newest stays
    /// whatever its size), but not the records from `held` on.
    fn trim(&mut self, limit: usize, held: Option<u64>) {
        while self.bytes > limit && self.chunks.len() > usize::from(self.open.is_empty()) {
            if let (Some(from), Some(c)) = (held, self.chunks.front()) {
                if c.last >= from {
                    break;
                }
            }
            let Some(old) = self.chunks.pop_front() else {
                break;
            };
            self.bytes -= old.bytes.len();
            self.first = old.last + 1;
        }
        let open_held = held.is_some_and(|from| from <= self.last);
        if self.bytes > limit && !self.open.is_empty() && self.chunks.is_empty() && !open_held {
            // Only appended records are left, over the limit: they go
            // whole (a reader of them resyncs).
            self.bytes -= self.open.len();
            self.open.clear();
            self.first = self.last + 1;
            self.open_first = self.last + 1;
        }
    }
}

/// The bytes the first `n` records of `b` take (whole records only are
/// pushed).
fn skip(b: &[u8], n: u64) -> usize {
    let mut at = 0;
    for _ in 0..n {
        let head = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        at += RECORD_HEADER_LEN + u32::from_le_bytes(head) as usize;
    }
    at
}

#[cfg(test)]
mod tests;
