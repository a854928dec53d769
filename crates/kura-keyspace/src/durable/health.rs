//! Whether the update log can be written. When a write to it fails (a full
//! disk, a quota, an I/O error), the log thread keeps the records it could
//! not write and tries again every second; meanwhile the server refuses
//! requests that would change data, with an error that says why (kura-server's `SERVER_ERROR`), and
//! goes on serving reads, as Redis refuses writes after a failed save. An
//! fsync that fails is different: what was written since the last good one
//! may not be on disk whatever the file reads back, so the server stops,
//! with a non-zero exit status.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;

/// The log's health, shared by the log thread and the connections.
#[derive(Debug)]
pub struct Health {
    refusing: AtomicBool,
    /// Why the last write to the log failed.
    reason: Mutex<Option<String>>,
    changed: watch::Sender<bool>,
    failed: AtomicBool,
    write_errors: AtomicU64,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            refusing: AtomicBool::new(false),
            reason: Mutex::new(None),
            changed: watch::Sender::new(false),
            failed: AtomicBool::new(false),
            write_errors: AtomicU64::new(0),
        }
    }
}

impl Health {
    /// A write to the log failed with `error`: refuse changes until it works.
    pub(super) fn refuse(&self, error: &str) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        *self.reason.lock() = Some(error.to_string());
        self.refusing.store(true, Ordering::Release);
        self.changed.send_replace(true);
    }

    /// The log was written again.
    pub(super) fn recover(&self) {
        self.refusing.store(false, Ordering::Release);
        self.changed.send_replace(false);
    }

    /// The log thread stopped on an error it cannot get past.
    pub(super) fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.refusing.store(true, Ordering::Release);
        self.changed.send_replace(true);
    }

    /// Whether requests that change data are refused now.
    #[inline]
    pub fn refusing(&self) -> bool {
        self.refusing.load(Ordering::Acquire)
    }

    /// Why the last write to the log failed (none if the log thread
    /// stopped without one failing).
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().clone()
    }

    /// Whether the log thread stopped on an error (the server's exit
    /// status says so).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Writes to the log that failed so far.
    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }

    /// Resolves once changes are refused.
    pub(super) async fn refused(&self) {
        let mut rx = self.changed.subscribe();
        let _ = rx.wait_for(|&r| r).await;
    }
}
