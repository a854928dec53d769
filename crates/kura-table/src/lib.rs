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
mod range;
mod slots;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use memmap2::{MmapMut, MmapOptions};

pub use edit::Edit;
pub use range::{End, RangeError, RangeSpec};
pub use slots::Reader;
use slots::{slot_crc, Layout, HEADER_LEN};

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

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TableError + '_ {
    move |source| TableError::Io {
        path: path.to_owned(),
        source,
    }
}

fn header_bytes(width: u32, max: u64, slot_size: u64, clean: bool) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&width.to_le_bytes());
    h[16..24].copy_from_slice(&max.to_le_bytes());
    h[24..32].copy_from_slice(&slot_size.to_le_bytes());
    let crc = crc32fast::hash(&h[..32]);
    h[32..36].copy_from_slice(&crc.to_le_bytes());
    h[40] = u8::from(clean);
    h
}

impl Table {
    /// Opens (or creates) the table in `path`, or an in-memory table when
    /// `path` is `None`. An existing file must have the same width and max.
    ///
    /// # Errors
    /// A bad shape, I/O errors, or a file that is not a table of this
    /// shape (named in the error).
    pub fn open(path: Option<&Path>, options: TableOptions) -> Result<Table, TableError> {
        let TableOptions {
            width,
            max,
            durability,
        } = options;
        if width == 0 || width > MAX_WIDTH || max == 0 {
            return Err(TableError::BadShape);
        }
        let slot_size = Layout::slot_size(width);
        let bytes = (slot_size as u64)
            .checked_mul(max)
            .and_then(|b| b.checked_add(HEADER_LEN as u64))
            .filter(|&b| usize::try_from(b).is_ok())
            .ok_or(TableError::BadShape)?;
        let mut report = OpenReport::default();
        let (map, durability) = match path {
            None => {
                let map = MmapOptions::new()
                    .len(bytes as usize)
                    .map_anon()
                    .map_err(io(Path::new("(anonymous table)")))?;
                // Random reads over a large table miss the TLB on every
                // read with 4 KiB pages; ask for huge pages (a hint).
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                (map, Durability::No)
            }
            Some(p) => {
                let (file, existed) = open_file(p, bytes)?;
                report.existed = existed;
                // SAFETY: the file is ours while the table is open (the
                // server holds the data directory's lock); another process
                // truncating it would fault, as with any mmap'd database.
                let map = unsafe { MmapOptions::new().len(bytes as usize).map_mut(&file) }
                    .map_err(io(p))?;
                (map, durability)
            }
        };
        let mut map = map;
        let base = map.as_mut_ptr();
        let clean_before = if report.existed {
            let h = &map[..HEADER_LEN];
            let want = header_bytes(width, max, slot_size as u64, false);
            let bad = |reason: String| TableError::BadFile {
                path: path.map(Path::to_owned).unwrap_or_default(),
                reason,
            };
            let (w, m) = shape_of(h).map_err(bad)?;
            if h[..32] != want[..32] {
                return Err(bad(format!(
                    "the file holds a table of width {w} and max {m}, not width {width} and max {max}"
                )));
            }
            h[40] == 1
        } else {
            true
        };
        let inner = Inner {
            map,
            layout: Layout {
                base,
                slot_size,
                slot_words: slot_size / 8,
                data_words: (width as usize).div_ceil(8),
                width,
                max,
            },
            stripes: Box::new(std::array::from_fn(|_| Stripe::default())),
            count: AtomicU64::new(0),
            low: AtomicU64::new(u64::MAX),
            high: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            durability,
            path: path.map(Path::to_owned),
        };
        // Count what is there (and check every slot after a crash).
        let mut records = 0;
        if report.existed {
            report.checked = !clean_before;
            for id in 1..=max {
                let words = inner.reader().slot(id);
                let hdr = words[0].load(Ordering::Relaxed);
                let len_plus = hdr as u32;
                if !clean_before {
                    // A crash may have left the version odd (a write in
                    // progress): the CRC decides whether the slot is whole;
                    // either way its version starts again at 0.
                    let flags = words[1].load(Ordering::Relaxed) as u32;
                    words[1].store(u64::from(flags), Ordering::Relaxed);
                    if len_plus != 0 {
                        let len = len_plus - 1;
                        let mut v = Vec::new();
                        inner.reader().copy_value(words, len, &mut v);
                        if len > width || slot_crc(len, flags, &v) != (hdr >> 32) as u32 {
                            words[0].store(0, Ordering::Relaxed);
                            report.torn += 1;
                            continue;
                        }
                    }
                }
                if len_plus == 0 {
                    continue;
                }
                records += 1;
                inner.low.fetch_min(id, Ordering::Relaxed);
                inner.high.fetch_max(id, Ordering::Relaxed);
            }
        }
        report.records = records;
        inner.count.store(records, Ordering::Relaxed);
        if let Some(p) = path {
            // Mark the file in use: a crash from here on is detected.
            inner.write_header(false);
            inner.map.flush().map_err(io(p))?;
            if report.torn > 0 {
                tracing::warn!(
                    "table {}: cleared {} slots a crash left half written",
                    p.display(),
                    report.torn
                );
            }
        }
        let inner = Arc::new(inner);
        let flusher = if durability == Durability::EverySec {
            let (tx, rx) = mpsc::channel::<()>();
            let t = inner.clone();
            let handle = std::thread::Builder::new()
                .name("kura-table-sync".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) =
                        rx.recv_timeout(Duration::from_secs(1))
                    {
                        if t.dirty.swap(false, Ordering::AcqRel) {
                            if let Err(e) = t.map.flush() {
                                tracing::error!("table sync failed: {e}");
                            }
                        }
                    }
                })
                .map_err(io(path.unwrap_or(Path::new("."))))?;
            Some((tx, handle))
        } else {
            None
        };
        Ok(Table {
            inner,
            flusher,
            report,
        })
    }

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

/// The width and max a table header describes, or what is wrong with it.
fn shape_of(h: &[u8]) -> Result<(u32, u64), String> {
    if h.len() < HEADER_LEN || &h[..8] != MAGIC {
        return Err("not a kura table (bad magic)".into());
    }
    if h[32..36] != crc32fast::hash(&h[..32]).to_le_bytes() {
        return Err("damaged header (CRC mismatch)".into());
    }
    let w = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    let m = u64::from_le_bytes(h[16..24].try_into().unwrap_or_default());
    Ok((w, m))
}

fn open_file(p: &Path, bytes: u64) -> Result<(File, bool), TableError> {
    let existed = p.exists();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .map_err(io(p))?;
    let len = file.metadata().map_err(io(p))?.len();
    if existed && len != 0 && len != bytes {
        use std::io::Read;
        let mut h = [0u8; HEADER_LEN];
        let reason = match (&file).read_exact(&mut h) {
            Err(_) => format!("{len} bytes: too short for a table"),
            Ok(()) => match shape_of(&h) {
                Ok((w, m)) => format!(
                    "the file holds a table of width {w} and max {m}, not of this shape ({len} bytes where this one has {bytes})"
                ),
                Err(why) => why,
            },
        };
        return Err(TableError::BadFile {
            path: p.to_owned(),
            reason,
        });
    }
    if len == 0 {
        file.set_len(bytes).map_err(io(p))?;
        return Ok((file, false));
    }
    Ok((file, existed))
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

    fn write_header(&self, clean: bool) {
        let l = self.layout;
        let h = header_bytes(l.width, l.max, l.slot_size as u64, clean);
        // SAFETY: the first HEADER_LEN bytes of the mapping are the header,
        // which no slot overlaps; only open and drop write it, when no other
        // thread uses the table.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), l.base, HEADER_LEN) };
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        if let Some((tx, handle)) = self.flusher.take() {
            drop(tx);
            let _ = handle.join();
        }
        if self.inner.path.is_some() {
            // A clean close: everything synced, then the header says so.
            let _ = self.inner.map.flush();
            if Arc::strong_count(&self.inner) == 1 {
                self.inner.write_header(true);
                let _ = self.inner.map.flush_range(0, HEADER_LEN);
            }
        }
    }
}
