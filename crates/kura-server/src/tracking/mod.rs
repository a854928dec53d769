//! Invalidation subscriptions (docs/protocol-extensions.md): after `mt`, a
//! connection hears `IV <key>` when a key it read changes, `IV *` when
//! everything may have. The registry (`registry.rs`) hears the store's
//! changes and queues the lines; [`Tracker`] is the connection's side:
//! the keys it tracks (at most [`TRACK_MAX`]) and draining its queue into
//! its output between replies.

mod registry;

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use registry::{put_line, Registry, Subscriber, QUEUE_MAX};

use crate::output::Output;

/// Keys one connection may track; reading one more forgets them all and
/// sends `IV *` (as Redis's tracking table does when full).
pub const TRACK_MAX: usize = 100_000;

const IV_ALL: &[u8] = b"IV *\r\n";

/// One connection's subscription.
pub struct Tracker {
    registry: Arc<Registry>,
    sub: Arc<Subscriber>,
    /// Every key registered for this connection (a superset: the registry
    /// drops a key when it changes, this set when it is forgotten).
    keys: HashSet<Box<[u8]>>,
}

impl Tracker {
    pub fn new(registry: Arc<Registry>) -> Tracker {
        let sub = registry.subscribe();
        Tracker {
            registry,
            sub,
            keys: HashSet::new(),
        }
    }

    /// What the connection waits on beside its socket.
    pub fn subscriber(&self) -> Arc<Subscriber> {
        self.sub.clone()
    }

    /// Called before `key` is read: from now on a change of `key` is heard,
    /// so a change after the read is never missed. True when the key was
    /// not tracked (a miss then calls [`Tracker::untrack`]).
    pub fn track(&mut self, key: &[u8]) -> bool {
        if !self.keys.contains(key) && self.keys.len() >= TRACK_MAX {
            self.forget_all();
            // After the replies so far: the client drops what they gave.
            self.sub.push_all();
        }
        let fresh = self.registry.track(key, &self.sub);
        if fresh && !self.keys.contains(key) {
            self.keys.insert(key.into());
        }
        fresh
    }

    /// A read of a key tracked just for it missed: nothing to invalidate.
    pub fn untrack(&mut self, key: &[u8]) {
        self.registry.forget(key, &self.sub);
        self.keys.remove(key);
    }

    fn forget_all(&mut self) {
        for k in self.keys.drain() {
            self.registry.forget(&k, &self.sub);
        }
    }

    /// Appends what is queued for this connection to `out` (at a reply
    /// boundary). A queue that overflowed becomes `IV *`, and every key
    /// is forgotten.
    pub fn drain(&mut self, out: &mut Output) {
        let (lines, overflowed) = {
            let mut q = self.sub.queue.lock().unwrap_or_else(|e| e.into_inner());
            (
                std::mem::take(&mut q.lines),
                std::mem::take(&mut q.overflowed),
            )
        };
        if overflowed {
            self.registry.overflows.fetch_add(1, Ordering::Relaxed);
            self.forget_all();
            out.extend_from_slice(IV_ALL);
        } else if !lines.is_empty() {
            out.extend_from_slice(&lines);
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.forget_all();
        self.registry.unsubscribe(&self.sub);
    }
}
