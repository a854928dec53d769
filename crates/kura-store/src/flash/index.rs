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

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

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
    /// Reads from flash since it was written.
    pub hits: u32,
}

impl Loc {
    /// Whether `other` names the same record.
    pub(crate) fn same(&self, other: &Loc) -> bool {
        (self.page, self.gen, self.off) == (other.page, other.gen, other.off)
    }
}

/// Key hashes are already uniform (the store's seeded hash): used as they
/// are.
#[derive(Default)]
pub(crate) struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A shard's flash records, by key hash. Two keys of one hash share a
/// slot: the later one wins and the other becomes a miss (the record
/// holds its key, checked on every read, so a hash never serves another
/// key's value).
pub(crate) struct ShardFlash {
    pub(crate) tier: Arc<Tier>,
    pub(crate) map: HashMap<u64, Loc, BuildHasherDefault<HashIsKey>>,
    /// Where the shard's next walk for idle entries (`ext_item_age`)
    /// starts: an index position.
    pub(crate) idle_at: usize,
}

impl ShardFlash {
    pub(crate) fn new(tier: Arc<Tier>) -> ShardFlash {
        ShardFlash {
            tier,
            map: HashMap::default(),
            idle_at: 0,
        }
    }

    /// Notes `loc` as the record of the key hashing to `hash`.
    pub(crate) fn insert(&mut self, hash: u64, loc: Loc) {
        if let Some(old) = self.map.insert(hash, loc) {
            self.tier.release(&old);
        }
    }

    /// Forgets the record of the key hashing to `hash`, if any.
    pub(crate) fn forget(&mut self, hash: u64) {
        if let Some(old) = self.map.remove(&hash) {
            self.tier.release(&old);
        }
    }

    /// Forgets the record at `loc` if it is still the key's.
    pub(crate) fn forget_if(&mut self, hash: u64, loc: &Loc) {
        if self.map.get(&hash).is_some_and(|l| l.same(loc)) {
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
    /// same hash is taken too: reads check the key, so that is a miss.
    pub(crate) fn take_copy(&mut self, hash: u64) -> Option<Loc> {
        if !self.copies() {
            return None;
        }
        let loc = self.map.remove(&hash)?;
        if self.tier.holds(&loc) {
            return Some(loc);
        }
        self.tier.release(&loc);
        None
    }

    /// Forgets every record (a flush).
    pub(crate) fn clear(&mut self) {
        for (_, l) in self.map.drain() {
            self.tier.release(&l);
        }
    }

    /// Drops the entries of records whose page was reused or lost.
    pub(crate) fn purge(&mut self) {
        let tier = &self.tier;
        self.map.retain(|_, l| tier.holds(l));
    }

    /// RAM this map takes: its table's slots and control bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.map.capacity() * (std::mem::size_of::<(u64, Loc)>() + 1)
    }
}
