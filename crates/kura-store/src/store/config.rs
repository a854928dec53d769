//! How a [`Store`](super::Store) is built: its memory limit, shards,
//! eviction policy and memcached's `-M`, `-C` and `-L` switches.

use crate::eviction::EvictionKind;

/// How a [`Store`] is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreConfig {
    /// The memory limit in bytes, counting keys, values and per-entry
    /// bookkeeping. Default 64 MiB (memcached's `-m 64`).
    pub capacity: usize,
    /// Number of shards, rounded up to a power of two; 0 picks
    /// [`default_shards`] for the machine's parallelism.
    pub shards: usize,
    /// The eviction policy of every shard.
    pub eviction: EvictionKind,
    /// Evict when full (default). When false, a store that does not fit
    /// fails with [`SetOutcome::NoMemory`] (memcached's `-M`).
    pub evict: bool,
    /// Give items CAS uniques (default). When false every CAS is 0 (`-C`).
    pub cas: bool,
    /// The seed of the hash that places keys in shards; `None` (default): a random one, so
    /// nobody can choose keys that all land in one shard. A store reloaded from disk passes
    /// the seed it was filled under: each shard has its own share of the capacity, and under
    /// another seed a full store's entries would not fit the shards they land in.
    pub hash_seed: Option<u64>,
    /// Ask for transparent huge pages for the shards' arenas and index
    /// tables (memcached's `-L`): fewer TLB misses on the reads of a large
    /// cache, memory taken from the system 2 MiB at a time. Default off, as
    /// in memcached.
    pub huge_pages: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            capacity: 64 * 1024 * 1024,
            shards: 0,
            eviction: EvictionKind::Lru,
            evict: true,
            cas: true,
            hash_seed: None,
            huge_pages: false,
        }
    }
}

impl StoreConfig {
    /// The default configuration with a memory limit of `bytes`.
    pub fn with_capacity(bytes: usize) -> Self {
        StoreConfig {
            capacity: bytes,
            ..Default::default()
        }
    }
}

/// Shards for `threads` threads: four per thread, as a power of two, so
/// that two threads rarely want the same lock.
pub fn default_shards(threads: usize) -> usize {
    (threads.max(1) * 4).next_power_of_two().min(1024)
}
