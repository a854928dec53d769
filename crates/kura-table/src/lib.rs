//! kura-table: Tokyo-Cabinet-style fixed-length tables (seed 003). Records
//! are addressed by a dense natural number (ids 1 to `max`); each has a
//! slot of fixed width in one memory-mapped file, so get, put and delete are
//! O(1): an offset computation and a copy.
//!
//! * Concurrency: writers take one of [`STRIPES`] striped mutexes (Tokyo
//!   Cabinet used 127), chosen by id. A reader takes no lock at all: each
//!   slot carries a version that a writer makes odd while it writes, and a
//!   reader copies the slot with plain (relaxed atomic) loads between two
//!   looks at it, retrying if it moved (`slots.rs`). Reads never write a
//!   shared cache line and touch nothing but the slot, so they scale and
//!   keep many cache misses in flight.
//! * Durability ([`Durability`]): `Always` syncs the pages a write touched
//!   before the write returns; `EverySec` syncs dirty tables from a
//!   background thread at most a second apart; `No` leaves it to the OS.
//!   A table without a file lives in anonymous memory.
//! * Crash safety: each slot carries a CRC-32 of its length, flags and
//!   bytes. A table not closed cleanly is checked slot by slot when it is
//!   opened again; a slot torn by the crash (a write that was never
//!   acknowledged under `Always`) is cleared and counted in [`OpenReport`].
//!
//! ```
//! use kura_table::{Durability, Table, TableOptions};
//!
//! let t = Table::open(None, TableOptions { width: 16, max: 1000, durability: Durability::No })?;
//! t.put(42, b"hello", 0)?;
//! let mut buf = Vec::new();
//! assert_eq!(t.get_into(42, &mut buf)?, Some(0));
//! assert_eq!(buf, b"hello");
//! t.rotate(7, b"abcd", 6, 0)?;
//! t.rotate(7, b"efgh", 6, 0)?;
//! assert_eq!(t.get(7)?.map(|(v, _)| v), Some(b"cdefgh".to_vec()));
//! let mut ids = Vec::new();
//! t.range(&"[1,max]".parse()?, usize::MAX, |id, _, _| ids.push(id));
//! assert_eq!(ids, [7, 42]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod edit;
mod open;
mod range;
mod slots;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use memmap2::MmapMut;

pub use edit::Edit;
use open::io;
pub use range::{End, RangeError, RangeSpec};
use slots::Layout;
pub use slots::Reader;

/// Stripes of writers' locks (Tokyo Cabinet used 127 mutexes).
pub const STRIPES: usize = 256;

/// One writers' lock, alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct Stripe(Mutex<()>);

/// The largest slot width.
pub const MAX_WIDTH: u32 = 1 << 20;

const MAGIC: &[u8; 8] = b"KURATBL\x01";

/// When writes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Sync the touched pages before a write returns.
    Always,
    /// Sync in the background at most a second apart.
    EverySec,
    /// Leave it to the OS (and sync at a clean close).
    #[default]
    No,
}

/// The shape of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// The largest value, in bytes.
    pub width: u32,
    /// The largest id (ids are 1 to `max`).
    pub max: u64,
    pub durability: Durability,
}

/// Errors of a table.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("id {id} is outside the table (ids are 1 to {max})")]
    BadId { id: u64, max: u64 },
    #[error("a value of {len} bytes does not fit in slots of {width}")]
    TooWide { len: usize, width: u32 },
    #[error("width must be 1 to {MAX_WIDTH} bytes and max at least 1")]
    BadShape,
    #[error("{path}: {reason}")]
    BadFile { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What opening a table found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// The file existed (its records were kept).
    pub existed: bool,
    /// It was not closed cleanly, so every slot was checked.
    pub checked: bool,
    /// Slots a crash left half written, cleared.
    pub torn: u64,
    /// Records present.
    pub records: u64,
}

struct Inner {
    map: MmapMut,
    layout: Layout,
    stripes: Box<[Stripe; STRIPES]>,
    count: AtomicU64,
    low: AtomicU64,
    high: AtomicU64,
    dirty: AtomicBool,
    durability: Durability,
    path: Option<PathBuf>,
}

// SAFETY: `base` points into `map`, which lives as long as `Inner` and is
// never remapped. Every access through it is to one slot, read with atomic
// loads (any thread) or written with atomic stores by the one thread that
// holds that slot's stripe lock (see slots.rs for the version protocol); the header is written only by `open` and
// `Drop`, which have the table to themselves.
unsafe impl Send for Inner {}
// SAFETY: as above: shared access goes through atomics only.
unsafe impl Sync for Inner {}

/// A fixed-length table. Cheap to share (`Arc<Table>`); all methods take
/// `&self`.
pub struct Table {
    inner: Arc<Inner>,
    flusher: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    report: OpenReport,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.inner.path)
            .field("width", &self.inner.layout.width)
            .field("max", &self.inner.layout.max)
            .finish()
    }
}

impl Table {
    /// What opening found.
    pub fn open_report(&self) -> OpenReport {
        self.report
    }

    /// The size of a buffer that [`Table::get_buf`] fills fastest: the
    /// width rounded up to whole 8-byte words.
    pub fn buf_len(&self) -> usize {
        self.inner.layout.data_words * 8
    }

    /// The slot width in bytes.
    pub fn width(&self) -> u32 {
        self.inner.layout.width
    }

    /// The largest id.
    pub fn max(&self) -> u64 {
        self.inner.layout.max
    }

    /// Records present.
    pub fn len(&self) -> u64 {
        self.inner.count.load(Ordering::Relaxed)
    }

    /// True when no record is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline(always)]
    fn check_id(&self, id: u64) -> Result<(), TableError> {
        let r = self.reader();
        if r.valid(id) {
            Ok(())
        } else {
            Err(r.bad_id(id))
        }
    }

    /// A [`Reader`] for a loop of reads: the same reads as
    /// [`Table::get_buf`], with the table's geometry kept in the caller's
    /// registers instead of fetched again on every call.
    ///
    /// ```
    /// use kura_table::{Durability, Table, TableOptions};
    ///
    /// let t = Table::open(None, TableOptions { width: 8, max: 100, durability: Durability::No })?;
    /// t.put(3, b"abc", 7)?;
    /// let (r, mut buf) = (t.reader(), vec![0u8; t.buf_len()]);
    /// let found: Vec<u64> = (1..=100).filter(|&id| matches!(r.get_buf(id, &mut buf), Ok(Some(_)))).collect();
    /// assert_eq!(found, [3]);
    /// assert_eq!(r.get_buf(3, &mut buf)?, Some((3, 7)));
    /// assert!(r.get_buf(101, &mut buf).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn reader(&self) -> Reader<'_> {
        self.inner.reader()
    }

    /// Copies record `id` into `buf` (replacing its contents); returns its
    /// flags, or `None` when absent. Takes no lock and allocates nothing
    /// once `buf` has room for `width` bytes.
    ///
    /// # Errors
    /// An id outside the table.
    #[inline]
    pub fn get_into(&self, id: u64, buf: &mut Vec<u8>) -> Result<Option<u32>, TableError> {
        self.check_id(id)?;
        Ok(self.inner.reader().read(id, buf))
    }

    /// Copies record `id` into `out` (Tokyo Cabinet's `tcfdbget4`, reading
    /// into the caller's buffer); returns its length and flags, or `None`
    /// when absent. The bytes past the record's length in `out` may be
    /// overwritten up to the next multiple of 8 (give it [`Table::buf_len`]
    /// bytes); a shorter `out` gets the first `out.len()` bytes (the length
    /// returned is the record's).
    ///
    /// # Errors
    /// An id outside the table.
    #[inline]
    pub fn get_buf(&self, id: u64, out: &mut [u8]) -> Result<Option<(usize, u32)>, TableError> {
        self.reader().get_buf(id, out)
    }

    /// Reads many records, as a multi-get does: `each(i, found)` for every
    /// `ids[i]` in order, with its length and flags (the bytes in `buf`,
    /// which gets [`Table::buf_len`] bytes) or `None` when absent or
    /// outside the table. The slots of the next few ids are touched before
    /// they are read, so the cache misses of a batch of random ids overlap
    /// instead of following one another.
    pub fn get_many(
        &self,
        ids: &[u64],
        buf: &mut Vec<u8>,
        mut each: impl FnMut(usize, Option<(&[u8], u32)>),
    ) {
        const AHEAD: usize = 16;
        let r = self.reader();
        buf.resize(self.buf_len(), 0);
        let touch = |id: u64| {
            if r.valid(id) {
                // A plain load whose result is not needed: the line (and
                // its TLB entry) is then on its way while earlier ids are
                // read.
                std::hint::black_box(r.slot(id)[0].load(Ordering::Relaxed));
            }
        };
        for &id in ids.iter().take(AHEAD) {
            touch(id);
        }
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&ahead) = ids.get(i + AHEAD) {
                touch(ahead);
            }
            let got = if r.valid(id) {
                r.read_buf(id, buf)
            } else {
                None
            };
            each(i, got.map(|(len, flags)| (&buf[..len], flags)));
        }
    }

    /// Record `id` and its flags, or `None` when absent.
    ///
    /// # Errors
    /// An id outside the table.
    pub fn get(&self, id: u64) -> Result<Option<(Vec<u8>, u32)>, TableError> {
        let mut buf = Vec::new();
        Ok(self.get_into(id, &mut buf)?.map(|f| (buf, f)))
    }

    /// Stores `value` with client `flags` as record `id`.
    ///
    /// # Errors
    /// An id outside the table, a value wider than the slots.
    pub fn put(&self, id: u64, value: &[u8], flags: u32) -> Result<(), TableError> {
        self.update(id, |_| Some((value.to_vec(), flags)))
            .map(|_| ())
    }

    /// Removes record `id`; false when it was absent.
    ///
    /// # Errors
    /// An id outside the table.
    pub fn delete(&self, id: u64) -> Result<bool, TableError> {
        let mut had = false;
        self.update(id, |old| {
            had = old.is_some();
            None
        })?;
        Ok(had)
    }

    /// Value rotation: appends `data` to record `id` (creating it with
    /// `flags` when absent; an existing record keeps its flags), then cuts
    /// from the front so it is at most `max_len` bytes (and at most the
    /// slot width). Returns the new length.
    ///
    /// # Errors
    /// An id outside the table.
    pub fn rotate(
        &self,
        id: u64,
        data: &[u8],
        max_len: usize,
        flags: u32,
    ) -> Result<usize, TableError> {
        self.rotate_then(id, data, max_len, flags, |_| {})
    }

    /// Changes record `id` under its stripe's lock (readers go on): `f` gets the current
    /// value and flags (or `None`) and returns the new ones (or `None` to
    /// delete). Returns whether the record is present afterwards.
    ///
    /// # Errors
    /// An id outside the table, a new value wider than the slots (nothing
    /// changes then).
    pub fn update(
        &self,
        id: u64,
        f: impl FnOnce(Option<(&[u8], u32)>) -> Option<(Vec<u8>, u32)>,
    ) -> Result<bool, TableError> {
        let present = std::cell::Cell::new(false);
        self.edit(
            id,
            |old| {
                present.set(old.is_some());
                match f(old) {
                    Some((v, fl)) => Edit::Put(v, fl),
                    None => Edit::Delete,
                }
            },
            |new| present.set(new.is_some()),
        )?;
        Ok(present.get())
    }

    /// The smallest id present.
    pub fn min_id(&self) -> Option<u64> {
        let inner = &*self.inner;
        let from = inner.low.load(Ordering::Relaxed).max(1);
        let r = inner.reader();
        (from..=inner.layout.max).find(|&id| r.present(id))
    }

    /// The largest id present.
    pub fn max_id(&self) -> Option<u64> {
        let inner = &*self.inner;
        let to = inner.high.load(Ordering::Relaxed).min(inner.layout.max);
        let r = inner.reader();
        (1..=to).rev().find(|&id| r.present(id))
    }

    /// Calls `each(id, value, flags)` for the records present in `range`, in
    /// id order, at most `limit` of them; returns how many. Each record is
    /// read consistently; the range as a whole is not a snapshot.
    pub fn range(
        &self,
        range: &RangeSpec,
        limit: usize,
        mut each: impl FnMut(u64, &[u8], u32),
    ) -> usize {
        let Some((lo, hi)) = range.resolve(self.min_id(), self.max_id()) else {
            return 0;
        };
        let hi = hi.min(self.inner.layout.max);
        let mut buf = Vec::with_capacity(self.inner.layout.width as usize);
        let r = self.reader();
        let mut n = 0;
        for id in lo..=hi {
            if n >= limit {
                break;
            }
            if let Some(flags) = r.read(id, &mut buf) {
                each(id, &buf, flags);
                n += 1;
            }
        }
        n
    }

    /// Writes every change to the disk now.
    ///
    /// # Errors
    /// The sync failed.
    pub fn sync(&self) -> Result<(), TableError> {
        if let Some(p) = &self.inner.path {
            self.inner.map.flush().map_err(io(p))?;
        }
        Ok(())
    }
}

impl Inner {
    #[inline(always)]
    fn reader(&self) -> Reader<'_> {
        Reader::new(self.layout)
    }

    /// After a write to slot `id`: sync it (`Always`) or note the table dirty.
    fn wrote(&self, id: u64) -> Result<(), TableError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        match self.durability {
            Durability::Always => {
                let off = self.layout.offset(id);
                self.map
                    .flush_range(off, self.layout.slot_size)
                    .map_err(io(path))
            }
            Durability::EverySec => {
                self.dirty.store(true, Ordering::Release);
                Ok(())
            }
            Durability::No => Ok(()),
        }
    }
}
