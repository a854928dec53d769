//! Opening a table: mapping its file (or anonymous memory), checking the
//! header's shape and CRC, recounting (and after a crash checking) every
//! slot, the `EverySec` flusher thread, and the clean close that marks the
//! header again.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use memmap2::{MmapMut, MmapOptions};

use crate::slots::{slot_crc, Layout, HEADER_LEN};
use crate::{
    Durability, Inner, OpenReport, Stripe, Table, TableError, TableOptions, MAGIC, MAX_WIDTH,
};

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TableError + '_ {
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
        let (mut map, durability) = map_region(path, bytes, durability, &mut report)?;
        let base = map.as_mut_ptr();
        let clean_before = if report.existed {
            check_header(&map, path, width, max, slot_size)?
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
        if report.existed {
            report.checked = !clean_before;
            report.records = inner.recount(clean_before, &mut report.torn);
        }
        inner.count.store(report.records, Ordering::Relaxed);
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
            Some(spawn_flusher(&inner, path)?)
        } else {
            None
        };
        Ok(Table {
            inner,
            flusher,
            report,
        })
    }
}

/// The table's memory: the file mapped (noting in `report` whether it was
/// there), or anonymous memory, which is never durable.
fn map_region(
    path: Option<&Path>,
    bytes: u64,
    durability: Durability,
    report: &mut OpenReport,
) -> Result<(MmapMut, Durability), TableError> {
    match path {
        None => {
            let map = MmapOptions::new()
                .len(bytes as usize)
                .map_anon()
                .map_err(io(Path::new("(anonymous table)")))?;
            // Random reads over a large table miss the TLB on every
            // read with 4 KiB pages; ask for huge pages (a hint).
            #[cfg(target_os = "linux")]
            let _ = map.advise(memmap2::Advice::HugePage);
            Ok((map, Durability::No))
        }
        Some(p) => {
            let (file, existed) = open_file(p, bytes)?;
            report.existed = existed;
            // SAFETY: the file is ours while the table is open (the
            // server holds the data directory's lock); another process
            // truncating it would fault, as with any mmap'd database.
            let map =
                unsafe { MmapOptions::new().len(bytes as usize).map_mut(&file) }.map_err(io(p))?;
            Ok((map, durability))
        }
    }
}

/// Checks an existing file's header against the shape asked for; whether
/// the table was closed cleanly.
fn check_header(
    map: &MmapMut,
    path: Option<&Path>,
    width: u32,
    max: u64,
    slot_size: usize,
) -> Result<bool, TableError> {
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
    Ok(h[40] == 1)
}

/// The thread that syncs a dirty table at most a second apart.
fn spawn_flusher(
    inner: &Arc<Inner>,
    path: Option<&Path>,
) -> Result<(mpsc::Sender<()>, JoinHandle<()>), TableError> {
    let (tx, rx) = mpsc::channel::<()>();
    let t = inner.clone();
    let handle = std::thread::Builder::new()
        .name("kura-table-sync".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(Duration::from_secs(1))
            {
                if t.dirty.swap(false, Ordering::AcqRel) {
                    if let Err(e) = t.map.flush() {
                        tracing::error!("table sync failed: {e}");
                    }
                }
            }
        })
        .map_err(io(path.unwrap_or(Path::new("."))))?;
    Ok((tx, handle))
}

impl Inner {
    /// Counts the records there and sets the lowest and highest id; when
    /// the table was not closed cleanly, checks every slot's CRC and clears
    /// (counting in `torn`) those a crash left half written.
    fn recount(&self, clean_before: bool, torn: &mut u64) -> u64 {
        let mut records = 0;
        for id in 1..=self.layout.max {
            let words = self.reader().slot(id);
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
                    self.reader().copy_value(words, len, &mut v);
                    if len > self.layout.width || slot_crc(len, flags, &v) != (hdr >> 32) as u32 {
                        words[0].store(0, Ordering::Relaxed);
                        *torn += 1;
                        continue;
                    }
                }
            }
            if len_plus == 0 {
                continue;
            }
            records += 1;
            self.low.fetch_min(id, Ordering::Relaxed);
            self.high.fetch_max(id, Ordering::Relaxed);
        }
        records
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
