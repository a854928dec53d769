//! `mt [on|off]`: kura's invalidation subscription for this connection
//! (docs/protocol-extensions.md). The first subscription of a server makes
//! the registry observe the store; until then a server pays nothing.

use std::sync::Arc;

use super::Session;
use crate::tracking::Tracker;

pub(super) fn run(s: &mut Session<'_>, on: bool) {
    if on {
        if s.tracking.is_none() {
            let sh = s.shared;
            sh.tracking_observed.call_once(|| {
                sh.store.observe(sh.tracking.clone());
            });
            s.tracking = Some(Box::new(Tracker::new(Arc::clone(&sh.tracking))));
        }
    } else {
        // Dropping the tracker forgets its keys and what it had queued.
        s.tracking = None;
    }
    s.out.extend_from_slice(b"HD\r\n");
}

/// Before a read of `key` on a tracking connection: see [`Tracker::track`].
#[inline]
pub(super) fn before_read(s: &mut Session<'_>, key: &[u8]) -> bool {
    match s.tracking.as_mut() {
        Some(t) => t.track(key),
        None => false,
    }
}

/// After that read: a miss of a key tracked only for it is forgotten.
#[inline]
pub(super) fn after_read(s: &mut Session<'_>, key: &[u8], fresh: bool, hit: bool) {
    if fresh && !hit {
        if let Some(t) = s.tracking.as_mut() {
            t.untrack(key);
        }
    }
}
