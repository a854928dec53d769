//! The budget for values still arriving. A storage request is buffered
//! whole in its connection's read buffer before it is stored, so without a
//! limit `-c` clients that each send most of a `-I` value and then stall
//! would hold `-c` x `-I` bytes outside the cache (1,000 x 1 MB at `-m
//! 64`). memcached charges such a value to the item memory from its first
//! byte; kura charges it to one server-wide budget, a quarter of `-m` (and
//! at least one largest value): a frame longer than [`FREE_FRAME`] must
//! hold room for its whole length before the buffer grows for it, and
//! gives the room back once it is done. A connection that finds the budget
//! spent reads nothing more and waits for room, up to [`WAIT`]; then its
//! request is refused as memcached refuses a value it has no memory for,
//! and the value is skipped as it arrives. Ordinary values fit in the read
//! buffer and are never charged.

use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::ServerConfig;

/// Frames up to this long (a read buffer's own size) are not charged.
pub(crate) const FREE_FRAME: usize = 16 * 1024;
/// How long a connection waits for room before its value is refused.
pub(crate) const WAIT: Duration = Duration::from_secs(1);
/// The budget is counted in units of this many bytes.
const UNIT: usize = 1024;

/// Room for values being received, shared by every connection.
#[derive(Debug)]
pub struct ValueBudget {
    room: Semaphore,
    units: usize,
}

impl ValueBudget {
    /// A budget of `bytes` (rounded up to whole units).
    pub fn new(bytes: usize) -> ValueBudget {
        let units = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        ValueBudget {
            room: Semaphore::new(units),
            units,
        }
    }

    /// A quarter of the memory limit, and never less than one largest
    /// request (a value of `-I` bytes with its command line).
    pub fn for_config(c: &ServerConfig) -> ValueBudget {
        let quarter = usize::try_from(c.memory_bytes() / 4).unwrap_or(usize::MAX);
        ValueBudget::new(quarter.max(c.item_size_max.saturating_add(FREE_FRAME)))
    }

    /// The whole budget in bytes.
    pub fn limit(&self) -> usize {
        self.units * UNIT
    }

    /// Bytes held now by values being received.
    pub fn in_use(&self) -> usize {
        (self.units - self.room.available_permits().min(self.units)) * UNIT
    }
}

/// What one connection holds of the budget: room for the frame at the
/// front of its read buffer, if that frame is large.
pub(crate) struct Room<'a> {
    budget: &'a ValueBudget,
    permit: Option<SemaphorePermit<'a>>,
}

impl<'a> Room<'a> {
    pub(crate) fn new(budget: &'a ValueBudget) -> Room<'a> {
        Room {
            budget,
            permit: None,
        }
    }

    fn units(needed: usize) -> usize {
        needed.div_ceil(UNIT)
    }

    /// True when a frame of `needed` bytes may be buffered now: it is
    /// small, already covered, or room for it was free.
    pub(crate) fn try_cover(&mut self, needed: usize) -> bool {
        if needed <= FREE_FRAME || self.held() >= Self::units(needed) {
            return true;
        }
        // Never hold part of the room while asking for more: two
        // connections could then wait on each other.
        self.permit = None;
        let Ok(units) = u32::try_from(Self::units(needed)) else {
            return false;
        };
        match self.budget.room.try_acquire_many(units) {
            Ok(p) => {
                self.permit = Some(p);
                true
            }
            Err(_) => false,
        }
    }

    /// Waits up to [`WAIT`] for room for a frame of `needed` bytes; false
    /// when none came (the request is then refused).
    pub(crate) async fn wait_cover(&mut self, needed: usize) -> bool {
        if self.try_cover(needed) {
            return true;
        }
        let units = Self::units(needed);
        let Ok(n) = u32::try_from(units) else {
            return false;
        };
        if units > self.budget.units {
            return false;
        }
        match crate::timer::timeout(WAIT, self.budget.room.acquire_many(n)).await {
            Some(Ok(p)) => {
                self.permit = Some(p);
                true
            }
            _ => false,
        }
    }

    /// Gives the room back (the frame it covered is done); true if any
    /// was held, when the buffer that grew for the frame should shrink.
    pub(crate) fn release(&mut self) -> bool {
        self.permit.take().is_some()
    }

    /// True while room is held for a frame.
    pub(crate) fn holds(&self) -> bool {
        self.permit.is_some()
    }

    fn held(&self) -> usize {
        self.permit.as_ref().map_or(0, |p| p.num_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_frames_are_free_and_large_ones_share_the_budget() {
        let budget = ValueBudget::new(3 * 1024 * 1024);
        let mut a = Room::new(&budget);
        let mut b = Room::new(&budget);
        let mut c = Room::new(&budget);
        assert!(a.try_cover(FREE_FRAME));
        assert_eq!(budget.in_use(), 0);
        assert!(a.try_cover(2_000_000));
        // Asking again for the same frame takes nothing more.
        assert!(a.try_cover(2_000_000));
        assert_eq!(budget.in_use(), 2_000_000usize.div_ceil(UNIT) * UNIT);
        assert!(b.try_cover(1_000_000));
        assert!(!c.try_cover(200_000));
        assert!(c.try_cover(1000), "small frames never wait");
        assert!(a.release());
        assert!(!a.release());
        assert!(c.try_cover(200_000));
        drop((b, c));
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn a_waiting_frame_gets_room_when_it_is_given_back_or_is_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let budget = ValueBudget::new(1024 * 1024);
        rt.block_on(async {
            let mut a = Room::new(&budget);
            let mut b = Room::new(&budget);
            assert!(a.try_cover(1024 * 1024));
            // Nobody gives anything back: refused after the wait.
            assert!(!b.wait_cover(600_000).await);
            let waiting = async { b.wait_cover(600_000).await };
            let giving = async {
                tokio::task::yield_now().await;
                a.release();
            };
            let (got, ()) = tokio::join!(waiting, giving);
            assert!(got);
        });
        // More than the whole budget can never be had.
        let mut c = Room::new(&budget);
        assert!(!rt.block_on(c.wait_cover(2 * 1024 * 1024)));
    }

    #[test]
    fn the_budget_holds_a_largest_value_at_least() {
        let c = ServerConfig {
            memory_limit: 2,
            ..Default::default()
        };
        assert!(ValueBudget::for_config(&c).limit() >= c.item_size_max + FREE_FRAME);
        let c = ServerConfig::default();
        assert_eq!(ValueBudget::for_config(&c).limit(), 16 * 1024 * 1024);
    }
}
