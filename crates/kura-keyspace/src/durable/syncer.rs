//! Syncing off the log thread: the `everysec` fsync runs on a thread of its
//! own, and what is known to be on disk is published from either thread.

use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use kura_log::LogEnd;
use tokio::sync::watch;

use super::log_thread::OnFailure;
use super::LogStats;

/// Publishes the last record known to be on disk; both the log thread and
/// the background syncer do, so it only ever moves forward.
pub(super) struct Synced {
    pub(super) tx: watch::Sender<u64>,
    pub(super) stats: Arc<LogStats>,
}

impl Synced {
    pub(super) fn publish(&self, last: u64) {
        self.stats.synced.fetch_max(last, Ordering::AcqRel);
        self.tx.send_if_modified(|s| {
            let newer = last > *s;
            if newer {
                *s = last;
            }
            newer
        });
    }
}

impl Synced {
    /// The log was replaced or cut back: its last record, on disk, is
    /// `last` (which may be lower than before).
    pub(super) fn restart(&self, last: u64) {
        self.stats.synced.store(last, Ordering::Release);
        self.tx.send_replace(last);
    }
}

/// The `everysec` fsync, on a thread of its own so that the log thread goes
/// on writing while the disk catches up (a sync of a second of large values
/// can take longer than a second).
pub(super) struct Syncer {
    tx: mpsc::Sender<(File, u64)>,
    busy: Arc<AtomicBool>,
}

impl Syncer {
    pub(super) fn start(
        synced: Arc<Synced>,
        end: LogEnd,
        on_failure: Arc<OnFailure>,
    ) -> std::io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<(File, u64)>();
        let busy = Arc::new(AtomicBool::new(false));
        let flag = busy.clone();
        std::thread::Builder::new()
            .name("kura-fsync".into())
            .spawn(move || {
                for (file, last) in rx {
                    let done = file.sync_data().map_err(|e| e.to_string());
                    if let Err(e) = done.and_then(|()| end.note(last).map_err(|e| e.to_string())) {
                        tracing::error!(
                            "fsync of the update log failed: {e}; what the log holds since the last good sync may not be on disk, so the server stops"
                        );
                        if let Some(stop) = on_failure.get() {
                            stop();
                        }
                        return;
                    }
                    synced.publish(last);
                    flag.store(false, Ordering::Release);
                }
            })?;
        Ok(Syncer { tx, busy })
    }

    /// Whether the last sync handed over is still running.
    pub(super) fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    pub(super) fn sync(&self, file: File, last: u64) {
        self.busy.store(true, Ordering::Release);
        let _ = self.tx.send((file, last));
    }
}
