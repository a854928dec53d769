//! Looking at entries without taking them: [`Store::inspect`], a walk over
//! one shard a bounded step at a time that shows each live entry's
//! metadata under the shard's lock (a server's key dumps), the totals per
//! size class ([`Store::class_stats`], `shard/classes.rs`), and
//! [`EvictionWatch`], which hears of entries as they are evicted. What is
//! shown is data; formatting it for a protocol is the caller's business.

use std::sync::Arc;

use crate::arena::Arena;
use crate::expiry::is_expired;
use crate::item::{Meta, FETCHED, KEY_BINARY};
use crate::shard::classes::{size_class, ClassStats, MAX_CLASS};

use super::Store;

/// One entry as an inspecting walk or an eviction watch sees it.
#[derive(Debug, Clone, Copy)]
pub struct EntryView<'a> {
    pub key: &'a [u8],
    /// Stored with a base64 key through the meta protocol.
    pub binary_key: bool,
    pub flags: u32,
    pub cas: u64,
    /// Unix deadline, 0 for never.
    pub exptime: u32,
    /// Unix time of the last read or write.
    pub last_access: u32,
    /// Read since it was stored.
    pub fetched: bool,
    pub value_len: usize,
    /// Bytes of its block.
    pub block_bytes: usize,
    /// Its size class (`shard/classes.rs`).
    pub class: usize,
}

impl<'a> EntryView<'a> {
    fn of(m: Meta<'a>, arena: &Arena, off: u32) -> EntryView<'a> {
        let block_bytes = arena.units(off) as usize * crate::arena::UNIT;
        EntryView {
            key: m.key(),
            binary_key: m.marks() & KEY_BINARY != 0,
            flags: m.flags(),
            cas: m.cas(),
            exptime: m.exptime(),
            last_access: m.last_access(),
            fetched: m.marks() & FETCHED != 0,
            value_len: m.value_len(),
            block_bytes,
            class: size_class(block_bytes),
        }
    }
}

/// Hears of every entry evicted to make room (not of expired ones
/// reclaimed), once attached with [`Store::watch_evictions`].
///
/// Runs under the shard's lock on the thread that made room: it must be
/// quick and must not call back into the store.
pub trait EvictionWatch: Send + Sync {
    fn evicted(&self, entry: &EntryView<'_>, now: u32);
}

/// Tells `watch` of the entry at `off`, being evicted (out of line: a
/// shard without a watch pays a test of an `Option` per eviction).
#[cold]
#[inline(never)]
pub(crate) fn tell_evicted(watch: &dyn EvictionWatch, arena: &Arena, off: u32, now: u32) {
    // SAFETY: the caller holds the shard's lock and `off` is a live block.
    let m = unsafe { Meta::new(arena.ptr(off), arena.cas) };
    watch.evicted(&EntryView::of(m, arena, off), now);
}

impl Store {
    /// Shows `visit` the live entries at up to `budget` index positions of
    /// shard `shard` from `*cursor` (start at 0), under the shard's lock
    /// for this step only, and moves the cursor on; true when the walk
    /// reached the shard's end.
    ///
    /// Unlike [`Store::scan`] a walk does not start over when the index
    /// moves entries (it grows, or is flushed) meanwhile: it never lists an
    /// entry twice in a row of steps over a still index, and always ends,
    /// but an entry moved during the walk may be met twice or not at all,
    /// as with memcached's crawler. `visit` runs under the lock: it must be
    /// quick and must not call into the store.
    ///
    /// # Panics
    /// `shard` is not below [`Store::shard_count`].
    pub fn inspect(
        &self,
        shard: usize,
        cursor: &mut usize,
        budget: usize,
        mut visit: impl FnMut(&EntryView<'_>),
    ) -> bool {
        let now = self.clock.now();
        self.apply_due_flush(now, &crate::Report::default());
        let mut guard = self.shards[shard].0.write();
        self.sync_flush(&mut guard, now);
        let (end, from) = (guard.positions(), *cursor);
        let stop = from.saturating_add(budget.max(1)).min(end);
        for pos in from..stop {
            let Some(off) = guard.offset_at(pos) else {
                continue;
            };
            let m = guard.meta(off);
            if is_expired(m.exptime(), now) {
                continue;
            }
            visit(&EntryView::of(m, guard.arena(), off));
        }
        *cursor = stop;
        stop >= end
    }

    /// Attaches `watch`, which hears of every entry evicted from now on. A
    /// store has at most one; false if it had one.
    pub fn watch_evictions(&self, watch: Arc<dyn EvictionWatch>) -> bool {
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        if guards.iter().any(|s| s.eviction_watch.is_some()) {
            return false;
        }
        for shard in &mut guards {
            shard.eviction_watch = Some(Arc::clone(&watch));
        }
        true
    }

    /// The size class an entry of a key of `key_len` bytes, client flags
    /// `flags` and a value of `value_len` bytes goes to, with a deadline or
    /// not (the allocator may round its block up by a few bytes, rarely
    /// into the next class).
    pub fn size_class_of(
        &self,
        key_len: usize,
        flags: u32,
        value_len: usize,
        deadline: bool,
    ) -> usize {
        let bytes = crate::item::HEADER
            + if self.config.eviction.links() { 8 } else { 0 }
            + if deadline { 4 } else { 0 }
            + if flags != 0 { 4 } else { 0 }
            + key_len
            + value_len;
        size_class(bytes.next_multiple_of(crate::arena::UNIT))
    }

    /// What each size class holds and counted, summed over the shards;
    /// index `c` is class `c` (index 0 is always empty).
    pub fn class_stats(&self) -> [ClassStats; MAX_CLASS + 1] {
        let mut all = [ClassStats::default(); MAX_CLASS + 1];
        for cell in self.shards.iter() {
            let shard = cell.0.read();
            for (sum, c) in all.iter_mut().zip(shard.classes.all()) {
                sum.add(c);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use crate::{size_class, Expiry, Store, StoreConfig};

    use super::{EntryView, EvictionWatch};

    fn store(capacity: usize) -> Store {
        Store::new(StoreConfig {
            shards: 2,
            ..StoreConfig::with_capacity(capacity)
        })
    }

    /// Every entry's key and view, walking `budget` positions a step.
    fn walk(s: &Store, budget: usize) -> HashMap<Vec<u8>, (u64, u32, bool, usize)> {
        let mut seen = HashMap::new();
        for shard in 0..s.shard_count() {
            let mut cursor = 0;
            while !s.inspect(shard, &mut cursor, budget, |e| {
                let old = seen.insert(e.key.to_vec(), (e.cas, e.exptime, e.fetched, e.class));
                assert!(old.is_none(), "met twice");
            }) {}
        }
        seen
    }

    #[test]
    fn a_walk_shows_every_live_entry_once_with_its_metadata() {
        let s = store(64 << 20);
        let n = crate::testing::size(2_000, 300) as u32;
        for i in 0..n {
            s.insert(
                format!("k{i}").as_bytes(),
                &vec![b'v'; i as usize],
                Expiry::Never,
            );
        }
        // The deadline against the clock before the store, not after the
        // walk: an interpreted walk (Miri) takes longer than a second.
        let before = s.now();
        s.insert(b"ttl", b"v", Expiry::In(100));
        s.insert(b"gone", b"v", Expiry::Expired);
        assert!(s.get(b"k7").is_some());
        let seen = walk(&s, 61);
        assert_eq!(seen.len(), n as usize + 1);
        assert!(!seen.contains_key(b"gone".as_slice()));
        assert!(seen[b"k7".as_slice()].2, "k7 was read");
        assert!(!seen[b"k8".as_slice()].2);
        assert!(seen[b"ttl".as_slice()].1 >= before + 100);
        assert_eq!(seen[b"k1".as_slice()].1, 0);
        // Classes as stats count them: the expired entry too (a block of
        // class 1), held until it is reclaimed, as in `curr_items`.
        let classes = s.class_stats();
        let mut by_class = [0u64; crate::MAX_CLASS + 1];
        by_class[1] += 1;
        for v in seen.values() {
            by_class[v.3] += 1;
        }
        for (c, stats) in classes.iter().enumerate() {
            assert_eq!(stats.items, by_class[c], "class {c}");
        }
        assert_eq!(classes.iter().map(|c| c.items).sum::<u64>(), s.len() as u64);
    }

    #[test]
    fn class_counts_follow_deletes_and_replacements() {
        let s = store(64 << 20);
        s.insert(b"a", &[0; 10], Expiry::Never);
        s.insert(b"a", &[0; 5_000], Expiry::Never);
        s.insert(b"b", &[0; 5_000], Expiry::Never);
        s.delete(b"b");
        let classes = s.class_stats();
        let big = size_class(s.get(b"a").map_or(0, |i| i.heap_size()));
        assert_eq!(classes[big].items, 1);
        assert_eq!(classes.iter().map(|c| c.items).sum::<u64>(), 1);
        assert_eq!(
            classes[big].bytes,
            s.get(b"a").map_or(0, |i| i.heap_size()) as u64
        );
    }

    #[derive(Default)]
    struct Heard(Mutex<Vec<(Vec<u8>, usize, usize)>>);

    impl EvictionWatch for Heard {
        fn evicted(&self, e: &EntryView<'_>, _now: u32) {
            let mut heard = self.0.lock().unwrap_or_else(|e| e.into_inner());
            heard.push((e.key.to_vec(), e.value_len, e.class));
        }
    }

    #[test]
    fn an_eviction_watch_hears_every_eviction_and_classes_count_them() {
        let s = store(crate::testing::size(4 << 20, 1 << 19));
        let heard = Arc::new(Heard::default());
        assert!(s.watch_evictions(heard.clone()));
        assert!(!s.watch_evictions(heard.clone()));
        for i in 0..crate::testing::size(20_000, 2_500) as u32 {
            s.insert(format!("k{i}").as_bytes(), &[7; 500], Expiry::Never);
        }
        let evictions = s.stats().evictions;
        assert!(evictions > 0);
        let heard = heard.0.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(heard.len() as u64, evictions);
        assert!(heard.iter().all(|(_, len, _)| *len == 500));
        let classes = s.class_stats();
        assert_eq!(classes[heard[0].2].evicted, evictions);
        assert_eq!(classes[heard[0].2].evicted_unfetched, evictions);
    }
}
