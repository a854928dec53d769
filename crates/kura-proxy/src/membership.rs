//! What a reload's ring changes mean for the backends (issue 43). The
//! journal covers a backend's absence while it is down; an absence from a
//! ring is covered here, the same way as a journal that overflowed (the
//! backend may hold anything): it is flushed before it serves again
//! (`journal_overflow = "keep-out"`: kept out until the operator lets it
//! in).
//!
//! - A backend that enters a pool's ring again by reload (removed by an
//!   earlier one, or replaced and put back) may hold values of that pool's
//!   keys from before: it is flushed. One new to the pool (since the
//!   proxy started) serves at once: it may be another cluster's server,
//!   not the proxy's to flush.
//! - A backend that stays may lose keys to others (a server added) and
//!   get them back later (that server removed), still holding the values
//!   they had when it lost them. It is marked when it loses keys, and
//!   flushed when a later reload gives it keys while it is marked; a
//!   flush clears the mark. kura-ring's [`kura_ring::Ring::moves`] says
//!   which servers take keys from which (exactly for the continuum rings
//!   and jump; for ch3 every server is taken to gain and lose).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::router::{Node, Pool};

/// The addresses each pool's ring has had since the proxy started.
pub type Seen = HashMap<String, HashSet<String>>;

/// `seen` with the addresses of `pools` added.
pub fn seen(mut seen: Seen, pools: &[Pool]) -> Seen {
    for p in pools.iter().filter(|p| p.ring().is_some()) {
        let addrs = seen.entry(p.name.clone()).or_default();
        addrs.extend(p.nodes.iter().map(|n| n.addr.clone()));
    }
    seen
}

/// Flushes and marks the backends of `new`'s ring pools as the change from
/// `old`'s pools of the same names asks; `seen` says which addresses each
/// pool had before.
pub fn reloaded(old: &[Pool], seen: &Seen, new: &[Pool]) {
    for pool in new {
        let Some(ring) = pool.ring() else { continue };
        let before = old
            .iter()
            .find(|p| p.name == pool.name && p.ring().is_some());
        let unchanged = before.and_then(Pool::ring).is_some_and(|r| {
            r.kind() == ring.kind()
                && r.servers() == ring.servers()
                && r.key_part() == ring.key_part()
        });
        if unchanged {
            continue;
        }
        let moves = before.and_then(|b| b.ring()?.moves(ring));
        for n in &pool.nodes {
            let Some(before) = before.filter(|b| b.nodes.iter().any(|x| Arc::ptr_eq(x, n))) else {
                if seen.get(&pool.name).is_some_and(|s| s.contains(&n.addr)) {
                    tracing::warn!(server = %n.addr, pool = %pool.name, "back in the pool's ring by a reload: flushed before it serves");
                    n.journal_everything();
                }
                continue;
            };
            let is =
                |nodes: &[Arc<Node>], i: usize| nodes.get(i).is_some_and(|x| Arc::ptr_eq(x, n));
            let (gains, loses) = match &moves {
                Some(m) => (
                    m.iter()
                        .any(|&(i, j)| is(&pool.nodes, j) && !is(&before.nodes, i)),
                    m.iter()
                        .any(|&(i, j)| is(&before.nodes, i) && !is(&pool.nodes, j)),
                ),
                None => (true, true),
            };
            if gains && n.lost_keys.load(Ordering::Acquire) {
                tracing::warn!(server = %n.addr, pool = %pool.name, "gets back keys it lost by an earlier reload: flushed before it serves");
                n.journal_everything();
            }
            if loses {
                n.lost_keys.store(true, Ordering::Release);
            }
        }
    }
}
