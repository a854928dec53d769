//! What a request's writes left for its connection: a [`Ticket`], the
//! number of the last record they made, which the connection hands back to
//! [`Keyspace::settle`] (the log has it, as `--fsync` asks) or
//! [`Keyspace::replicated`] (enough replicas have it) before it replies.
//!
//! The store tells its change sink (durable/sink.rs, or the journal) of a
//! change under the shard's lock, from inside the store's call; the sink
//! writes the record's number into the caller's [`Report`], which the
//! connection passes into each write ([`Store::reporting`]) and turns into
//! a ticket after the request ([`Keyspace::take_ticket`]). The same report,
//! made [`Report::batched`], carries whether the journal appended records
//! that the batch's end sends ([`Keyspace::batch_done`]).
//!
//! [`Keyspace::settle`]: crate::Keyspace::settle
//! [`Keyspace::replicated`]: crate::Keyspace::replicated
//! [`Keyspace::batch_done`]: crate::Keyspace::batch_done
//! [`Keyspace::take_ticket`]: crate::Keyspace::take_ticket
//! [`Store::reporting`]: kura_store::Store::reporting
//! [`Report`]: kura_store::Report
//! [`Report::batched`]: kura_store::Report::batched

/// The last record the writes of a request made (see the module
/// documentation); [`Ticket::NONE`] if they made none.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

impl Ticket {
    /// No record.
    pub const NONE: Ticket = Ticket(0);

    /// The ticket of record `seq` (0: none).
    #[inline]
    pub fn of(seq: u64) -> Ticket {
        Ticket(seq)
    }

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
