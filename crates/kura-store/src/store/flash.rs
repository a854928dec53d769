//! The store's side of the flash tier (`flash/`): attaching it, reading a
//! key's value back from flash when RAM misses, taking a record back into
//! RAM before a command changes its entry, and the maintenance thread that
//! purges the shards' maps of dropped pages and compacts pages.
//!
//! [`Store::read_flash`] is synchronous: the thread that asked reads the
//! device (one `pread` of the record), without the shard's lock held.
//! [`Store::get_or_read`] hands that read to the tier's reader threads and
//! answers at once (`nonblocking.rs`).

use std::hash::BuildHasher;
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::api::{DeleteRequest, Hit};
use crate::changes::Report;
use crate::expiry::is_expired;
use crate::flash::index::{Loc, ShardFlash};
use crate::flash::record::{self, Fields};
use crate::flash::table::HITS_MAX;
use crate::flash::{Faults, FlashConfig, FlashStats, ReadMiss, Tier};
use crate::item::{Item, FETCHED, KEY_BINARY};

use super::sink::report;
use super::Store;

/// How often, in microseconds, the flash tier's maintenance thread looks
/// for work when not woken (memcached's `ext_max_sleep`, as kura has it).
pub const FLASH_MAINTAIN_EVERY_US: u64 = 200_000;
const MAINTAIN_EVERY: Duration = Duration::from_micros(FLASH_MAINTAIN_EVERY_US);
/// Index positions of each shard a round of maintenance looks at for
/// entries idle longer than `ext_item_age` (the shard's lock is held
/// meanwhile).
const IDLE_WALK: usize = 1024;

/// How one attempt to read a record back ended.
enum Attempt {
    Done(Option<Hit>),
    /// The key's record moved while it was read: try again.
    Moved,
    /// Asked not to wait on the device, and the record's bytes are not in
    /// the page cache: nothing done.
    WouldBlock,
}

/// What to do with a record read back.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Back {
    /// Answer a read: back into RAM one in `recache_rate` repeated hits.
    Read,
    /// A command will change the entry: back into RAM now, or forgotten.
    ForChange,
}

impl Store {
    /// Adds a flash tier: evicted values of at least
    /// [`FlashConfig::item_size`] bytes go to its files, and are read back
    /// from there. Starts the tier's writer and the store's maintenance
    /// thread. A store takes one tier, before it holds anything.
    ///
    /// # Errors
    /// A file that cannot be opened, or settings out of range; or the store
    /// already has a tier or holds entries (`AlreadyExists`).
    pub fn attach_flash(self: &Arc<Self>, config: FlashConfig) -> io::Result<()> {
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        if self.flash.get().is_some() || guards.iter().any(|s| s.len() > 0) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a flash tier is added to an empty store without one",
            ));
        }
        let tier = Tier::open(config)?;
        for shard in guards.iter_mut() {
            let limit = shard.limit;
            shard.flash = Some(Box::new(ShardFlash::new(Arc::clone(&tier), limit)));
        }
        if tier.config.persist {
            let now = self.clock.now();
            // The CAS of the record indexed for each key hash so far.
            let mut cas_of = std::collections::HashMap::new();
            tier.rebuild(now, |loc, rec| {
                let hash = self.hasher.hash_one(rec.key);
                let shard = &mut guards[((hash >> 32) & self.shard_mask) as usize];
                if is_expired(loc.exptime, now) {
                    tier.forgo(&loc);
                    return;
                }
                shard.observe_cas(rec.fields.cas);
                let Some(f) = shard.flash.as_deref_mut() else {
                    return;
                };
                // The newest version of a key wins: the higher CAS, then the
                // later page and place (a copy moved by compaction).
                let rank = |l: &Loc, cas: u64| (cas, l.gen, l.off);
                let new = rank(&loc, rec.fields.cas);
                match f.get(hash) {
                    Some(old) if rank(&old, cas_of.get(&hash).copied().unwrap_or(0)) >= new => {
                        tier.forgo(&loc);
                    }
                    old => {
                        if let Some(old) = old {
                            tier.forgo(&old);
                        }
                        f.insert_rebuilt(hash, loc);
                        cas_of.insert(hash, rec.fields.cas);
                    }
                }
            });
        }
        let _ = self.flash.set(Arc::clone(&tier));
        drop(guards);
        let store = Arc::downgrade(self);
        let thread = std::thread::Builder::new()
            .name("kura-flash".into())
            .spawn(move || maintain(store))?;
        *tier.maintainer.lock() = Some(thread.thread().clone());
        Ok(())
    }

    /// The flash tier's figures, if the store has one.
    pub fn flash_stats(&self) -> Option<FlashStats> {
        let tier = self.flash.get()?;
        let mut stats = tier.stats();
        stats.index_bytes = self
            .shards
            .iter()
            .map(|c| c.0.read().flash.as_ref().map_or(0, |f| f.bytes()) as u64)
            .sum();
        Some(stats)
    }

    /// The flash tier's settings as it runs them (defaults resolved).
    pub fn flash_config(&self) -> Option<&FlashConfig> {
        self.flash.get().map(|t| &t.config)
    }

    /// Fault injection into the flash tier's device (tests).
    #[doc(hidden)]
    pub fn flash_faults(&self) -> Option<&Faults> {
        self.flash.get().map(|t| t.faults())
    }

    /// Hands every flash write buffer to the device and waits for the
    /// writes (tests and benchmarks: afterwards reads go to the files).
    #[doc(hidden)]
    pub fn flash_sync(&self) {
        if let Some(t) = self.flash.get() {
            t.flush_open();
            t.drain();
        }
    }

    /// Moves every entry of RAM the flash tier takes to flash, waiting for
    /// the writer rather than dropping any, and waits until all is written:
    /// how many moved. For a clean stop of a persistent tier, so that the
    /// next store on its files finds RAM's contents too. Coldest first, by
    /// last access across all shards: when they do not all fit, pages are
    /// dropped oldest first as ever, so the ones lost are the coldest. The
    /// store stays usable (an entry changed meanwhile is skipped or moved
    /// as it is then).
    pub fn flash_spill_all(&self) -> usize {
        let Some(tier) = self.flash.get() else {
            return 0;
        };
        tier.patient.store(true, Relaxed);
        let now = self.clock.now();
        let mut order: Vec<(u32, usize, u64, u32)> = Vec::new();
        for (i, cell) in self.shards.iter().enumerate() {
            let entries = cell.0.read().spill_order(now);
            order.extend(entries.into_iter().map(|(at, h, off)| (at, i, h, off)));
        }
        order.sort_unstable();
        let moved = order
            .into_iter()
            .filter(|&(_, i, h, off)| self.shards[i].0.write().spill_one(h, off, now))
            .count();
        tier.patient.store(false, Relaxed);
        tier.flush_open();
        tier.drain();
        moved
    }

    /// The shard and the flash map's tag of `key` (tests).
    #[cfg(test)]
    pub(crate) fn flash_slot_of(&self, key: &[u8]) -> Option<(u64, u32)> {
        let hash = self.hasher.hash_one(key);
        let tag = self.flash.get()?.packing.tag_of(hash);
        Some(((hash >> 32) & self.shard_mask, tag))
    }

    /// Runs the maintenance thread's work once, now (tests).
    #[doc(hidden)]
    pub fn flash_maintain(&self) {
        if let Some(t) = self.flash.get() {
            self.maintain_once(t);
        }
    }

    /// Reads `key` back from flash after RAM missed: a hit, or `None`.
    /// With [`Back::ForChange`] the record comes back into RAM (or is
    /// forgotten if it cannot) and the caller reads RAM again.
    #[cold]
    #[inline(never)]
    pub(super) fn read_flash(&self, key: &[u8], back: Back, r: &Report) -> Option<Hit> {
        self.read_flash_as(key, back, r, false).flatten()
    }

    /// [`Store::read_flash`]; with `nowait`, only from the write buffers or
    /// the page cache: `None` when the record's bytes would have to come
    /// from the device (nothing changed then), else the answer.
    pub(super) fn read_flash_as(
        &self,
        key: &[u8],
        back: Back,
        r: &Report,
        nowait: bool,
    ) -> Option<Option<Hit>> {
        let Some(tier) = self.flash.get() else {
            return Some(None);
        };
        // A record moved by compaction while it was read is read again
        // where it went (a few times at most).
        for _ in 0..4 {
            match self.read_back(tier, key, back, r, nowait) {
                Attempt::Done(hit) => return Some(hit),
                Attempt::Moved => {}
                Attempt::WouldBlock => return None,
            }
        }
        Some(None)
    }

    /// One attempt of [`Store::read_flash_as`].
    fn read_back(&self, tier: &Tier, key: &[u8], back: Back, r: &Report, nowait: bool) -> Attempt {
        let hit = |l: &mut Loc| l.hits = l.hits.saturating_add(1);
        let loc = {
            let (mut shard, hash, now) = self.shard(key, r);
            if shard.find(hash, key).is_some() {
                return Attempt::Done(None);
            }
            let Some(f) = shard.flash.as_deref_mut() else {
                return Attempt::Done(None);
            };
            let Some(l) = f.get(hash) else {
                return Attempt::Done(None);
            };
            if is_expired(l.exptime, now) || !tier.holds(&l) {
                f.forget(hash);
                return Attempt::Done(None);
            }
            if nowait {
                // Counted once read (a read that would wait is not one).
                Loc {
                    hits: l.hits.saturating_add(1).min(HITS_MAX),
                    ..l
                }
            } else {
                f.update(hash, hit).unwrap_or(l)
            }
        };
        let c = &tier.counters;
        let read = tier.read(&loc, key, nowait);
        if read == Err(ReadMiss::WouldBlock) {
            return Attempt::WouldBlock;
        }
        let (mut shard, hash, now) = self.shard(key, r);
        if nowait {
            if let Some(f) = shard.flash.as_deref_mut() {
                f.update_if(hash, &loc, hit);
            }
        }
        let now_at = shard.flash.as_ref().and_then(|f| f.get(hash));
        if now_at.is_some_and(|l| !l.same(&loc)) && shard.find(hash, key).is_none() {
            // Moved (compaction) or replaced while it was read.
            return Attempt::Moved;
        }
        c.get_extstore.fetch_add(1, Relaxed);
        let bytes = match read {
            Ok(b) => b,
            Err(miss) => {
                c.miss_from_extstore.fetch_add(1, Relaxed);
                if miss == ReadMiss::BadCrc {
                    c.badcrc_from_extstore.fetch_add(1, Relaxed);
                }
                // Another key's record stays that key's.
                if let (Some(f), false) = (shard.flash.as_deref_mut(), miss == ReadMiss::OtherKey) {
                    f.forget_if(hash, &loc);
                }
                return Attempt::Done(None);
            }
        };
        let Ok(rec) = record::decode(&bytes, loc.gen) else {
            return Attempt::Done(None);
        };
        if now_at.is_none() || shard.find(hash, key).is_some() {
            // Deleted, or stored in RAM, while it was read: RAM wins.
            return Attempt::Done(None);
        }
        let marks = rec.fields.marks & (KEY_BINARY | FETCHED);
        let hit = Hit {
            item: Item::new(key, rec.fields.flags, rec.value),
            cas: rec.fields.cas,
            exptime: loc.exptime,
            exptime_before: loc.exptime,
            last_access: loc.last_access,
            fetched: marks & FETCHED != 0 || loc.hits > 1,
            stale: false,
            won: false,
            token_sent: false,
            created: false,
            binary_key: marks & KEY_BINARY != 0,
        };
        let recache = match back {
            Back::ForChange => true,
            Back::Read => loc.hits >= tier.config.recache_after && tier.recache_tick(),
        };
        if recache {
            let parts = [rec.value];
            let contents =
                shard.contents(key, rec.fields.flags, &parts, loc.exptime, rec.fields.cas);
            match shard.alloc(&contents, now, None) {
                Some(item) => {
                    shard.observe_cas(rec.fields.cas);
                    // `put` forgets the flash record; a tier that keeps
                    // copies keeps it as the copy of this same version.
                    let copy = shard.flash.as_deref_mut().and_then(|f| f.take_copy(hash));
                    shard.put(
                        hash,
                        None,
                        item,
                        loc.exptime,
                        rec.fields.cas,
                        marks | FETCHED,
                        now,
                    );
                    if let (Some(loc), Some(f)) = (copy, shard.flash.as_deref_mut()) {
                        f.insert(hash, loc);
                    }
                    c.recache_from_extstore.fetch_add(1, Relaxed);
                }
                None if back == Back::ForChange => {
                    if let Some(f) = shard.flash.as_deref_mut() {
                        f.forget(hash);
                    }
                }
                None => {}
            }
            if let Some(sink) = self.sink() {
                // Evictions made for it are heard before anything else.
                report(&mut shard, sink, r, hash, key, false);
            }
        } else if let Some(f) = shard.flash.as_deref_mut() {
            f.update(hash, |l| l.last_access = now);
        }
        Attempt::Done(Some(hit))
    }

    /// Before a command that changes `key`'s entry: its record, if on
    /// flash, back in RAM (the command then sees it as memcached would).
    #[inline]
    pub(super) fn back_for_change(&self, key: &[u8], r: &Report) {
        if self.flash.get().is_some() {
            self.read_flash(key, Back::ForChange, r);
        }
    }

    /// Before a delete: a plain one forgets the key's record on flash
    /// without reading it (true if there was one, live); any other (CAS,
    /// invalidation) brings it back into RAM first.
    #[cold]
    #[inline(never)]
    pub(super) fn delete_on_flash(&self, key: &[u8], req: &DeleteRequest, r: &Report) -> bool {
        if *req != DeleteRequest::default() {
            self.read_flash(key, Back::ForChange, r);
            return false;
        }
        let (mut shard, hash, now) = self.shard(key, r);
        if shard.find(hash, key).is_some() {
            return false;
        }
        let Some(f) = shard.flash.as_deref_mut() else {
            return false;
        };
        let Some(l) = f.get(hash) else {
            return false;
        };
        f.forget(hash);
        f.tier.holds(&l) && !is_expired(l.exptime, now)
    }

    /// Moves entries idle longer than `ext_item_age` to flash: the next
    /// [`IDLE_WALK`] index positions of each shard (a whole walk takes
    /// a few seconds for a million entries).
    fn move_idle(&self, tier: &Tier) {
        let Some(age) = tier.config.item_age else {
            return;
        };
        let now = self.clock.now();
        for cell in self.shards.iter() {
            let mut shard = cell.0.write();
            let Some(at) = shard.flash.as_deref().map(|f| f.idle_at) else {
                continue;
            };
            let end = at + IDLE_WALK;
            shard.spill_idle(at..end, now, age);
            let next = if end >= shard.positions() { 0 } else { end };
            if let Some(f) = shard.flash.as_deref_mut() {
                f.idle_at = next;
            }
        }
    }

    /// One round of maintenance: entries idle too long moved to flash,
    /// the shards' maps purged of dropped pages, then pages compacted
    /// while free pages are few.
    fn maintain_once(&self, tier: &Tier) {
        self.move_idle(tier);
        if tier.purge_due.swap(false, Relaxed) {
            for cell in self.shards.iter() {
                if let Some(f) = cell.0.write().flash.as_deref_mut() {
                    f.purge();
                }
            }
        }
        // Bounded: a round compacts at most every page once.
        for _ in 0..tier.config.files.len().max(1) * 1024 {
            let Some((page, gen, filled)) = tier.take_for_compaction() else {
                break;
            };
            self.compact(tier, page, gen, filled);
        }
    }

    /// Rewrites the live records of `page` into the open page and frees
    /// it; records never read are dropped instead when `drop_unread` is on
    /// and free pages are under `drop_under`.
    fn compact(&self, tier: &Tier, page: u32, gen: u32, filled: u64) {
        let c = &tier.counters;
        let drop_unread = tier.dropping_unread();
        let chunk = tier.config.wbuf_size.min(filled as usize);
        let mut buf = vec![0u8; chunk];
        let mut off = 0u64;
        'page: while off < filled {
            let want = chunk.min((filled - off) as usize);
            let got = match tier.read_raw(page, off, &mut buf[..want]) {
                Some(n) if n > 0 => n,
                _ => break,
            };
            let mut at = 0usize;
            while at < got {
                if got - at < record::HEADER && off + (got as u64) < filled {
                    // A header cut by the chunk's end: read on from it.
                    break;
                }
                let Some(len) = record::len_at(&buf[at..got]) else {
                    // Not a record's header: the rest of the page is lost.
                    c.compact_lost.fetch_add(1, Relaxed);
                    break 'page;
                };
                if at + len > got {
                    if at == 0 {
                        c.compact_lost.fetch_add(1, Relaxed);
                        break 'page;
                    }
                    break;
                }
                let bytes = &buf[at..at + len];
                let rec_off = off + at as u64;
                at += len;
                if record::is_dead(bytes) {
                    continue;
                }
                let Ok(rec) = record::decode(bytes, gen) else {
                    c.compact_lost.fetch_add(1, Relaxed);
                    continue;
                };
                if rec.fields.marks & record::PAGE_MARK != 0 {
                    continue;
                }
                self.rescue(tier, page, gen, rec_off as u32, bytes, &rec, drop_unread);
            }
            off += at as u64;
        }
        tier.free_page(page, gen);
        tier.wake_maintainer();
    }

    /// Moves one record of a page being compacted, if a shard still names
    /// it there.
    #[allow(clippy::too_many_arguments)]
    fn rescue(
        &self,
        tier: &Tier,
        page: u32,
        gen: u32,
        off: u32,
        bytes: &[u8],
        rec: &record::Record<'_>,
        drop_unread: bool,
    ) {
        let c = &tier.counters;
        let hash = self.hasher.hash_one(rec.key);
        let now = self.clock.now();
        let mut shard = self.cell(hash).write();
        let Some(f) = shard.flash.as_deref_mut() else {
            return;
        };
        let Some(l) = f.get(hash) else {
            return;
        };
        if (l.page, l.gen, l.off) != (page, gen, off) {
            return;
        }
        if is_expired(l.exptime, now) || (drop_unread && l.hits == 0) {
            c.compact_skipped.fetch_add(1, Relaxed);
            f.forget(hash);
            return;
        }
        // Written again for the generation of the page it goes to.
        let encode = |out: &mut Vec<u8>, g| record::encode(out, rec.key, rec.value, &rec.fields, g);
        match tier.append(bytes.len(), encode) {
            Some(new) => {
                c.compact_rescues.fetch_add(1, Relaxed);
                f.insert(
                    hash,
                    Loc {
                        exptime: l.exptime,
                        last_access: l.last_access,
                        hits: l.hits,
                        ..new
                    },
                );
            }
            None => {
                c.compact_lost.fetch_add(1, Relaxed);
                f.forget(hash);
            }
        }
    }
}

/// Writes the record of an entry being evicted to flash: its place, or
/// `None` when it is not for flash or cannot be written now. Called by the
/// shard under its lock (`shard/room.rs`).
pub(crate) fn spill(
    tier: &Tier,
    key: &[u8],
    value: &[u8],
    fields: &Fields,
    last_access: u32,
) -> Option<Loc> {
    if value.len() < tier.config.item_size {
        return None;
    }
    let len = record::len(key.len(), value.len());
    let loc = tier.append(len, |out, gen| record::encode(out, key, value, fields, gen))?;
    Some(Loc {
        exptime: fields.exptime,
        last_access,
        ..loc
    })
}

/// The maintenance thread: purges and compacts when woken, or every
/// [`MAINTAIN_EVERY`]; ends with the store.
fn maintain(store: Weak<Store>) {
    loop {
        std::thread::park_timeout(MAINTAIN_EVERY);
        let Some(store) = store.upgrade() else {
            return;
        };
        if let Some(tier) = store.flash.get() {
            store.maintain_once(tier);
        }
    }
}

impl Drop for Store {
    /// A persistent tier's buffers are written before the store is gone (a clean stop keeps
    /// every record handed to the tier, and the next store on the files finds them): the
    /// writer thread may hold the tier a while longer.
    fn drop(&mut self) {
        if let Some(t) = self.flash.get().filter(|t| t.config.persist) {
            t.flush_open();
            t.drain();
        }
    }
}
