//! The sender: one thread per backlog that writes the records the
//! workers of an in-memory primary add to its live replica streams, at
//! most once every [`SEND_EVERY`].
//!
//! A worker that wrote every frame itself (primary/direct.rs's round task)
//! sent nearly one frame per set at a fixed 30,000 sets/s, and each frame
//! woke the replica's reader: a replica cost the primary 6.4 µs a set
//! where Redis's cost Redis 2.1. Here a write after a quiet spell still
//! leaves at once (sent by its worker), and while writes
//! keep coming they leave together, one frame per interval, whatever the
//! number of workers; the workers only set a flag (and unpark the thread
//! when it sleeps). The lag this adds is at most one interval, unless the
//! thread does not get a CPU: on a machine whose cores the workers keep
//! busy it may wait a time slice, so a worker that finds nothing sent for
//! [`SEND_LATE`] sends itself (as it does after a quiet spell, without
//! waking the thread).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::replication::backlog::Backlog;

/// A frame goes at most this often while records keep coming.
pub(crate) const SEND_EVERY: Duration = Duration::from_micros(200);

/// A worker sends itself when nothing was sent for this long.
pub(crate) const SEND_LATE: Duration = Duration::from_micros(500);

/// A backlog's sender thread, started by the first record it has to send.
#[derive(Debug, Default)]
pub(crate) struct Sender {
    /// Records were added since the thread last sent.
    dirty: AtomicBool,
    /// Set when the backlog goes: the thread ends.
    stopped: AtomicBool,
    thread: OnceLock<Option<Thread>>,
    /// When records were last sent, in µs after `epoch`.
    sent_at: AtomicU64,
    epoch: OnceLock<Instant>,
}

impl Sender {
    /// Has the records added to `backlog` sent soon (at once if nothing was
    /// sent for an interval). Without a thread (one could not be started),
    /// sends them here.
    pub(crate) fn send_soon(&self, backlog: &Arc<Backlog>) {
        let now = self.now();
        if now.saturating_sub(self.sent_at.load(Ordering::Relaxed)) >= SEND_LATE.as_micros() as u64
        {
            // A quiet spell, or the thread is starved: send from here.
            self.sent_at.store(now, Ordering::Relaxed);
            backlog.flush_directs();
            return;
        }
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

    /// Microseconds since the sender's epoch.
    fn now(&self) -> u64 {
        let epoch = self.epoch.get_or_init(Instant::now);
        epoch.elapsed().as_micros() as u64
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
        sender.sent_at.store(sender.now(), Ordering::Relaxed);
        b.flush_directs();
        drop(b);
        std::thread::sleep(SEND_EVERY);
    }
}
