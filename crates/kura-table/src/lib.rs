//! kura-table: Tokyo-Cabinet-style fixed-length tables (seed 003). Records
//! are addressed by a dense natural number (ids 1 to `max`); each has a
//! slot of fixed width in one memory-mapped file, so get, put and delete are
//! O(1): an offset computation and a copy.
//!
//! * Concurrency: slots are grouped in [`STRIPES`] stripes, each with a
//!   sequence lock. A writer takes its stripe's lock (an odd sequence
//!   number) and releases it by moving to the next even number; a reader
//!   takes no lock at all: it copies the slot with plain (relaxed atomic)
//!   loads and retries if the sequence moved meanwhile. Reads of different
//!   ids never touch a shared cache line for writing, so they scale and keep
//!   many cache misses in flight.
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

mod range;

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use memmap2::{MmapMut, MmapOptions};

pub use range::{End, RangeError, RangeSpec};

/// Stripes of sequence locks (Tokyo Cabinet used 127 mutexes).
pub const STRIPES: usize = 256;
/// The largest slot width.
pub const MAX_WIDTH: u32 = 1 << 20;

const MAGIC: &[u8; 8] = b"KURATBL\x01";
const HEADER_LEN: usize = 64;
/// Per slot: a word of length + 1 (0: absent) and CRC, a word of flags.
const SLOT_HEADER: usize = 16;

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

#[repr(align(64))]
struct Stripe {
    seq: AtomicU64,
}

struct Inner {
    map: MmapMut,
    base: *mut u8,
    slot_size: usize,
    width: u32,
    max: u64,
    stripes: Box<[Stripe; STRIPES]>,
    /// `slot_size / 8`.
    slot_words: usize,
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
// holds that slot's stripe lock; the header is written only by `open` and
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
            .field("width", &self.inner.width)
            .field("max", &self.inner.max)
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

fn slot_crc(len: u32, flags: u32, value: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&flags.to_le_bytes());
    h.update(value);
    h.finalize()
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
        // Slots never straddle a cache line more than they must: small ones
        // are a power of two (so a read is one line), large ones whole lines.
        let raw = SLOT_HEADER + (width as usize).div_ceil(8) * 8;
        let slot_size = if raw <= 64 {
            raw.next_power_of_two()
        } else {
            raw.div_ceil(64) * 64
        };
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
            base,
            slot_size,
            width,
            max,
            stripes: Box::new(std::array::from_fn(|_| Stripe {
                seq: AtomicU64::new(0),
            })),
            slot_words: slot_size / 8,
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
                let words = inner.slot(id);
                let hdr = words[0].load(Ordering::Relaxed);
                let len_plus = hdr as u32;
                if len_plus == 0 {
                    continue;
                }
                if !clean_before {
                    let len = len_plus - 1;
                    let flags = words[1].load(Ordering::Relaxed) as u32;
                    let mut v = Vec::new();
                    inner.copy_value(words, len, &mut v);
                    if len > width || slot_crc(len, flags, &v) != (hdr >> 32) as u32 {
                        words[0].store(0, Ordering::Relaxed);
                        report.torn += 1;
                        continue;
                    }
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
        (self.inner.width as usize).div_ceil(8) * 8
    }

    /// The slot width in bytes.
    pub fn width(&self) -> u32 {
        self.inner.width
    }

    /// The largest id.
    pub fn max(&self) -> u64 {
        self.inner.max
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
        if id.wrapping_sub(1) >= self.inner.max {
            return Err(self.bad_id(id));
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn bad_id(&self, id: u64) -> TableError {
        TableError::BadId {
            id,
            max: self.inner.max,
        }
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
        Ok(self.inner.read(id, buf))
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
        self.check_id(id)?;
        Ok(self.inner.read_buf(id, out))
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
        let inner = &*self.inner;
        buf.resize(self.buf_len(), 0);
        let valid = |id: u64| id.wrapping_sub(1) < inner.max;
        let touch = |id: u64| {
            if valid(id) {
                // A plain load whose result is not needed: the line (and
                // its TLB entry) is then on its way while earlier ids are
                // read.
                std::hint::black_box(inner.slot(id)[0].load(Ordering::Relaxed));
            }
        };
        for &id in ids.iter().take(AHEAD) {
            touch(id);
        }
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&ahead) = ids.get(i + AHEAD) {
                touch(ahead);
            }
            let got = if valid(id) {
                inner.read_buf(id, buf)
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
        let keep = max_len.min(self.inner.width as usize);
        let mut len = 0;
        self.update(id, |old| {
            let (old, flags) = old.unwrap_or((&[], flags));
            let mut v = Vec::with_capacity(old.len() + data.len());
            v.extend_from_slice(old);
            v.extend_from_slice(data);
            let cut = v.len().saturating_sub(keep);
            v.drain(..cut);
            len = v.len();
            Some((v, flags))
        })?;
        Ok(len)
    }

    /// Changes record `id` under its stripe's lock: `f` gets the current
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
        self.check_id(id)?;
        let inner = &*self.inner;
        let stripe = inner.stripe(id);
        let seq = lock(stripe);
        let mut old = Vec::new();
        let old_flags = inner.read_locked(id, &mut old);
        let new = f(old_flags.map(|fl| (&old[..], fl)));
        if let Some((v, _)) = &new {
            if v.len() > inner.width as usize {
                stripe.seq.store(seq, Ordering::Release);
                return Err(TableError::TooWide {
                    len: v.len(),
                    width: inner.width,
                });
            }
        }
        let present = new.is_some();
        inner.write_locked(id, new.as_ref().map(|(v, fl)| (&v[..], *fl)));
        match (old_flags.is_some(), present) {
            (false, true) => {
                inner.count.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                inner.count.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if present {
            inner.low.fetch_min(id, Ordering::Relaxed);
            inner.high.fetch_max(id, Ordering::Relaxed);
        }
        // Release: readers that saw the old sequence retry.
        stripe.seq.store(seq + 2, Ordering::Release);
        inner.wrote(id)?;
        Ok(present)
    }

    /// The smallest id present.
    pub fn min_id(&self) -> Option<u64> {
        let inner = &*self.inner;
        let from = inner.low.load(Ordering::Relaxed).max(1);
        (from..=inner.max).find(|&id| inner.present(id))
    }

    /// The largest id present.
    pub fn max_id(&self) -> Option<u64> {
        let inner = &*self.inner;
        let to = inner.high.load(Ordering::Relaxed).min(inner.max);
        (1..=to).rev().find(|&id| inner.present(id))
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
        let hi = hi.min(self.inner.max);
        let mut buf = Vec::with_capacity(self.inner.width as usize);
        let mut n = 0;
        for id in lo..=hi {
            if n >= limit {
                break;
            }
            if let Some(flags) = self.inner.read(id, &mut buf) {
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

/// Takes a stripe's write lock; returns the (even) sequence number held.
fn lock(stripe: &Stripe) -> u64 {
    let mut spins = 0u32;
    loop {
        let s = stripe.seq.load(Ordering::Relaxed);
        if s & 1 == 0
            && stripe
                .seq
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return s;
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

impl Inner {
    #[inline]
    fn stripe(&self, id: u64) -> &Stripe {
        &self.stripes[(id as usize) & (STRIPES - 1)]
    }

    /// The words of slot `id` (1-based, checked by the caller).
    #[inline]
    fn slot(&self, id: u64) -> &[AtomicU64] {
        let off = HEADER_LEN + (id as usize - 1) * self.slot_size;
        // SAFETY: `off + slot_size` is within the mapping (id <= max and the
        // mapping has HEADER_LEN + max * slot_size bytes); `base` is page
        // aligned and HEADER_LEN and slot_size are multiples of 8, so the
        // words are aligned; AtomicU64 has u64's layout; the memory is only
        // ever accessed through atomics while the table is shared.
        unsafe {
            std::slice::from_raw_parts(self.base.add(off).cast::<AtomicU64>(), self.slot_words)
        }
    }

    #[inline]
    fn copy_value(&self, words: &[AtomicU64], len: u32, buf: &mut Vec<u8>) {
        let len = len.min(self.width) as usize;
        buf.clear();
        if let Some(data) = words.get(2..2 + len.div_ceil(8)) {
            for w in data {
                buf.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
        }
        buf.truncate(len);
    }

    fn present(&self, id: u64) -> bool {
        self.slot(id)[0].load(Ordering::Relaxed) as u32 != 0
    }

    /// A consistent copy of slot `id` without taking its lock.
    #[inline]
    fn read(&self, id: u64, buf: &mut Vec<u8>) -> Option<u32> {
        let stripe = self.stripe(id);
        let words = self.slot(id);
        loop {
            let s1 = stripe.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let hdr = words[0].load(Ordering::Relaxed);
            let flags = words[1].load(Ordering::Relaxed) as u32;
            let len_plus = hdr as u32;
            if len_plus != 0 {
                self.copy_value(words, len_plus - 1, buf);
            }
            // Order the copy before the second look at the sequence.
            fence(Ordering::Acquire);
            if stripe.seq.load(Ordering::Relaxed) == s1 {
                return (len_plus != 0).then_some(flags);
            }
        }
    }

    /// Like [`Inner::read`], into a caller's slice: one optimistic pass,
    /// and a loop only when a writer was in the stripe.
    #[inline]
    fn read_buf(&self, id: u64, out: &mut [u8]) -> Option<(usize, u32)> {
        let stripe = self.stripe(id);
        let words = self.slot(id);
        let s1 = stripe.seq.load(Ordering::Acquire);
        let got = self.copy_into(words, out);
        fence(Ordering::Acquire);
        if s1 & 1 == 0 && stripe.seq.load(Ordering::Relaxed) == s1 {
            return got;
        }
        self.read_buf_slow(stripe, words, out)
    }

    #[cold]
    #[inline(never)]
    fn read_buf_slow(
        &self,
        stripe: &Stripe,
        words: &[AtomicU64],
        out: &mut [u8],
    ) -> Option<(usize, u32)> {
        loop {
            let s1 = stripe.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let got = self.copy_into(words, out);
            fence(Ordering::Acquire);
            if stripe.seq.load(Ordering::Relaxed) == s1 {
                return got;
            }
        }
    }

    /// Copies a slot into `out` (see [`Table::get_buf`]); may be torn: the
    /// caller checks the stripe's sequence around it.
    #[inline(always)]
    fn copy_into(&self, words: &[AtomicU64], out: &mut [u8]) -> Option<(usize, u32)> {
        let hdr = words[0].load(Ordering::Relaxed);
        let flags = words[1].load(Ordering::Relaxed) as u32;
        let len = ((hdr as u32).saturating_sub(1)).min(self.width) as usize;
        // Whole words while `out` has room for them (fixed-size copies, no
        // memcpy call), then the part of a word that still fits.
        let n = len.div_ceil(8);
        let data = words.get(2..).unwrap_or_default();
        // The common small record: one word.
        if n <= 1 {
            if let (Some(dst), Some(w)) = (out.first_chunk_mut::<8>(), data.first()) {
                *dst = w.load(Ordering::Relaxed).to_le_bytes();
                return (hdr as u32 != 0).then_some((len, flags));
            }
        }
        let mut chunks = out.chunks_exact_mut(8);
        let mut copied = 0;
        for (dst, w) in (&mut chunks).zip(data).take(n) {
            dst.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            copied += 1;
        }
        if copied < n {
            let rest = chunks.into_remainder();
            if let (false, Some(w)) = (rest.is_empty(), data.get(copied)) {
                let b = w.load(Ordering::Relaxed).to_le_bytes();
                let k = rest.len();
                rest.copy_from_slice(&b[..k]);
            }
        }
        (hdr as u32 != 0).then_some((len, flags))
    }

    /// Slot `id` while its stripe lock is held.
    fn read_locked(&self, id: u64, buf: &mut Vec<u8>) -> Option<u32> {
        let words = self.slot(id);
        let hdr = words[0].load(Ordering::Relaxed);
        let len_plus = hdr as u32;
        if len_plus == 0 {
            return None;
        }
        self.copy_value(words, len_plus - 1, buf);
        Some(words[1].load(Ordering::Relaxed) as u32)
    }

    /// Writes slot `id` (or clears it) while its stripe lock is held.
    fn write_locked(&self, id: u64, new: Option<(&[u8], u32)>) {
        let words = self.slot(id);
        let Some((v, flags)) = new else {
            words[0].store(0, Ordering::Relaxed);
            return;
        };
        for (i, chunk) in v.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            words[2 + i].store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
        let len = v.len() as u32;
        words[1].store(u64::from(flags), Ordering::Relaxed);
        let crc = slot_crc(len, flags, v);
        words[0].store(
            u64::from(len + 1) | (u64::from(crc) << 32),
            Ordering::Relaxed,
        );
    }

    /// After a write to slot `id`: sync it (`Always`) or note the table dirty.
    fn wrote(&self, id: u64) -> Result<(), TableError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        match self.durability {
            Durability::Always => {
                let off = HEADER_LEN + (id as usize - 1) * self.slot_size;
                self.map.flush_range(off, self.slot_size).map_err(io(path))
            }
            Durability::EverySec => {
                self.dirty.store(true, Ordering::Release);
                Ok(())
            }
            Durability::No => Ok(()),
        }
    }

    fn write_header(&self, clean: bool) {
        let h = header_bytes(self.width, self.max, self.slot_size as u64, clean);
        // SAFETY: the first HEADER_LEN bytes of the mapping are the header,
        // which no slot overlaps; only open and drop write it, when no other
        // thread uses the table.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), self.base, HEADER_LEN) };
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
