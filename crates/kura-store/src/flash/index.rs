//! A shard's part of the flash tier: the keys whose values are on flash,
//! by key hash, each with its record's place and what a lookup must know
//! without reading the device (deadline, hits). Kept under the shard's
//! lock, beside its index of RAM entries: a key is in one or the other,
//! never both (a new entry for a key forgets its flash record, and a
//! record read back into RAM leaves this map) — unless the tier writes
//! through ([`FlashConfig::write_through`]): then a key in RAM may also
//! have a record here, a copy of RAM's version of it. Every change to the
//! RAM entry (a new version, a delete, a new deadline or CAS, an
//! invalidation) forgets the copy first, under the same lock
//! ([`ShardFlash::drop_copy`]); an eviction keeps it as the key's record
//! ([`ShardFlash::take_copy`]) rather than writing the value again, and a
//! record read back into RAM stays as its copy.
//!
//! [`FlashConfig::write_through`]: super::FlashConfig::write_through

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::table::Table;
use super::Tier;

/// Where a record is, and what RAM keeps of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub page: u32,
    /// The page's generation when written: a page reused since has
    /// another, and the record is gone.
    pub gen: u32,
    pub off: u32,
    /// The record's bytes (header, key, value).
    pub len: u32,
    /// Unix deadline, 0 for never.
    pub exptime: u32,
    /// When it was last read or written, Unix seconds.
    pub last_access: u32,
    /// Reads from flash since it was written (the maps keep up to
    /// [`HITS_MAX`](super::table::HITS_MAX)).
    pub hits: u32,
}

impl Loc {
    /// Whether `other` names the same record.
    pub(crate) fn same(&self, other: &Loc) -> bool {
        (self.page, self.gen, self.off) == (other.page, other.gen, other.off)
    }
}

/// A shard's flash records, by key hash (a packed table, `table.rs`). Two
/// keys of one tag share a slot: the later one wins and the other becomes
/// a miss (the record holds its key, checked on every read, so a tag
/// never serves another key's value).
///
/// The table's bytes count against the shard's budget (`-m`, as memcached
/// counts its flash items' headers): RAM entries are evicted to make room
/// for them. The table takes at most `max_bytes` (half the budget): past
/// that, a new record makes it forget the least recently accessed of a few
/// records next to the new one's slot, counted as an eviction from flash.
pub(crate) struct ShardFlash {
    pub(crate) tier: Arc<Tier>,
    table: Table,
    /// The most the table may take.
    max_bytes: usize,
    /// Where the shard's next walk for idle entries (`ext_item_age`)
    /// starts: an index position.
    pub(crate) idle_at: usize,
}

/// The share of a shard's budget its flash map may take at most.
pub(crate) fn max_map_bytes(limit: usize) -> usize {
    limit / 2
}

impl ShardFlash {
    /// The flash map of a shard with a budget of `limit` bytes.
    pub(crate) fn new(tier: Arc<Tier>, limit: usize) -> ShardFlash {
        ShardFlash {
            table: Table::new(tier.packing),
            tier,
            max_bytes: max_map_bytes(limit),
            idle_at: 0,
        }
    }

    /// The shard's budget changed.
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.max_bytes = max_map_bytes(limit);
    }

    /// The record of the key hashing to `hash` (or of another key of its
    /// tag).
    pub(crate) fn get(&self, hash: u64) -> Option<Loc> {
        self.table.get(hash)
    }

    pub(crate) fn contains(&self, hash: u64) -> bool {
        self.table.get(hash).is_some()
    }

    /// Changes what RAM keeps of the record of `hash` (hits, last access,
    /// deadline; not its place): the new value.
    pub(crate) fn update(&mut self, hash: u64, f: impl FnOnce(&mut Loc)) -> Option<Loc> {
        self.table.update(hash, f)
    }

    /// Notes `loc` as the record of the key hashing to `hash`: the record
    /// it replaces is released (`release`: the tier's, or a rebuild's
    /// `forgo`), and so is one forgotten to stay within `max_bytes`
    /// (counted as evicted from flash).
    fn note(&mut self, hash: u64, loc: Loc, release: fn(&Tier, &Loc)) {
        let Some(d) = self.table.insert(hash, &loc, self.max_bytes) else {
            // A place the table cannot pack (a rebuilt record longer than
            // this run's write buffers): not kept.
            release(&self.tier, &loc);
            return;
        };
        if let Some(old) = d.replaced {
            release(&self.tier, &old);
        }
        if let Some(gone) = d.forgotten {
            if self.tier.holds(&gone) {
                let c = &self.tier.counters;
                c.objects_evicted.fetch_add(1, Relaxed);
                c.bytes_evicted.fetch_add(u64::from(gone.len), Relaxed);
            }
            release(&self.tier, &gone);
        }
    }

    /// Notes `loc` as the record of the key hashing to `hash`.
    pub(crate) fn insert(&mut self, hash: u64, loc: Loc) {
        self.note(hash, loc, Tier::release);
    }

    /// Notes a record found by a rebuild (`loc`), whose predecessor, if
    /// any, the caller has let go.
    pub(crate) fn insert_rebuilt(&mut self, hash: u64, loc: Loc) {
        self.note(hash, loc, Tier::forgo);
    }

    /// Forgets the record of the key hashing to `hash`, if any.
    pub(crate) fn forget(&mut self, hash: u64) {
        if let Some(old) = self.table.remove(hash) {
            self.tier.release(&old);
        }
    }

    /// Whether the record of `hash` is still the one at `loc`.
    fn still_at(&self, hash: u64, loc: &Loc) -> bool {
        self.table.get(hash).is_some_and(|l| l.same(loc))
    }

    /// Changes the record of `hash` with `f` if it is still the one at
    /// `loc`.
    pub(crate) fn update_if(&mut self, hash: u64, loc: &Loc, f: impl FnOnce(&mut Loc)) {
        if self.still_at(hash, loc) {
            self.update(hash, f);
        }
    }

    /// Forgets the record at `loc` if it is still the key's.
    pub(crate) fn forget_if(&mut self, hash: u64, loc: &Loc) {
        if self.still_at(hash, loc) {
            self.forget(hash);
        }
    }

    /// Whether the tier keeps copies of RAM's entries.
    #[inline]
    pub(crate) fn copies(&self) -> bool {
        self.tier.config.write_through
    }

    /// Forgets the copy of the key hashing to `hash`, if the tier keeps
    /// copies: the RAM entry is about to change.
    #[inline]
    pub(crate) fn drop_copy(&mut self, hash: u64) {
        if self.copies() {
            self.forget(hash);
        }
    }

    /// Takes the copy of the key hashing to `hash` out of the map without
    /// releasing it, if the tier keeps copies and the record is still on
    /// its page: the record stands for the entry as RAM lets it go (put it
    /// back with [`ShardFlash::insert`]). A record of another key of the
    /// same tag is taken too: reads check the key, so that is a miss.
    pub(crate) fn take_copy(&mut self, hash: u64) -> Option<Loc> {
        if !self.copies() {
            return None;
        }
        let loc = self.table.remove(hash)?;
        if self.tier.holds(&loc) {
            return Some(loc);
        }
        self.tier.release(&loc);
        None
    }

    /// Forgets every record (a flush).
    pub(crate) fn clear(&mut self) {
        let tier = &self.tier;
        self.table.retain(|_| false, |l| tier.release(&l));
    }

    /// Drops the entries of records whose page was reused or lost.
    pub(crate) fn purge(&mut self) {
        let tier = &self.tier;
        self.table.retain(|l| tier.holds(l), |_| {});
    }

    /// RAM this map takes: its table's slots.
    pub(crate) fn bytes(&self) -> usize {
        self.table.bytes()
    }
}
