//! Eviction policies. A shard tells its policy about every entry it links,
//! reads and unlinks, by id, and asks it for the next victim when it is
//! over its memory limit. A policy keeps its per-entry state in the entry
//! (a byte and two links, through [`Entries`]) and its own queue ends,
//! ghosts or sketch, so a new policy is one new file here and one variant
//! of [`Policy`]; the shards do not change.
//!
//! * [`Lru`]: exact least-recently-used, the reference.
//! * [`TinyLfu`]: W-TinyLFU, an LRU window, a segmented LRU main space and
//!   a frequency sketch that admits a newcomer only if it is more popular
//!   than the entry it would displace. Scan-resistant.
//! * [`S3Fifo`]: small, main and ghost FIFO queues. Scan-resistant; reads
//!   only bump a counter.
//! * [`Sieve`]: one FIFO queue with a visited bit and a moving hand.
//!
//! bench/results/history.md compares them on the ARC paper's traces.

use std::collections::VecDeque;
use std::sync::atomic::AtomicU8;

mod ghost;
mod list;
mod lru;
mod s3fifo;
mod sieve;
mod sketch;
mod slots;
mod tinylfu;
mod vec_entries;

pub use lru::Lru;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;
pub use tinylfu::TinyLfu;
pub use vec_entries::VecEntries;

/// Where a policy keeps its state for each entry: in the entry itself (an
/// item block's policy byte and two link words, see item.rs), so a policy
/// costs no memory per entry of its own. Entries are named by `u32` ids (a
/// shard's block offsets). [`VecEntries`] keeps the same state in vectors,
/// to drive a policy outside a store.
pub trait Entries {
    /// The entry's policy byte: atomic, so that reads under a shared lock
    /// can note themselves ([`EvictionPolicy::touch_shared`]).
    fn byte(&self, id: u32) -> &AtomicU8;
    /// The entry's two links (towards the newer and the older neighbour).
    fn links(&self, id: u32) -> [u32; 2];
    fn set_links(&mut self, id: u32, links: [u32; 2]);
    /// The hash of the entry's key.
    fn hash(&self, id: u32) -> u64;
    /// Positions in the hash index of the linked entries, for a policy
    /// whose hand walks the index ([`S3Fifo`]'s main queue): positions run
    /// in hash order, some empty.
    fn positions(&self) -> usize;
    /// The entry at index position `pos`, if one is there.
    fn at(&self, pos: usize) -> Option<u32>;
}

/// The contract between a shard and its eviction order.
///
/// An id is live from `insert` until `remove` (or until `replace` hands its
/// place to another id); the shard calls the methods under its lock, never
/// twice `insert` for a live id, and only with ids it has inserted. `hash`
/// is the entry's key hash, for policies that remember keys beyond the life
/// of their entries (a frequency sketch, a ghost queue); equal keys give
/// equal hashes. `victim` must return a live id (or `None` when the policy
/// tracks no entry) and must not forget it: the shard calls `remove` for it
/// when it unlinks the entry, but may also leave it linked (when eviction
/// is off, for instance) and ask again later.
pub trait EvictionPolicy: Send + Sync {
    /// Entry `id` was linked.
    fn insert<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64);
    /// Entry `id` was read or updated.
    fn touch<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64);
    /// Entry `id` was read, and the shard holds its lock shared: record
    /// the read if that needs no exclusive access (an atomic bit or counter
    /// in the entry's byte) and return true; return false, changing
    /// nothing, if it needs [`touch`](Self::touch). Readers may call this
    /// concurrently.
    fn touch_shared<E: Entries>(&self, e: &E, id: u32) -> bool {
        let _ = (e, id);
        false
    }
    /// Entry `id` was unlinked.
    fn remove<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64);
    /// Entry `new` (not inserted) takes the place of live entry `old` (a new
    /// version of the same key), with its state; `old` is forgotten.
    fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32);
    /// The entry to evict next.
    fn victim<E: Entries>(&mut self, e: &mut E) -> Option<u32>;
    /// Forget every entry.
    fn clear(&mut self);
    /// Bytes the policy holds outside the entries now, in allocations whose
    /// size it can tell (charged per entry: [`EvictionKind::entry_bytes`]);
    /// 0 for policies that do not say.
    fn outside_bytes(&self) -> usize {
        0
    }
}

/// A 32-bit fingerprint of a key hash, well mixed whichever bits of the
/// hash vary (a shard's keys share the bits that chose the shard).
#[inline]
pub(crate) fn fingerprint(hash: u64) -> u32 {
    let h = (hash ^ (hash >> 31)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (h >> 32) as u32 ^ h as u32
}

/// Appends `x` to `q`, growing it by a quarter when full rather than
/// doubling it: for the queues outside the entries (S3-FIFO's ghost and
/// ring), whose spare room is charged to every entry.
pub(crate) fn push_back_sparing<T>(q: &mut VecDeque<T>, x: T) {
    if q.len() == q.capacity() {
        q.reserve_exact(q.len() / 4 + 16);
    }
    q.push_back(x);
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

    /// Whether the policy keeps links in each entry's block (list-based
    /// policies); [`S3Fifo`] keeps none.
    pub(crate) fn links(self) -> bool {
        self != EvictionKind::S3Fifo
    }

    /// Bytes per entry the policy keeps outside the entries (a ghost
    /// queue, a frequency sketch), charged to each entry against the memory
    /// limit with the store's own bookkeeping. The byte and links in each
    /// entry are part of its block.
    pub fn entry_bytes(self) -> usize {
        match self {
            EvictionKind::Lru | EvictionKind::Sieve => 0,
            // Its share of the ghost (about 1.44 fingerprints, at 4.6-6.4
            // bytes in its one table) and of the small queue's ring (4-byte
            // ids for a tenth of the entries, with the ring's slack): 8.1
            // to 10.2 measured, depending on where the entry count falls in
            // the tables' growth (tests/policy_memory.rs with capacities of
            // 14 to 19 MB). It was 19 (15.0 to 18.5) with 8-byte ids and a
            // ghost of a queue and a set.
            EvictionKind::S3Fifo => 11,
            // Up to 16 sketch bytes and 2 doorkeeper bytes.
            EvictionKind::TinyLfu => 18,
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

    /// The kind of this policy.
    pub fn kind(&self) -> EvictionKind {
        match self {
            Policy::Lru(_) => EvictionKind::Lru,
            Policy::TinyLfu(_) => EvictionKind::TinyLfu,
            Policy::S3Fifo(_) => EvictionKind::S3Fifo,
            Policy::Sieve(_) => EvictionKind::Sieve,
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
    fn insert<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        dispatch!(self, p => p.insert(e, id, hash))
    }
    #[inline]
    fn touch<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        dispatch!(self, p => p.touch(e, id, hash))
    }
    #[inline]
    fn touch_shared<E: Entries>(&self, e: &E, id: u32) -> bool {
        dispatch!(self, p => p.touch_shared(e, id))
    }
    #[inline]
    fn remove<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        dispatch!(self, p => p.remove(e, id, hash))
    }
    #[inline]
    fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32) {
        dispatch!(self, p => p.replace(e, old, new))
    }
    #[inline]
    fn victim<E: Entries>(&mut self, e: &mut E) -> Option<u32> {
        dispatch!(self, p => p.victim(e))
    }
    fn clear(&mut self) {
        dispatch!(self, p => p.clear())
    }
    fn outside_bytes(&self) -> usize {
        dispatch!(self, p => p.outside_bytes())
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
    /// are live, replacements keep their place, and draining through
    /// victims empties the policy.
    #[test]
    fn every_policy_keeps_the_contract() {
        use std::collections::BTreeSet;
        for kind in EvictionKind::ALL {
            let mut p = Policy::new(kind);
            let mut e = VecEntries::default();
            let mut live = BTreeSet::new();
            let mut x: u64 = 0x2545_f491_4f6c_dd1d;
            let h = |id: u32| u64::from(id % 300).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for step in 0..crate::testing::size(20_000, 1_000) as u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = (x % 512) as u32;
                match x >> 60 {
                    0..=5 if !live.contains(&id) => {
                        e.reset(id, h(id));
                        p.insert(&mut e, id, h(id));
                        live.insert(id);
                    }
                    0..=8 if live.contains(&id) => p.touch(&mut e, id, h(id)),
                    9 if live.contains(&id) => {
                        let new = 512 + (x >> 32) as u32 % 512;
                        if !live.contains(&new) {
                            e.relink(id, new, h(id));
                            p.replace(&mut e, id, new);
                            live.remove(&id);
                            live.insert(new);
                        }
                    }
                    10..=11 if live.contains(&id) => {
                        p.remove(&mut e, id, h(id));
                        e.unlink(id);
                        live.remove(&id);
                    }
                    _ if live.is_empty() => assert_eq!(p.victim(&mut e), None, "{kind}"),
                    _ if live.len() > 300 || step % 7 == 0 => {
                        let v = p.victim(&mut e).expect("a victim while entries are live");
                        assert!(live.contains(&v), "{kind}: victim {v} is not live");
                        if step % 3 != 0 {
                            p.remove(&mut e, v, h(v));
                            e.unlink(v);
                            live.remove(&v);
                        }
                    }
                    _ => {}
                }
            }
            while let Some(v) = p.victim(&mut e) {
                assert!(live.remove(&v), "{kind}: victim {v} is not live");
                p.remove(&mut e, v, h(v));
                e.unlink(v);
            }
            assert!(
                live.is_empty(),
                "{kind}: {} entries never offered",
                live.len()
            );
        }
    }
}
