//! The store's totals for `stats`, summed over the shards.

use crate::shard::ShardStats;

use super::Store;

/// Totals over all shards, for `stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub curr_items: u64,
    pub bytes: u64,
    pub limit_maxbytes: u64,
    pub total_items: u64,
    pub evictions: u64,
    pub evicted_nonzero: u64,
    pub evicted_unfetched: u64,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub crawler_reclaimed: u64,
    pub get_expired: u64,
    /// Reads that found an entry a flush had dropped (memcached's
    /// `get_flushed`), until the flushed entries are reclaimed.
    pub get_flushed: u64,
    pub out_of_memory: u64,
    pub shards: u64,
    /// Bytes of the shards' hash indexes (memcached's `hash_bytes`).
    pub hash_bytes: u64,
    /// Slots of the shards' hash indexes, all together.
    pub hash_slots: u64,
    /// Whether any shard's index is moving to a larger table.
    pub hash_is_expanding: bool,
    /// Bytes the eviction policies hold outside the entries (S3-FIFO's
    /// ghost queue and small queue's ring of ids), which are charged per
    /// entry (`EvictionKind::entry_bytes`), so not part of `bytes`.
    pub policy_bytes: u64,
}

impl Store {
    /// Totals for `stats`.
    pub fn stats(&self) -> StoreStats {
        let mut s = StoreStats {
            limit_maxbytes: self.capacity() as u64,
            shards: self.shards.len() as u64,
            ..Default::default()
        };
        for cell in self.shards.iter() {
            let shard = cell.0.read();
            let st = shard.stats;
            s.curr_items += shard.len() as u64;
            s.bytes += shard.used as u64;
            s.total_items += st.total_items;
            s.evictions += st.evictions;
            s.evicted_nonzero += st.evicted_nonzero;
            s.evicted_unfetched += st.evicted_unfetched;
            s.reclaimed += st.reclaimed;
            s.expired_unfetched += st.expired_unfetched;
            s.crawler_reclaimed += st.crawler_reclaimed;
            s.get_expired += st.get_expired;
            s.get_flushed += st.get_flushed;
            s.out_of_memory += st.out_of_memory;
            let (bytes, slots, growing) = shard.index_stats();
            s.hash_bytes += bytes as u64;
            s.hash_slots += slots as u64;
            s.hash_is_expanding |= growing;
            s.policy_bytes += shard.policy_bytes() as u64;
        }
        s
    }

    /// Zeroes the counters (`stats reset`); items and bytes are kept.
    pub fn reset_stats(&self) {
        for cell in self.shards.iter() {
            let mut shard = cell.0.write();
            shard.stats = ShardStats::default();
            shard.classes.reset();
        }
    }
}
