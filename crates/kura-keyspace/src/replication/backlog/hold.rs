//! Holds: a full resync from memory takes the store's entries at record
//! `at` and sends them, which for a large store over a slow link takes a
//! while; the records written meanwhile must still be in the backlog when
//! its stream begins after them, or the replica falls behind before it
//! has started and resyncs whole again (and again, for as long as writes
//! go on: the loop Redis avoids with its replica output buffers). A hold
//! keeps the backlog from dropping the records from its mark on, beyond
//! the backlog's size, up to the resync buffer: past that every hold is
//! given up (counted, and their senders told) and the backlog goes back to
//! its size. The stream moves the mark on as it reads and lets the hold go
//! once what is left to send fits in half the backlog's size, after which the
//! replica is a follower like any other (a replica that cannot keep up
//! with the writes never gets there, and is cut off at the buffer).

use std::sync::Arc;

use super::{Backlog, Ring};

/// See the module documentation; let go when dropped.
#[derive(Debug)]
pub struct Hold {
    backlog: Arc<Backlog>,
    id: u64,
}

impl Backlog {
    /// Holds the records after the last one pushed, which it returns (a
    /// snapshot taken now has every change up to it).
    pub fn hold(self: &Arc<Self>) -> (Hold, u64) {
        let mut ring = self.ring.lock();
        let id = ring.next_hold;
        ring.next_hold += 1;
        let last = ring.last;
        ring.holds.push((id, last + 1));
        let hold = Hold {
            backlog: self.clone(),
            id,
        };
        (hold, last)
    }

    /// Whether the records after `seq` come to at most half the backlog's
    /// size: a stream there no longer needs a hold, and has half the
    /// backlog to spare against the writes made while it sends a frame.
    /// Counted from the newest chunk back, stopping there (a hold may keep
    /// many chunks); records no longer held are not within it.
    pub fn within_size(&self, seq: u64) -> bool {
        let room = (self.limit / 2) as u64;
        self.ring
            .lock()
            .bytes_after(seq, room)
            .is_some_and(|n| n <= room)
    }

    /// Holds now.
    pub fn holds(&self) -> usize {
        self.ring.lock().holds.len()
    }

    /// Holds given up: the records held outgrew the resync buffer, or the
    /// backlog started over.
    pub fn holds_lost(&self) -> u64 {
        self.ring.lock().holds_lost
    }

    /// Drops the oldest records while over the backlog's size, keeping
    /// those held unless they come to more than the backlog's size and the
    /// resync buffer together: then the holds are given up.
    pub(super) fn trim(&self, ring: &mut Ring) {
        let held = ring.holds.iter().map(|h| h.1).min();
        ring.trim(self.limit, held);
        if held.is_some() && ring.bytes > self.limit.saturating_add(self.resync_buffer) {
            self.give_up_holds(ring);
            ring.trim(self.limit, None);
        }
    }

    /// Gives every hold up (their streams will find their records gone).
    pub(super) fn give_up_holds(&self, ring: &mut Ring) {
        if ring.holds.is_empty() {
            return;
        }
        ring.holds_lost += ring.holds.len() as u64;
        ring.holds.clear();
        self.lost.notify_waiters();
    }
}

impl Hold {
    /// Keeps the records from `next` on only (the stream has read those
    /// before).
    pub fn advance(&self, next: u64) {
        let mut ring = self.backlog.ring.lock();
        if let Some(h) = ring.holds.iter_mut().find(|h| h.0 == self.id) {
            h.1 = h.1.max(next);
        }
    }

    /// Whether it was given up (the backlog outgrew the resync buffer).
    pub fn lost(&self) -> bool {
        !self
            .backlog
            .ring
            .lock()
            .holds
            .iter()
            .any(|h| h.0 == self.id)
    }

    /// Returns once it is given up.
    pub async fn until_lost(&self) {
        loop {
            let notified = self.backlog.lost.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.lost() {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut ring = self.backlog.ring.lock();
        ring.holds.retain(|h| h.0 != self.id);
        // What it kept beyond the backlog's size goes now, not at the
        // next write.
        self.backlog.trim(&mut ring);
    }
}
