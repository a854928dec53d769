//! What one client may make the proxy hold (issue 43). The replies a
//! client asked for and has not read live in the proxy until it reads
//! them: the backend connections they came on are shared and keep reading
//! for the other clients. So a connection routes a request only while
//!
//! - its requests in flight are fewer than its window:
//!   `client_max_bytes` over the size its replies run to (the largest
//!   recent one, decaying as smaller ones come; a sixteenth of
//!   `client_max_bytes` before the first), at least 1 and at most
//!   `client_max_requests`;
//! - and the bytes that all the requests in flight of its worker's
//!   clients are expected to return (each at its connection's size) stay
//!   within the worker's share of `total_max_bytes`. A client with nothing
//!   in flight may always send one, so every client moves on.
//!
//! Past either bound the connection stops reading from its client until
//! replies are written. What a connection reserved goes when it goes.

use std::cell::Cell;

use serde::Deserialize;

/// The bounds (TOML `[limits]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Bytes of replies one client's requests in flight may return.
    pub client_max_bytes: usize,
    /// Requests one client may have in flight (mcrouter's
    /// `--max-client-outstanding-reqs`).
    pub client_max_requests: usize,
    /// Bytes of replies all clients' requests in flight may return.
    pub total_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            client_max_bytes: 4 << 20,
            client_max_requests: 1024,
            total_max_bytes: 256 << 20,
        }
    }
}

/// The smallest size a reply is taken to have.
const MIN_REPLY: usize = 64;

thread_local! {
    /// Bytes this worker's connections reserved for their requests in flight.
    static RESERVED: Cell<usize> = const { Cell::new(0) };
}

/// One connection's share.
pub struct Budget {
    /// The size its replies run to.
    size: usize,
    max_bytes: usize,
    max_requests: usize,
    worker_max: usize,
    /// What its requests in flight reserved.
    reserved: usize,
}

impl Budget {
    pub fn new(l: &Limits, threads: usize) -> Budget {
        let mut b = Budget {
            size: 0,
            max_bytes: 0,
            max_requests: 0,
            worker_max: 0,
            reserved: 0,
        };
        b.set_limits(l, threads);
        b.size = (b.max_bytes / 16).max(MIN_REPLY);
        b
    }

    /// Takes the bounds of `l` (a reload's), keeping what its requests in
    /// flight reserved and the size its replies run to.
    pub fn set_limits(&mut self, l: &Limits, threads: usize) {
        self.max_bytes = l.client_max_bytes.max(MIN_REPLY);
        self.max_requests = l.client_max_requests.max(1);
        self.worker_max = l.total_max_bytes / threads.max(1);
    }

    /// Whether another request may be routed while `in_flight` are.
    pub fn room(&self, in_flight: usize) -> bool {
        if in_flight == 0 {
            return true;
        }
        let window = (self.max_bytes / self.size).clamp(1, self.max_requests);
        in_flight < window && RESERVED.with(Cell::get) + self.size <= self.worker_max
    }

    /// A request was routed; what it reserved.
    pub fn routed(&mut self) -> usize {
        let r = self.size;
        RESERVED.with(|t| t.set(t.get() + r));
        self.reserved += r;
        r
    }

    /// The reply of a request that reserved `r` was taken: `len` bytes.
    pub fn answered(&mut self, r: usize, len: usize) {
        RESERVED.with(|t| t.set(t.get().saturating_sub(r)));
        self.reserved = self.reserved.saturating_sub(r);
        self.size = len.max(self.size - self.size / 32).max(MIN_REPLY);
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        let r = self.reserved;
        RESERVED.with(|t| t.set(t.get().saturating_sub(r)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_follows_the_size_of_the_replies() {
        let l = Limits {
            client_max_bytes: 1 << 20,
            client_max_requests: 1024,
            total_max_bytes: 1 << 30,
        };
        let mut b = Budget::new(&l, 1);
        // A sixteenth of the bound before the first reply: 16 in flight.
        assert!(b.room(15) && !b.room(16));
        let r = b.routed();
        b.answered(r, 300 << 10);
        assert!(b.room(2) && !b.room(3), "1 MiB of 300 KiB replies");
        for _ in 0..1000 {
            let r = b.routed();
            b.answered(r, 10);
        }
        assert!(
            b.room(1023) && !b.room(1024),
            "small replies: the request bound"
        );
        // Nothing in flight: always one.
        let tiny = Limits {
            total_max_bytes: 0,
            ..l
        };
        assert!(Budget::new(&tiny, 1).room(0) && !Budget::new(&tiny, 1).room(1));
    }

    #[test]
    fn a_workers_total_bounds_its_clients_together_and_a_client_gone_frees_its_share() {
        let l = Limits {
            client_max_bytes: 1 << 20,
            client_max_requests: 1024,
            total_max_bytes: 4 << 20,
        };
        // Four clients of 16 requests of 64 KiB (their first size): 4 MiB.
        let mut full: Vec<Budget> = (0..4).map(|_| Budget::new(&l, 1)).collect();
        for b in &mut full {
            for _ in 0..16 {
                b.routed();
            }
        }
        let c = Budget::new(&l, 1);
        assert!(!c.room(1), "the worker's total is reached");
        assert!(c.room(0), "a client with nothing in flight sends one");
        drop(full);
        assert!(c.room(1));
        assert_eq!(RESERVED.with(Cell::get), 0);
    }
}
