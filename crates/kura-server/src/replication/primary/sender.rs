//! The sender: one thread per backlog that writes the records the
//! workers of an in-memory primary add to its live replica streams, at
//! most once every [`SEND_EVERY`].
//!
//! A worker that wrote every frame itself (primary/direct.rs's round task)
//! sent nearly one frame per set at a fixed 30,000 sets/s, and each frame
//! woke the replica's reader: a replica cost the primary 6.4 µs a set
//! where Redis's cost Redis 2.1. Here a write after a quiet spell still
//! leaves at once (the thread is parked and unparked), and while writes
//! keep coming they leave together, one frame per interval, whatever the
//! number of workers; the workers only set a flag (and unpark the thread
//! when it sleeps). The lag this adds is at most one interval.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

use crate::replication::backlog::Backlog;

/// A frame goes at most this often while records keep coming.
pub(crate) const SEND_EVERY: Duration = Duration::from_micros(200);

/// A backlog's sender thread, started by the first record it has to send.
#[derive(Debug, Default)]
pub(crate) struct Sender {
    /// Records were added since the thread last sent.
    dirty: AtomicBool,
    /// Set when the backlog goes: the thread ends.
    stopped: AtomicBool,
    thread: OnceLock<Option<Thread>>,
}

impl Sender {
    /// Has the records added to `backlog` sent soon (at once if nothing was
    /// sent for an interval). Without a thread (one could not be started),
    /// sends them here.
    pub(crate) fn send_soon(&self, backlog: &Arc<Backlog>) {
        self.dirty.store(true, Ordering::SeqCst);
        let thread = self.thread.get_or_init(|| {
            let weak = Arc::downgrade(backlog);
            std::thread::Builder::new()
                .name("kura-repl-send".into())
                .spawn(move || run(&weak))
                .map_err(|e| tracing::warn!("no replication sender thread ({e}): workers send"))
                .ok()
                .map(|h| h.thread().clone())
        });
        match thread {
            Some(t) => t.unpark(),
            None => {
                self.dirty.store(false, Ordering::SeqCst);
                backlog.flush_directs();
            }
        }
    }

    /// Ends the thread (its backlog is going).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(Some(t)) = self.thread.get() {
            t.unpark();
        }
    }
}

fn run(backlog: &Weak<Backlog>) {
    loop {
        let Some(b) = backlog.upgrade() else { return };
        let sender = b.sender();
        if sender.stopped.load(Ordering::SeqCst) {
            return;
        }
        // Taken before the look: a worker that adds after it sets the flag
        // and unparks, so the park below returns at once.
        if !sender.dirty.swap(false, Ordering::SeqCst) {
            drop(b);
            std::thread::park();
            continue;
        }
        b.flush_directs();
        drop(b);
        std::thread::sleep(SEND_EVERY);
    }
}
