//! Hearing of entries arriving and leaving, by their client flags: for an
//! owner that encodes something in the flags and needs an exact count of
//! the entries holding each value (kura http keeps there the ban sequence an
//! object was last checked against, and completes a ban once no entry is
//! older than it).
//!
//! A [`FlagsCensus`] attached with [`Store::count_flags`](crate::Store::count_flags)
//! hears `arrived` when an entry is linked (a new key, or a new version of
//! one) and `left` when one is let go for any reason: replaced, deleted,
//! evicted, expired and reclaimed, or reclaimed after a flush (a flushed
//! entry counts until then, as it counts in `curr_items`). A version
//! written over its own block is a departure and an arrival. Both are
//! called under the lock of the entry's shard, so for one key the calls come
//! in the order of the changes, and an entry replaced by a new version is
//! never absent from the count in between (the arrival is told first).

/// Hears entries arriving and leaving by flags (see the module documentation).
///
/// Both methods run under a shard lock, on the thread that made the change:
/// they must be quick and must not call back into the store.
pub trait FlagsCensus: Send + Sync {
    /// An entry with client flags `flags` is now linked.
    fn arrived(&self, flags: u32);
    /// An entry with client flags `flags` is gone.
    fn left(&self, flags: u32);
}
