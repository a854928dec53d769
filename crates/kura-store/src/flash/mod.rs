//! The flash tier (memcached's extstore, `-o ext_path=FILE:SIZE`): values
//! of evicted entries written to files in large sequential pages, RAM
//! keeping only each key's place on flash (`index.rs`, per shard).
//!
//! * When a shard evicts a live entry whose value is at least
//!   [`FlashConfig::item_size`] bytes, its record (`record.rs`: header,
//!   key, value, CRC-32) is appended to the open page's write buffer and
//!   the shard keeps its [`Loc`](index::Loc). memcached moves items from
//!   its LRU tail when memory runs low; kura's eviction is that moment.
//! * A full write buffer ([`FlashConfig::wbuf_size`]) goes to the writer
//!   thread, which writes it with one `pwrite`; until written, reads are
//!   served from the buffer. At most [`FlashConfig::write_queue`] buffers
//!   wait: past that, evicted values are dropped (counted), never waited
//!   for.
//! * Pages ([`FlashConfig::page_size`]) are filled in turn; with no free
//!   page, the oldest full page is dropped and its records become misses
//!   (`extstore_page_evictions`). When free pages fall under
//!   `compact_under`, the store's maintenance thread rewrites the live
//!   records of the oldest page less full than `max_frag` and frees it
//!   (`store/flash.rs`).
//! * A read checks the record's CRC and key and the page's generation
//!   before and after the read: a damaged, short or reused record is a
//!   miss, never other bytes.
//!
//! The files are a cache. By default they are emptied when opened (kura
//! server's `--ext-path`: its durable log owns durability). With
//! [`FlashConfig::persist`] (kura http's `--disk-cache`) they are read back
//! instead (`rebuild.rs`): every page is scanned once, each record checked by
//! its CRC, and the records still wanted are indexed again, so a restart
//! keeps the tier. For that, a record whose key is deleted or replaced while
//! its page is kept is marked dead in place (one byte), and each page starts
//! with a marker naming its generation (`record.rs`).

mod config;
mod device;
pub(crate) mod index;
mod packing;
pub(crate) mod pool;
pub(crate) mod rebuild;
pub(crate) mod record;
mod stats;
pub(crate) mod table;
#[cfg(test)]
mod tests;
mod write;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

pub use config::FlashConfig;
use device::Device;
pub use device::Faults;
use index::Loc;
pub use pool::FlashRead;
pub(crate) use pool::Pool;
use stats::Counters;
pub use stats::FlashStats;

/// One page's state.
#[derive(Debug, Default)]
struct Page {
    /// Bumped whenever the page is dropped, freed or lost: records of an
    /// older generation are gone.
    gen: AtomicU32,
    /// Bytes of records still named by a shard.
    live: AtomicU64,
    objects: AtomicU64,
    /// Bytes appended (written or in a buffer).
    filled: AtomicU64,
}

/// A write buffer: bytes for `start..` of a page.
#[derive(Debug)]
struct Wbuf {
    page: u32,
    gen: u32,
    start: u64,
    data: Vec<u8>,
}

impl Wbuf {
    /// Where in the buffer `loc`'s record starts, if it is in this buffer.
    fn index_of(&self, loc: &Loc) -> Option<usize> {
        if (self.page, self.gen) != (loc.page, loc.gen) {
            return None;
        }
        let from = (u64::from(loc.off)).checked_sub(self.start)? as usize;
        (from < self.data.len()).then_some(from)
    }

    /// The bytes of `loc` if this buffer holds them.
    fn holds(&self, loc: &Loc) -> Option<&[u8]> {
        if (self.page, self.gen) != (loc.page, loc.gen) {
            return None;
        }
        let from = (u64::from(loc.off)).checked_sub(self.start)? as usize;
        self.data.get(from..from + loc.len as usize)
    }
}

#[derive(Debug, Default)]
struct WriteState {
    /// The page being filled, its next offset and its buffer.
    open: Option<(u64, Wbuf)>,
    pending: VecDeque<Arc<Wbuf>>,
    free: Vec<u32>,
    /// Full pages, oldest first.
    full: VecDeque<u32>,
    /// Records to mark dead once the buffer the writer is writing is
    /// written (persistent tiers).
    kills: Vec<Loc>,
    /// When the open buffer took its first record (`flush_after`).
    open_since: Option<std::time::Instant>,
}

/// Why a read from flash is a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadMiss {
    /// The page was reused or lost.
    Gone,
    /// Fewer bytes came back than the record's length.
    Short,
    /// The bytes are not a record (CRC).
    BadCrc,
    /// A sound record of another key whose hash has the same tag in the
    /// shard's map (`table.rs`): a miss, not damage.
    OtherKey,
    /// Asked not to wait on the device, and its bytes are not in the page
    /// cache: nothing was read (read it on a reader thread).
    WouldBlock,
}

/// The flash tier: its device, pages and writer.
pub(crate) struct Tier {
    pub(crate) config: FlashConfig,
    dev: Device,
    pages: Box<[Page]>,
    st: Mutex<WriteState>,
    written: Condvar,
    pub(crate) counters: Counters,
    /// Pages were dropped or lost: the shards' maps have entries to purge.
    pub(crate) purge_due: AtomicBool,
    /// The thread purging and compacting for the store, woken when there
    /// is work.
    pub(crate) maintainer: Mutex<Option<std::thread::Thread>>,
    /// The next page generation: given out in order, so a persistent
    /// tier's markers tell which page is older.
    next_gen: AtomicU32,
    /// The reader threads of non-blocking reads.
    pub(crate) pool: Pool,
    /// Appends wait for the writer instead of dropping records when
    /// `write_queue` buffers are waiting ([`Store::flash_spill_all`]).
    ///
    /// [`Store::flash_spill_all`]: crate::Store::flash_spill_all
    pub(crate) patient: AtomicBool,
    /// How the shards' maps pack a record's place.
    pub(crate) packing: table::Packing,
}

impl std::fmt::Debug for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tier")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Tier {
    /// Opens the files and starts the writer thread.
    pub(crate) fn open(mut config: FlashConfig) -> io::Result<Arc<Tier>> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if config.files.is_empty() {
            return Err(bad("no flash file given".into()));
        }
        if config.page_size == 0 || config.page_size > (1 << 31) {
            return Err(bad(format!(
                "page size {} not in 1..=2 GiB",
                config.page_size
            )));
        }
        if config.wbuf_size == 0 || config.wbuf_size as u64 > config.page_size {
            return Err(bad(format!(
                "write buffer of {} bytes: must be at least 1 and at most a page ({})",
                config.wbuf_size, config.page_size
            )));
        }
        let dev = Device::open(&config.files, config.page_size, config.persist)?;
        let n = dev.pages();
        if config.compact_under == 0 {
            config.compact_under = (n / 100).max(1);
        }
        if config.drop_under == 0 {
            config.drop_under = config.compact_under;
        }
        let packing = table::Packing::new(config.page_size, config.wbuf_size, n).map_err(bad)?;
        config.threads = config.threads.max(1);
        config.recache_rate = config.recache_rate.max(1);
        // The maps count a record's hits up to this.
        config.recache_after = config.recache_after.min(table::HITS_MAX);
        config.write_queue = config.write_queue.max(1);
        config.read_queue = config.read_queue.max(1);
        let pool = Pool::new(config.read_queue);
        let tier = Arc::new(Tier {
            config,
            pages: (0..n).map(|_| Page::default()).collect(),
            dev,
            st: Mutex::new(WriteState {
                free: (0..n as u32).rev().collect(),
                ..Default::default()
            }),
            written: Condvar::new(),
            counters: Counters::default(),
            purge_due: AtomicBool::new(false),
            maintainer: Mutex::new(None),
            next_gen: AtomicU32::new(1),
            pool,
            patient: AtomicBool::new(false),
            packing,
        });
        tier.pool.start(tier.config.threads)?;
        let weak = Arc::downgrade(&tier);
        std::thread::Builder::new()
            .name("kura-flash-write".into())
            .spawn(move || write::writer(weak))?;
        Ok(tier)
    }

    pub(crate) fn faults(&self) -> &Faults {
        &self.dev.faults
    }

    /// Whether `loc`'s page still holds its record.
    pub(crate) fn holds(&self, loc: &Loc) -> bool {
        self.pages[loc.page as usize].gen.load(Relaxed) == loc.gen
    }

    /// The records at `loc` no longer count as live; in a persistent tier
    /// it is marked dead on its page, so a restart does not bring it back.
    pub(crate) fn release(&self, loc: &Loc) {
        let mut st = self.st.lock();
        let p = &self.pages[loc.page as usize];
        if p.gen.load(Relaxed) == loc.gen {
            p.live.fetch_sub(u64::from(loc.len), Relaxed);
            p.objects.fetch_sub(1, Relaxed);
            if self.config.persist {
                self.kill(&mut st, loc);
            }
        }
    }

    /// Marks the record at `loc` (of a page still in this generation) dead:
    /// in its buffer if not yet written, on the device if written (under
    /// the state lock, so the page cannot be reused meanwhile), or after
    /// the writer's write if the writer holds its buffer now.
    fn kill(&self, st: &mut WriteState, loc: &Loc) {
        if let Some((_, b)) = st.open.as_mut() {
            if let Some(i) = b.index_of(loc) {
                b.data[i] = record::DEAD;
                return;
            }
        }
        for w in st.pending.iter_mut() {
            let Some(i) = w.index_of(loc) else {
                continue;
            };
            match Arc::get_mut(w) {
                Some(w) => w.data[i] = record::DEAD,
                None => st.kills.push(*loc),
            }
            return;
        }
        // One byte into the page cache: a SIGKILL after this keeps it.
        if self
            .dev
            .write(loc.page, u64::from(loc.off), &[record::DEAD])
            .is_err()
        {
            self.counters.write_errors.fetch_add(1, Relaxed);
        }
    }

    /// Wakes the maintenance thread.
    pub(crate) fn wake_maintainer(&self) {
        if let Some(t) = &*self.maintainer.lock() {
            t.unpark();
        }
    }

    /// Starts a new generation of page `p`, empty (under the state lock).
    /// A persistent tier erases the page's marker on the device first, so
    /// that a restart before the page is written again does not bring its
    /// records back.
    fn reset_page(&self, p: u32) {
        let pg = &self.pages[p as usize];
        if self.config.persist && self.dev.write(p, 0, &[0u8; record::HEADER]).is_err() {
            self.counters.write_errors.fetch_add(1, Relaxed);
        }
        pg.gen.store(self.next_gen.fetch_add(1, Relaxed), Relaxed);
        pg.live.store(0, Relaxed);
        pg.objects.store(0, Relaxed);
        pg.filled.store(0, Relaxed);
    }

    /// Reads the record at `loc` and checks it is `key`'s: its bytes.
    pub(crate) fn read(&self, loc: &Loc, key: &[u8], nowait: bool) -> Result<Vec<u8>, ReadMiss> {
        if !self.holds(loc) {
            return Err(ReadMiss::Gone);
        }
        let mut buf = vec![0u8; loc.len as usize];
        let buffered = {
            let st = self.st.lock();
            let open = st.open.iter().map(|(_, b)| b);
            let waiting = st.pending.iter().map(|b| &**b);
            match open.chain(waiting).find_map(|b| b.holds(loc)) {
                Some(bytes) => {
                    buf.copy_from_slice(bytes);
                    true
                }
                None => false,
            }
        };
        if !buffered && nowait {
            if !self.dev.read_cached(loc.page, u64::from(loc.off), &mut buf) {
                return Err(ReadMiss::WouldBlock);
            }
        } else if !buffered {
            match self.dev.read(loc.page, u64::from(loc.off), &mut buf) {
                Ok(n) if n == buf.len() => {}
                _ => return Err(ReadMiss::Short),
            }
        }
        if !self.holds(loc) {
            return Err(ReadMiss::Gone);
        }
        match record::decode(&buf, loc.gen) {
            Ok(r) if r.key == key => {}
            Ok(_) => return Err(ReadMiss::OtherKey),
            Err(record::Damage::Short) => return Err(ReadMiss::Short),
            // Marked dead in place while this read was under way (a concurrent read brought
            // it back into memory, or it was deleted): gone, not damaged.
            Err(_) if record::is_dead(&buf) => return Err(ReadMiss::Gone),
            _ => return Err(ReadMiss::BadCrc),
        }
        self.counters.objects_read.fetch_add(1, Relaxed);
        self.counters
            .bytes_read
            .fetch_add(buf.len() as u64, Relaxed);
        Ok(buf)
    }

    /// One in `recache_rate` calls: true.
    pub(crate) fn recache_tick(&self) -> bool {
        let n = self.counters.recache_tick.fetch_add(1, Relaxed);
        n.is_multiple_of(u64::from(self.config.recache_rate))
    }

    /// The page to compact, if free pages are few: the oldest full page
    /// under `max_frag` live and with nothing waiting to be written (or,
    /// dropping unread records, the oldest), taken out of the full pages.
    /// (page, generation, bytes filled).
    pub(crate) fn take_for_compaction(&self) -> Option<(u32, u32, u64)> {
        let mut st = self.st.lock();
        if st.free.len() >= self.config.compact_under {
            return None;
        }
        let limit = (self.config.page_size as f64 * self.config.max_frag) as u64;
        let written = |p: u32| !st.pending.iter().any(|w| w.page == p);
        let sparse = st
            .full
            .iter()
            .position(|&p| self.pages[p as usize].live.load(Relaxed) < limit && written(p));
        // With none sparse enough, `drop_unread` under `drop_under` free
        // pages takes the oldest: its unread records are dropped, the
        // others rewritten.
        let dropping = self.config.drop_unread && st.free.len() < self.config.drop_under;
        let oldest = || {
            st.full
                .iter()
                .position(|&p| written(p))
                .filter(|_| dropping)
        };
        let pos = sparse.or_else(oldest)?;
        let p = st.full.remove(pos)?;
        let pg = &self.pages[p as usize];
        Some((p, pg.gen.load(Relaxed), pg.filled.load(Relaxed)))
    }

    /// Whether compaction should drop records never read.
    pub(crate) fn dropping_unread(&self) -> bool {
        self.config.drop_unread && self.st.lock().free.len() < self.config.drop_under
    }

    /// Reads raw bytes of a page for compaction (`None`: a device error).
    pub(crate) fn read_raw(&self, page: u32, off: u64, buf: &mut [u8]) -> Option<usize> {
        self.dev.read(page, off, buf).ok()
    }

    /// Frees a compacted page.
    pub(crate) fn free_page(&self, page: u32, gen: u32) {
        let mut st = self.st.lock();
        if self.pages[page as usize].gen.load(Relaxed) == gen {
            self.reset_page(page);
            st.free.push(page);
            self.counters.page_reclaims.fetch_add(1, Relaxed);
        }
        self.purge_due.store(true, Relaxed);
    }

    /// Loses page `page` of generation `gen` (its write failed).
    fn lose_page(&self, st: &mut WriteState, page: u32, gen: u32) {
        if self.pages[page as usize].gen.load(Relaxed) != gen {
            return;
        }
        self.reset_page(page);
        if st.open.as_ref().is_some_and(|(_, b)| b.page == page) {
            st.open = None;
        }
        st.full.retain(|&p| p != page);
        st.free.push(page);
        self.purge_due.store(true, Relaxed);
        self.wake_maintainer();
    }
}
