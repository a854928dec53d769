//! Who sends the records the workers of an in-memory primary add to its
//! live replica streams: the worker whose batch of requests ends when a
//! frame is due (none sent for [`SEND_EVERY`]), or, for records that no
//! later batch comes to send, one thread per backlog after [`SEND_LATE`].
//!
//! A worker that wrote every frame itself (at the end of each round of its
//! loop) sent nearly one frame per set at a fixed 30,000 sets/s, and each frame
//! woke the replica's reader: a replica cost the primary 6.4 µs a set
//! where Redis's cost Redis 2.1. A thread that sent every frame, one per
//! interval, cost a sleep and two task switches a frame
//! (bench/results/2026-11-25-replication-lag.txt). Here a write after a
//! quiet spell leaves at once, sent by its worker; while writes keep
//! coming, the first batch to end after each interval sends everything
//! added since, on the worker that is running anyway; the thread only
//! wakes when records were left waiting, and sends them if no batch did
//! within [`SEND_LATE`] of the last frame.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::replication::backlog::Backlog;

/// A frame goes at most this often while records keep coming.
pub(crate) const SEND_EVERY: Duration = Duration::from_micros(200);

/// Records left waiting are sent by the thread when no frame went for
/// this long.
pub(crate) const SEND_LATE: Duration = Duration::from_micros(1000);

/// A backlog's sender thread, started by the first record it has to send.
#[derive(Debug, Default)]
pub(crate) struct Sender {
    /// Records were added that no frame has carried yet (set when a batch
    /// leaves them for later; the thread is unparked when it becomes set).
    dirty: AtomicBool,
    thread: OnceLock<Option<Thread>>,
    /// When records were last sent, in µs after `epoch`.
    sent_at: AtomicU64,
    epoch: OnceLock<Instant>,
}

impl Sender {
    /// Has the records added to `backlog` sent: here if a frame is due,
    /// else by a later batch or the thread. Without a thread (one could not
    /// be started), sends them here.
    pub(crate) fn send_soon(&self, backlog: &Arc<Backlog>) {
        let now = self.now();
        let last = self.sent_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= SEND_EVERY.as_micros() as u64
            && self
                .sent_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.send(backlog);
            return;
        }
        if self.dirty.swap(true, Ordering::SeqCst) {
            // The thread was told when the flag was set.
            return;
        }
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
            None => self.send(backlog),
        }
    }

    /// Sends everything added so far (what is added after the flag is
    /// cleared sets it again). A swap, not a store: it reads the flag
    /// another thread set after its record, so that record is seen by the
    /// flush.
    fn send(&self, backlog: &Backlog) {
        self.dirty.swap(false, Ordering::SeqCst);
        backlog.flush_directs();
    }

    /// Microseconds since the sender's epoch, from [`SEND_LATE`] on: at
    /// the start, a frame is due (`sent_at` is 0).
    fn now(&self) -> u64 {
        let epoch = self.epoch.get_or_init(Instant::now);
        epoch.elapsed().as_micros() as u64 + SEND_LATE.as_micros() as u64
    }

    /// Ends the thread: said by the backlog's drop, after which the thread's
    /// next look finds no backlog.
    pub(crate) fn stop(&self) {
        if let Some(Some(t)) = self.thread.get() {
            t.unpark();
        }
    }
}

fn run(backlog: &Weak<Backlog>) {
    loop {
        let Some(b) = backlog.upgrade() else { return };
        let sender = b.sender();
        // Parks when nothing waits: a batch that leaves records sets the
        // flag and unparks after this look, so the park returns at once.
        if !sender.dirty.load(Ordering::SeqCst) {
            drop(b);
            std::thread::park();
            continue;
        }
        let now = sender.now();
        let due = sender.sent_at.load(Ordering::Relaxed) + SEND_LATE.as_micros() as u64;
        if now < due {
            // A batch may send them meanwhile; look again then.
            drop(b);
            std::thread::sleep(Duration::from_micros(due - now));
            continue;
        }
        sender.sent_at.store(now, Ordering::Relaxed);
        sender.send(&b);
    }
}
