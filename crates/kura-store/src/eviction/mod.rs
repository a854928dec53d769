//! Eviction policies. A shard tells its policy about every entry it links,
//! reads and unlinks, by slot index, and asks it for the next victim when
//! it is over its memory limit. A policy keeps its own per-entry state
//! indexed by slot, so a new policy is one new file here and one variant of
//! [`Policy`]; the shards do not change.
//!
//! * [`Lru`]: exact least-recently-used, the reference.
//! * [`TinyLfu`]: W-TinyLFU, an LRU window, a segmented LRU main space and
//!   a frequency sketch that admits a newcomer only if it is more popular
//!   than the entry it would displace. Scan-resistant.
//! * [`S3Fifo`]: small, main and ghost FIFO queues. Scan-resistant; reads
//!   only bump a counter.
//! * [`Sieve`]: one FIFO queue with a visited bit and a moving hand.
//!
//! BENCHMARKS.md compares them on the ARC paper's traces.

mod list;
mod lru;
mod s3fifo;
mod sieve;
mod sketch;
mod tinylfu;

pub use lru::Lru;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;
pub use tinylfu::TinyLfu;

/// The contract between a shard and its eviction order.
///
/// A slot index is live from `insert` until `remove`; the shard calls the
/// methods under its lock, never twice `insert` for a live index, and only
/// with indices it has inserted. `victim` must return a live index (or
/// `None` when the policy tracks no entry) and must not forget it: the shard
/// calls `remove` for it when it unlinks the entry, but may also leave it
/// linked (when eviction is off, for instance) and ask again later.
pub trait EvictionPolicy: Send + Sync {
    /// Entry `idx` was linked; `hash` is its key's hash, for policies that
    /// remember keys beyond the life of their entries (a frequency sketch, a
    /// ghost queue). Equal keys must give equal hashes.
    fn insert(&mut self, idx: u32, hash: u64);
    /// Entry `idx` was read or updated.
    fn touch(&mut self, idx: u32);
    /// Entry `idx` was read, and the shard holds its lock shared: record
    /// the read if that needs no exclusive access (an atomic bit or counter)
    /// and return true; return false, changing nothing, if it needs
    /// [`touch`](Self::touch). Readers may call this concurrently.
    fn touch_shared(&self, idx: u32) -> bool {
        let _ = idx;
        false
    }
    /// Entry `idx` was unlinked.
    fn remove(&mut self, idx: u32);
    /// The entry to evict next.
    fn victim(&mut self) -> Option<u32>;
    /// Forget every entry.
    fn clear(&mut self);
}

/// A 32-bit fingerprint of a key hash, well mixed whichever bits of the
/// hash vary (a shard's keys share the bits that chose the shard).
#[inline]
pub(crate) fn fingerprint(hash: u64) -> u32 {
    let h = (hash ^ (hash >> 31)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (h >> 32) as u32 ^ h as u32
}

/// Which policy a store uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EvictionKind {
    /// Exact least-recently-used, per shard.
    #[default]
    Lru,
    /// W-TinyLFU: LRU window, segmented LRU main space, frequency-based
    /// admission.
    TinyLfu,
    /// S3-FIFO: small, main and ghost FIFO queues.
    S3Fifo,
    /// SIEVE: a FIFO queue with visited bits.
    Sieve,
}

impl EvictionKind {
    /// Every policy, in the order `--help` lists them.
    pub const ALL: [EvictionKind; 4] = [
        EvictionKind::Lru,
        EvictionKind::TinyLfu,
        EvictionKind::S3Fifo,
        EvictionKind::Sieve,
    ];

    /// The name `from_str` accepts and `stats settings` shows.
    pub fn name(self) -> &'static str {
        match self {
            EvictionKind::Lru => "lru",
            EvictionKind::TinyLfu => "tinylfu",
            EvictionKind::S3Fifo => "s3fifo",
            EvictionKind::Sieve => "sieve",
        }
    }

    /// Bytes of per-entry state the policy keeps, charged to each entry
    /// against the memory limit (with the store's own bookkeeping). Counts
    /// the state kept per slot and, for the scan-resistant policies, their
    /// share of the ghost queue or frequency sketch.
    pub(crate) fn entry_bytes(self) -> usize {
        match self {
            EvictionKind::Lru => 8,
            EvictionKind::Sieve => 12,
            // Node (16) and its share of the ghost queue: about 1.4
            // fingerprints at about 10 bytes each (queue and set).
            EvictionKind::S3Fifo => 32,
            // Node (16), up to 16 sketch bytes and 2 doorkeeper bytes.
            EvictionKind::TinyLfu => 32,
        }
    }
}

impl std::fmt::Display for EvictionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EvictionKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EvictionKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let known: Vec<_> = EvictionKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown eviction policy '{s}' (known: {})",
                    known.join(", ")
                )
            })
    }
}

/// The policy of one shard: the store dispatches through this enum rather
/// than a trait object, so calls inline.
#[derive(Debug)]
pub enum Policy {
    Lru(Lru),
    TinyLfu(TinyLfu),
    S3Fifo(S3Fifo),
    Sieve(Sieve),
}

impl Policy {
    /// An empty policy of the given kind.
    pub fn new(kind: EvictionKind) -> Policy {
        match kind {
            EvictionKind::Lru => Policy::Lru(Lru::default()),
            EvictionKind::TinyLfu => Policy::TinyLfu(TinyLfu::default()),
            EvictionKind::S3Fifo => Policy::S3Fifo(S3Fifo::default()),
            EvictionKind::Sieve => Policy::Sieve(Sieve::default()),
        }
    }
}

/// Forwards a call to the policy inside.
macro_rules! dispatch {
    ($self:ident, $p:ident => $call:expr) => {
        match $self {
            Policy::Lru($p) => $call,
            Policy::TinyLfu($p) => $call,
            Policy::S3Fifo($p) => $call,
            Policy::Sieve($p) => $call,
        }
    };
}

impl EvictionPolicy for Policy {
    #[inline]
    fn insert(&mut self, idx: u32, hash: u64) {
        dispatch!(self, p => p.insert(idx, hash))
    }
    #[inline]
    fn touch(&mut self, idx: u32) {
        dispatch!(self, p => p.touch(idx))
    }
    #[inline]
    fn touch_shared(&self, idx: u32) -> bool {
        dispatch!(self, p => p.touch_shared(idx))
    }
    #[inline]
    fn remove(&mut self, idx: u32) {
        dispatch!(self, p => p.remove(idx))
    }
    #[inline]
    fn victim(&mut self) -> Option<u32> {
        dispatch!(self, p => p.victim())
    }
    fn clear(&mut self) {
        dispatch!(self, p => p.clear())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in EvictionKind::ALL {
            assert_eq!(kind.name().parse::<EvictionKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        let err = "arc".parse::<EvictionKind>().unwrap_err();
        assert!(err.contains("lru, tinylfu, s3fifo, sieve"), "{err}");
    }

    /// Every policy honours the contract on a random mix of calls: victims
    /// are live, and draining through victims empties the policy.
    #[test]
    fn every_policy_keeps_the_contract() {
        use std::collections::BTreeSet;
        for kind in EvictionKind::ALL {
            let mut p = Policy::new(kind);
            let mut live = BTreeSet::new();
            let mut x: u64 = 0x2545_f491_4f6c_dd1d;
            for step in 0..20_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let idx = (x % 512) as u32;
                match x >> 60 {
                    0..=5 if !live.contains(&idx) => {
                        p.insert(idx, (x >> 20) % 2048);
                        live.insert(idx);
                    }
                    0..=9 if live.contains(&idx) => p.touch(idx),
                    10..=11 if live.contains(&idx) => {
                        p.remove(idx);
                        live.remove(&idx);
                    }
                    _ if live.is_empty() => assert_eq!(p.victim(), None, "{kind}"),
                    _ if live.len() > 300 || step % 7 == 0 => {
                        let v = p.victim().expect("a victim while entries are live");
                        assert!(live.contains(&v), "{kind}: victim {v} is not live");
                        if step % 3 != 0 {
                            p.remove(v);
                            live.remove(&v);
                        }
                    }
                    _ => {}
                }
            }
            while let Some(v) = p.victim() {
                assert!(live.remove(&v), "{kind}: victim {v} is not live");
                p.remove(v);
            }
            assert!(
                live.is_empty(),
                "{kind}: {} entries never offered",
                live.len()
            );
        }
    }
}
