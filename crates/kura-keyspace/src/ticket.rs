//! What a request's writes left for its connection: a [`Ticket`], the
//! number of the last record they made, which the connection hands back to
//! [`Keyspace::settle`] (the log has it, as `--fsync` asks) or
//! [`Keyspace::replicated`] (enough replicas have it) before it replies;
//! and, at the end of each batch of requests, [`Keyspace::batch_done`],
//! which sends replicas what the batch appended to the journal.
//!
//! The store tells its change sink (durable/sink.rs, or the journal) of a
//! change under the shard's lock, from inside the store's call, and its
//! `ChangeSink` returns nothing: so the sink leaves the record's number in
//! this thread's slot, and [`Keyspace::take_ticket`] takes it right after
//! the request, on the same thread. The slot is this module's alone.
//!
//! [`Keyspace::settle`]: crate::Keyspace::settle
//! [`Keyspace::replicated`]: crate::Keyspace::replicated
//! [`Keyspace::batch_done`]: crate::Keyspace::batch_done
//! [`Keyspace::take_ticket`]: crate::Keyspace::take_ticket

use std::cell::Cell;

/// The slot's top bit: the journal appended records that wait for the end
/// of the batch (primary/direct.rs); the rest: the last record's number.
const APPENDED: u64 = 1 << 63;

thread_local! {
    static SLOT: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread's requests end in batches (`batch_done`).
    static BATCHES: Cell<bool> = const { Cell::new(false) };
}

/// The last record the writes of a request made (see the module
/// documentation); [`Ticket::NONE`] if they made none.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

impl Ticket {
    /// No record.
    pub const NONE: Ticket = Ticket(0);

    /// Whether the writes made no record.
    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The record's number.
    #[inline]
    pub fn seq(self) -> u64 {
        self.0
    }

    /// The later of two tickets.
    #[inline]
    #[must_use]
    pub fn max(self, other: Ticket) -> Ticket {
        Ticket(self.0.max(other.0))
    }

    /// Takes the ticket out, leaving none.
    #[inline]
    pub fn take(&mut self) -> Ticket {
        std::mem::take(self)
    }
}

/// Said by a sink that made record `seq` on this thread.
#[inline]
pub(crate) fn made(seq: u64) {
    SLOT.with(|s| s.set((s.get() & APPENDED) | seq));
}

/// The record this thread's writes made since the last take.
#[inline]
pub(crate) fn take() -> Ticket {
    SLOT.with(|s| {
        let v = s.get();
        s.set(v & APPENDED);
        Ticket(v & !APPENDED)
    })
}

/// Whether this thread ends its requests in batches: then the journal's
/// appends wait for [`take_appended`].
#[inline]
pub(crate) fn batches() -> bool {
    BATCHES.with(Cell::get)
}

/// Notes that the journal appended records this thread's batch sends.
#[inline]
pub(crate) fn mark_appended() {
    SLOT.with(|s| s.set(s.get() | APPENDED));
}

/// Whether the journal appended records since the last call.
#[inline]
pub(crate) fn take_appended() -> bool {
    SLOT.with(|s| {
        let v = s.get();
        if v & APPENDED == 0 {
            return false;
        }
        s.set(v & !APPENDED);
        true
    })
}

/// Said once by a thread that serves requests: each batch of requests it
/// serves ends in [`Keyspace::batch_done`](crate::Keyspace::batch_done).
pub fn serves_in_batches() {
    BATCHES.with(|b| b.set(true));
}
