//! How many of this worker's clients have no reply pending: the client
//! connections (`conn.rs`) count themselves in and out, and the backend
//! connections' writer (`backend/`) asks before writing, so neither
//! imports the other.

use std::cell::Cell;

thread_local! {
    /// This worker's clients with no reply pending: each may send a
    /// request before the event loop next looks at the sockets.
    static IDLE: Cell<usize> = const { Cell::new(0) };
}

/// Whether a client of this worker has no reply pending (backend.rs's
/// writer then waits for the event loop's next look before writing).
pub fn any() -> bool {
    IDLE.with(|c| c.get() > 0)
}

/// Counts `n` clients in (or out, negative).
pub fn add(n: isize) {
    IDLE.with(|c| c.set(c.get().saturating_add_signed(n)));
}
