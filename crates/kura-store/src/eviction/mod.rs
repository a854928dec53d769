//! Eviction policies. A shard tells its policy about every entry it links,
//! reads and unlinks, by slot index, and asks it for the next victim when
//! it is over its memory limit. A policy keeps its own per-entry state
//! indexed by slot, so a new policy is one new file here and one variant of
//! [`Policy`]; the shards do not change.

mod lru;

pub use lru::Lru;

/// The contract between a shard and its eviction order.
///
/// A slot index is live from `insert` until `remove`; the shard calls the
/// methods under its lock, never twice `insert` for a live index, and only
/// with indices it has inserted. `victim` must return a live index (or
/// `None` when the policy tracks no entry) and must not forget it: the shard
/// calls `remove` for it when it unlinks the entry.
pub trait EvictionPolicy: Send {
    /// Entry `idx` was linked.
    fn insert(&mut self, idx: u32);
    /// Entry `idx` was read or updated.
    fn touch(&mut self, idx: u32);
    /// Entry `idx` was unlinked.
    fn remove(&mut self, idx: u32);
    /// The entry to evict next.
    fn victim(&mut self) -> Option<u32>;
    /// Forget every entry.
    fn clear(&mut self);
}

/// Which policy a store uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EvictionKind {
    /// Exact least-recently-used, per shard.
    #[default]
    Lru,
}

impl std::str::FromStr for EvictionKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lru" => Ok(EvictionKind::Lru),
            other => Err(format!("unknown eviction policy '{other}' (known: lru)")),
        }
    }
}

/// The policy of one shard.
#[derive(Debug)]
pub(crate) enum Policy {
    Lru(Lru),
}

impl Policy {
    pub(crate) fn new(kind: EvictionKind) -> Policy {
        match kind {
            EvictionKind::Lru => Policy::Lru(Lru::default()),
        }
    }
}

impl EvictionPolicy for Policy {
    #[inline]
    fn insert(&mut self, idx: u32) {
        match self {
            Policy::Lru(p) => p.insert(idx),
        }
    }
    #[inline]
    fn touch(&mut self, idx: u32) {
        match self {
            Policy::Lru(p) => p.touch(idx),
        }
    }
    #[inline]
    fn remove(&mut self, idx: u32) {
        match self {
            Policy::Lru(p) => p.remove(idx),
        }
    }
    #[inline]
    fn victim(&mut self) -> Option<u32> {
        match self {
            Policy::Lru(p) => p.victim(),
        }
    }
    fn clear(&mut self) {
        match self {
            Policy::Lru(p) => p.clear(),
        }
    }
}
