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
//! - With a journal directory all of this survives a restart: the file
//!   `rings.toml` there holds, per pool, the addresses its ring has had,
//!   those in it and those marked ([`Record`]), written at start and at
//!   each reload. A restarted proxy reads it as the configuration before
//!   its own: a backend that had left the ring is flushed when it is in
//!   it again, marks carry over, and a ring that changed while the proxy
//!   was stopped counts as a change of unknown moves (ch3's rule).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::router::{Node, Pool};

/// The file in the journal directory.
const FILE: &str = "rings.toml";

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

/// What a journal directory keeps of the pools' rings across a restart.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    #[serde(default)]
    pools: BTreeMap<String, PoolRecord>,
}

/// One ring pool's addresses.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolRecord {
    /// In its ring when written.
    #[serde(default)]
    ring: BTreeSet<String>,
    /// In its ring at some time since the record began, and not now.
    #[serde(default)]
    left: BTreeSet<String>,
    /// In its ring and marked: it lost keys by a reload and was not
    /// flushed since.
    #[serde(default)]
    lost_keys: BTreeSet<String>,
}

impl Record {
    /// The record in `dir` (empty when there is none; one that cannot be
    /// read is logged and taken as empty).
    pub fn load(dir: &Path) -> Record {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Record::default(),
            Err(e) => {
                tracing::error!(path = %path.display(), %e, "cannot read the rings' record");
                return Record::default();
            }
        };
        toml::from_str(&text).unwrap_or_else(|e| {
            tracing::error!(path = %path.display(), %e, "the rings' record is damaged: ignored");
            Record::default()
        })
    }

    /// The record of `pools` and `seen`.
    pub fn of(pools: &[Pool], seen: &Seen) -> Record {
        let mut r = Record::default();
        for p in pools.iter().filter(|p| p.ring().is_some()) {
            let ring: BTreeSet<String> = p.nodes.iter().map(|n| n.addr.clone()).collect();
            let left = seen
                .get(&p.name)
                .into_iter()
                .flatten()
                .filter(|a| !ring.contains(*a))
                .cloned()
                .collect();
            let lost_keys = p
                .nodes
                .iter()
                .filter(|n| n.lost_keys.load(Ordering::Acquire))
                .map(|n| n.addr.clone())
                .collect();
            let rec = PoolRecord {
                ring,
                left,
                lost_keys,
            };
            r.pools.insert(p.name.clone(), rec);
        }
        r
    }

    /// Writes it to `dir` (a new file renamed over the old).
    pub fn save(&self, dir: &Path) {
        let path = dir.join(FILE);
        let tmp = dir.join(format!("{FILE}.tmp"));
        let written = std::fs::create_dir_all(dir)
            .and_then(|()| toml::to_string(self).map_err(std::io::Error::other))
            .and_then(|text| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::error!(path = %path.display(), %e, "cannot write the rings' record");
        }
    }

    /// The addresses each pool's ring has had, as recorded.
    pub fn seen(&self) -> Seen {
        self.pools
            .iter()
            .map(|(name, p)| (name.clone(), p.ring.union(&p.left).cloned().collect()))
            .collect()
    }

    /// Flushes and marks the backends of a restarted proxy's `pools` as
    /// [`reloaded`] would from the recorded rings: one that had left its
    /// pool's ring is flushed, marks carry over, and a ring whose servers
    /// changed meanwhile counts as a change of unknown moves.
    pub fn restarted(&self, pools: &[Pool]) {
        for pool in pools.iter().filter(|p| p.ring().is_some()) {
            let Some(rec) = self.pools.get(&pool.name) else {
                continue;
            };
            let now: BTreeSet<&String> = pool.nodes.iter().map(|n| &n.addr).collect();
            let changed = now != rec.ring.iter().collect::<BTreeSet<_>>();
            for n in &pool.nodes {
                if rec.left.contains(&n.addr) {
                    tracing::warn!(server = %n.addr, pool = %pool.name, "back in the pool's ring since it left it before the restart: flushed before it serves");
                    n.journal_everything();
                    continue;
                }
                if !rec.ring.contains(&n.addr) {
                    continue;
                }
                let marked = rec.lost_keys.contains(&n.addr);
                if changed && marked {
                    tracing::warn!(server = %n.addr, pool = %pool.name, "may get back keys it lost before the restart: flushed before it serves");
                    n.journal_everything();
                } else if changed || marked {
                    n.lost_keys.store(true, Ordering::Release);
                }
            }
        }
    }
}
