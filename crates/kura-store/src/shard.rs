//! One shard: a hash index over slot numbers, the slots holding entries, an
//! eviction policy and a byte budget, all behind the shard's lock. The
//! operations in `ops.rs` are built from the few primitives here: find,
//! link, unlink and make room.

use foldhash::fast::FixedState;
use hashbrown::HashTable;
use std::hash::BuildHasher;

use crate::eviction::{EvictionKind, EvictionPolicy, Policy};
use crate::expiry::is_expired;
use crate::item::Item;

/// The entry was stored with a base64 (binary) key through the meta protocol.
pub(crate) const KEY_BINARY: u8 = 1;
/// The entry has been read since it was stored.
pub(crate) const FETCHED: u8 = 2;
/// The entry was invalidated (`md ... I`) and is served as stale.
pub(crate) const STALE: u8 = 4;
/// A client has been handed the recache token (`W`) for this entry.
pub(crate) const TOKEN_SENT: u8 = 8;

/// One entry's slot. Free slots have no item.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub item: Option<Item>,
    pub cas: u64,
    /// Unix deadline, 0 for never.
    pub exptime: u32,
    /// Unix time of the last access that bumped the entry.
    pub last_access: u32,
    pub bits: u8,
}

/// Bookkeeping bytes charged per entry beyond the item's own allocation and
/// the eviction policy's state: the slot and the index entry.
const ENTRY_OVERHEAD: usize = std::mem::size_of::<Slot>() + 8;

/// Slots that making room scans at most for expired entries before it
/// evicts a live one: a bound on the time one store holds the lock.
const RECLAIM_SCAN: usize = 4096;

/// What a read under the shared lock found.
pub(crate) enum SharedRead {
    Hit(crate::ops::Hit),
    Miss,
    /// The read has to change the shard: retry with the lock exclusive.
    Exclusive,
}

/// Counters kept under the shard lock and summed for `stats`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ShardStats {
    pub total_items: u64,
    pub evictions: u64,
    pub evicted_nonzero: u64,
    pub evicted_unfetched: u64,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub crawler_reclaimed: u64,
    pub get_expired: u64,
    pub out_of_memory: u64,
}

pub(crate) struct Shard {
    table: HashTable<u32>,
    pub(crate) slots: Vec<Slot>,
    free: Vec<u32>,
    policy: Policy,
    /// Bytes charged per entry besides its item: [`ENTRY_OVERHEAD`] and
    /// the policy's per-entry state.
    entry_overhead: usize,
    hasher: FixedState,
    /// Bytes charged for the entries linked now.
    pub(crate) used: usize,
    pub(crate) limit: usize,
    /// Whether to evict when full (`false`: fail stores instead, like `-M`).
    evict: bool,
    /// Entries with a nonzero exptime, so eviction only looks for expired
    /// entries when there can be some.
    with_ttl: usize,
    /// No linked entry expires before this Unix time (a lower bound;
    /// `u32::MAX` when none can), so making room looks for expired entries
    /// only when there can be some.
    expiry_floor: u32,
    /// The earliest deadline seen by the reaper's current pass over the
    /// slots, or given since it began; the new `expiry_floor` when the pass
    /// ends.
    pass_floor: u32,
    cas_next: u64,
    cas_index: u64,
    cas_shift: u32,
    cas_enabled: bool,
    pub(crate) flush_epoch: u32,
    pub(crate) stats: ShardStats,
    reap_cursor: usize,
    /// Items evicted by the operation under way, kept only while a change
    /// sink is attached (see `changes.rs`), which hears of them before the
    /// lock is released.
    pub(crate) evicted: Option<Vec<Item>>,
}

impl Shard {
    pub(crate) fn new(
        kind: EvictionKind,
        hasher: FixedState,
        limit: usize,
        evict: bool,
        index: usize,
        shard_bits: u32,
        cas_enabled: bool,
    ) -> Shard {
        Shard {
            table: HashTable::new(),
            slots: Vec::new(),
            free: Vec::new(),
            policy: Policy::new(kind),
            entry_overhead: ENTRY_OVERHEAD + kind.entry_bytes(),
            hasher,
            used: 0,
            limit,
            evict,
            with_ttl: 0,
            expiry_floor: u32::MAX,
            pass_floor: u32::MAX,
            cas_next: 1,
            cas_index: index as u64,
            cas_shift: shard_bits,
            cas_enabled,
            flush_epoch: 0,
            stats: ShardStats::default(),
            reap_cursor: 0,
            evicted: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// The bytes an entry holding `item` is charged against the limit.
    fn charge(&self, item: &Item) -> usize {
        item.heap_size() + self.entry_overhead
    }

    /// A fresh CAS unique: unique across shards because the low bits are
    /// the shard number.
    pub(crate) fn next_cas(&mut self) -> u64 {
        if !self.cas_enabled {
            return 0;
        }
        let cas = (self.cas_next << self.cas_shift) | self.cas_index;
        self.cas_next += 1;
        cas
    }

    /// Makes sure later CAS uniques are above `cas` (after an explicit `E`).
    pub(crate) fn observe_cas(&mut self, cas: u64) {
        let seq = cas >> self.cas_shift;
        if seq >= self.cas_next {
            self.cas_next = seq.saturating_add(1);
        }
    }

    pub(crate) fn slot(&self, idx: u32) -> &Slot {
        &self.slots[idx as usize]
    }

    pub(crate) fn slot_mut(&mut self, idx: u32) -> &mut Slot {
        &mut self.slots[idx as usize]
    }

    pub(crate) fn item(&self, idx: u32) -> &Item {
        // A slot found through the index always holds an item.
        self.slots[idx as usize]
            .item
            .as_ref()
            .expect("indexed slot holds an item")
    }

    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        let slots = &self.slots;
        self.table
            .find(hash, |&i| {
                slots[i as usize].item.as_ref().map(|it| it.key()) == Some(key)
            })
            .copied()
    }

    /// Finds a live entry; an expired one found on the way is unlinked.
    pub(crate) fn find_live(&mut self, hash: u64, key: &[u8], now: u32) -> Option<u32> {
        let idx = self.find(hash, key)?;
        let slot = &self.slots[idx as usize];
        if is_expired(slot.exptime, now) {
            self.stats.get_expired += 1;
            if slot.bits & FETCHED == 0 {
                self.stats.expired_unfetched += 1;
            }
            self.unlink(hash, idx);
            return None;
        }
        Some(idx)
    }

    /// Unlinks entry `idx` (whose key hashes to `hash`) and returns its item.
    pub(crate) fn unlink(&mut self, hash: u64, idx: u32) -> Option<Item> {
        if let Ok(entry) = self.table.find_entry(hash, |&i| i == idx) {
            entry.remove();
        }
        self.policy.remove(idx);
        let slot = &mut self.slots[idx as usize];
        let item = slot.item.take();
        if let Some(it) = &item {
            self.used -= it.heap_size() + self.entry_overhead;
        }
        if slot.exptime != 0 {
            self.with_ttl -= 1;
        }
        *slot = Slot::default();
        self.free.push(idx);
        item
    }

    fn hash_of(&self, idx: u32) -> u64 {
        self.hasher.hash_one(self.item(idx).key())
    }

    /// Evicts or reclaims until `need` more bytes fit. Fails when the entry
    /// cannot fit at all, or when eviction is off and reclaiming expired
    /// entries is not enough.
    fn make_room(&mut self, need: usize, now: u32, keep: Option<u32>) -> bool {
        if need > self.limit {
            return false;
        }
        // A policy may offer the entry being replaced while others are
        // left; it is then taken out of the eviction order until room is
        // made, and linked again as if new.
        let mut parked = None;
        let done = loop {
            if self.used + need <= self.limit {
                break true;
            }
            if self.reclaim_expired(now) {
                continue;
            }
            let mut victim = self.policy.victim();
            if let Some(k) = keep.filter(|&k| victim == Some(k) && parked.is_none()) {
                self.policy.remove(k);
                parked = Some(k);
                victim = self.policy.victim();
            }
            let Some(victim) = victim else {
                break false;
            };
            let slot = &self.slots[victim as usize];
            let fetched = slot.bits & FETCHED != 0;
            let expired = is_expired(slot.exptime, now);
            if expired {
                self.stats.reclaimed += 1;
                if !fetched {
                    self.stats.expired_unfetched += 1;
                }
            } else if self.evict {
                self.stats.evictions += 1;
                if slot.exptime != 0 {
                    self.stats.evicted_nonzero += 1;
                }
                if !fetched {
                    self.stats.evicted_unfetched += 1;
                }
            } else {
                break false;
            }
            let hash = self.hash_of(victim);
            let item = self.unlink(hash, victim);
            if let (Some(evicted), Some(item)) = (self.evicted.as_mut(), item) {
                // An expired entry needs no record: its deadline is logged.
                if !expired {
                    evicted.push(item);
                }
            }
        };
        if let Some(k) = parked {
            let hash = self.hash_of(k);
            self.policy.insert(k, hash);
            self.policy.touch(k);
        }
        done
    }

    /// Reclaims expired entries from the reaper's cursor on, when some entry
    /// may have expired, so that a live entry is evicted only when none was
    /// found within [`RECLAIM_SCAN`] slots. Returns whether any was.
    fn reclaim_expired(&mut self, now: u32) -> bool {
        let mut budget = RECLAIM_SCAN;
        while self.with_ttl > 0 && self.expiry_floor <= now && budget > 0 {
            let (scanned, removed) = self.reap(now, budget.min(32));
            if removed > 0 {
                return true;
            }
            if scanned == 0 {
                break;
            }
            budget -= scanned;
        }
        false
    }

    /// Notes the deadline an entry was given.
    fn note_deadline(&mut self, exptime: u32) {
        if exptime != 0 {
            self.expiry_floor = self.expiry_floor.min(exptime);
            self.pass_floor = self.pass_floor.min(exptime);
        }
    }

    /// Links a new entry for `item`, whose key must not be linked already.
    /// Returns the slot, or `None` when there is no room for it.
    pub(crate) fn link(
        &mut self,
        hash: u64,
        item: Item,
        exptime: u32,
        cas: u64,
        bits: u8,
        now: u32,
    ) -> Option<u32> {
        let need = self.charge(&item);
        if !self.make_room(need, now, None) {
            self.stats.out_of_memory += 1;
            return None;
        }
        let slot = Slot {
            item: Some(item),
            cas,
            exptime,
            last_access: now,
            bits,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 entries per shard")
            }
        };
        let (slots, hasher) = (&self.slots, &self.hasher);
        self.table.insert_unique(hash, idx, |&i| {
            hasher.hash_one(
                slots[i as usize]
                    .item
                    .as_ref()
                    .map(|it| it.key())
                    .unwrap_or_default(),
            )
        });
        self.policy.insert(idx, hash);
        self.used += need;
        if exptime != 0 {
            self.with_ttl += 1;
        }
        self.note_deadline(exptime);
        self.stats.total_items += 1;
        Some(idx)
    }

    /// Replaces the item of entry `idx` with a new one for the same key, in
    /// place. When the new item does not fit, nothing changes and `false`
    /// is returned.
    pub(crate) fn replace(
        &mut self,
        idx: u32,
        item: Item,
        exptime: u32,
        cas: u64,
        bits: u8,
        now: u32,
    ) -> bool {
        let old = self.charge(self.item(idx));
        let need = self.charge(&item);
        // Make the entry the most recent so room is made from the others.
        self.policy.touch(idx);
        if need > old && !self.make_room(need - old, now, Some(idx)) {
            self.stats.out_of_memory += 1;
            return false;
        }
        self.used = self.used + need - old;
        self.stats.total_items += 1;
        self.set_exptime(idx, exptime);
        let slot = &mut self.slots[idx as usize];
        slot.item = Some(item);
        slot.cas = cas;
        slot.bits = bits;
        slot.last_access = now;
        true
    }

    /// Changes an entry's deadline.
    pub(crate) fn set_exptime(&mut self, idx: u32, exptime: u32) {
        let slot = &mut self.slots[idx as usize];
        match (slot.exptime != 0, exptime != 0) {
            (false, true) => self.with_ttl += 1,
            (true, false) => self.with_ttl -= 1,
            _ => {}
        }
        slot.exptime = exptime;
        self.note_deadline(exptime);
    }

    /// Records a read of entry `idx`: moves it up the eviction order, marks
    /// it fetched and notes the access time.
    pub(crate) fn bump(&mut self, idx: u32, now: u32) {
        self.promote(idx, now);
        self.slots[idx as usize].bits |= FETCHED;
    }

    /// Records a read of entry `idx` under the shared lock, if the policy
    /// can (see [`EvictionPolicy::touch_shared`]).
    pub(crate) fn touch_shared(&self, idx: u32) -> bool {
        self.policy.touch_shared(idx)
    }

    /// Moves entry `idx` up the eviction order and notes the access time,
    /// without marking it fetched (a write that is not a read).
    pub(crate) fn promote(&mut self, idx: u32, now: u32) {
        self.policy.touch(idx);
        self.slots[idx as usize].last_access = now;
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
        self.slots.clear();
        self.free.clear();
        self.policy.clear();
        self.used = 0;
        self.with_ttl = 0;
        self.expiry_floor = u32::MAX;
        self.pass_floor = u32::MAX;
        self.reap_cursor = 0;
    }

    /// Scans up to `budget` slots from the reaper's cursor and unlinks the
    /// expired entries. Returns (slots scanned, entries removed); the cursor
    /// wraps to 0 after the last slot, when the scan count is short. A pass
    /// from slot 0 to the last one also learns the earliest deadline left.
    pub(crate) fn reap(&mut self, now: u32, budget: usize) -> (usize, usize) {
        if self.reap_cursor == 0 {
            // Every slot is ahead of a new pass; later deadlines are noted.
            self.pass_floor = u32::MAX;
        }
        let mut scanned = 0;
        let mut removed = 0;
        while scanned < budget && self.reap_cursor < self.slots.len() {
            let idx = self.reap_cursor as u32;
            self.reap_cursor += 1;
            scanned += 1;
            let slot = &self.slots[idx as usize];
            if slot.item.is_none() || slot.exptime == 0 {
                continue;
            }
            if !is_expired(slot.exptime, now) {
                self.pass_floor = self.pass_floor.min(slot.exptime);
                continue;
            }
            if slot.bits & FETCHED == 0 {
                self.stats.expired_unfetched += 1;
            }
            self.stats.crawler_reclaimed += 1;
            let hash = self.hash_of(idx);
            self.unlink(hash, idx);
            removed += 1;
        }
        if self.reap_cursor >= self.slots.len() {
            self.reap_cursor = 0;
            self.expiry_floor = self.pass_floor;
        }
        (scanned, removed)
    }
}
