//! The background reaper: a thread that sweeps the store for expired
//! entries so their memory is reclaimed even if nobody asks for them, and a
//! cache full of expired entries does not evict live ones first.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::store::Store;

/// Slots examined per lock hold, so a sweep never blocks a shard for long.
const BATCH: usize = 256;

/// A running reaper; dropping it stops the thread.
#[derive(Debug)]
pub struct Reaper {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Reaper {
    /// Starts sweeping `store` every `interval`. The thread holds only a
    /// weak reference and ends when the store is dropped.
    pub fn spawn(store: &Arc<Store>, interval: Duration) -> Reaper {
        let weak: Weak<Store> = Arc::downgrade(store);
        let (tx, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("kura-reaper".into())
            .spawn(move || loop {
                match rx.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                let Some(store) = weak.upgrade() else { return };
                store.reap(BATCH);
            })
            .ok();
        Reaper {
            stop: Some(tx),
            thread,
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
