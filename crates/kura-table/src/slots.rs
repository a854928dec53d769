//! The slots of a table and the lock-free read side.
//!
//! A slot is `SLOT_HEADER` bytes followed by the value in whole 8-byte
//! words. The first header word holds length + 1 (0 when the slot is empty)
//! and, in its high half, a CRC-32 of length, flags and value. The second
//! holds the client flags and, in its high half, the slot's version: a
//! sequence lock for readers. A writer (who also holds its stripe's lock, so
//! writers of one slot are serialised) makes the version odd, writes the
//! value and the first word, then stores the new flags with the next even
//! version. A reader copies the slot between two looks at the second word and
//! retries if it moved, so reads take no lock and touch no line but the
//! slot's own.
//!
//! [`Reader`] is a copy of the table's geometry (base address, slot size,
//! bounds) that a caller keeps in a local for a loop of reads: the seqlock's
//! fence makes the compiler reload anything reached through a pointer on
//! every read, which costs instructions and so the number of random reads
//! the core keeps in flight at once.

use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::TableError;

/// Bytes before the first slot.
pub(crate) const HEADER_LEN: usize = 64;
/// Per slot: a word of length + 1 (0: absent) and CRC, a word of flags and
/// version.
pub(crate) const SLOT_HEADER: usize = 16;

/// The version half of a slot's second word.
#[inline(always)]
fn version(word: u64) -> u32 {
    (word >> 32) as u32
}

/// Where the slots are and how big: fixed when the table is opened.
#[derive(Clone, Copy)]
pub(crate) struct Layout {
    /// The start of the mapping (the file header, then the slots).
    pub(crate) base: *mut u8,
    pub(crate) slot_size: usize,
    /// `slot_size / 8`.
    pub(crate) slot_words: usize,
    /// Words of data in a slot: `width` rounded up to whole words.
    pub(crate) data_words: usize,
    pub(crate) width: u32,
    pub(crate) max: u64,
}

impl Layout {
    /// The slot size for values of `width` bytes: small slots are a power
    /// of two (so a read is one cache line), large ones whole lines.
    pub(crate) fn slot_size(width: u32) -> usize {
        let raw = SLOT_HEADER + (width as usize).div_ceil(8) * 8;
        if raw <= 64 {
            raw.next_power_of_two()
        } else {
            raw.div_ceil(64) * 64
        }
    }

    /// Byte offset of slot `id` in the mapping.
    #[inline(always)]
    pub(crate) fn offset(&self, id: u64) -> usize {
        HEADER_LEN + (id as usize - 1) * self.slot_size
    }
}

/// Reads records of one table from a tight loop: get one with
/// [`crate::Table::reader`], keep it in a local, and call
/// [`Reader::get_buf`]. It borrows the table, so the mapping outlives it.
#[derive(Clone, Copy)]
pub struct Reader<'t> {
    layout: Layout,
    _table: PhantomData<&'t crate::Table>,
}

impl<'t> Reader<'t> {
    pub(crate) fn new(layout: Layout) -> Self {
        Reader {
            layout,
            _table: PhantomData,
        }
    }

    /// Copies record `id` into `out`, as [`crate::Table::get_buf`] does.
    ///
    /// # Errors
    /// An id outside the table.
    #[inline(always)]
    pub fn get_buf(&self, id: u64, out: &mut [u8]) -> Result<Option<(usize, u32)>, TableError> {
        if !self.valid(id) {
            return Err(self.bad_id(id));
        }
        Ok(self.read_buf(id, out))
    }

    #[inline(always)]
    pub(crate) fn valid(&self, id: u64) -> bool {
        id.wrapping_sub(1) < self.layout.max
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn bad_id(&self, id: u64) -> TableError {
        TableError::BadId {
            id,
            max: self.layout.max,
        }
    }

    /// The first word of slot `id` (1-based, checked by the caller).
    #[inline(always)]
    fn slot_ptr(&self, id: u64) -> *const AtomicU64 {
        // SAFETY: `offset(id)` is within the mapping for a valid id (see
        // `slot`), so the pointer stays inside the same allocation.
        unsafe { self.layout.base.add(self.layout.offset(id)).cast() }
    }

    /// The words of slot `id` (1-based, checked by the caller).
    #[inline(always)]
    pub(crate) fn slot(&self, id: u64) -> &'t [AtomicU64] {
        // SAFETY: `off + slot_size` is within the mapping (id <= max and the
        // mapping has HEADER_LEN + max * slot_size bytes), which lives as
        // long as the table this reader borrows for 't and is never
        // remapped; `base` is page aligned and HEADER_LEN and slot_size are
        // multiples of 8, so the words are aligned; AtomicU64 has u64's
        // layout; the memory is only ever accessed through atomics while the
        // table is shared.
        unsafe { std::slice::from_raw_parts(self.slot_ptr(id), self.layout.slot_words) }
    }

    /// True when slot `id` holds a record (a racy look, for scans).
    pub(crate) fn present(&self, id: u64) -> bool {
        self.slot(id)[0].load(Ordering::Relaxed) as u32 != 0
    }

    /// Copies `len` bytes of a slot's value into `buf` (replacing it).
    #[inline]
    pub(crate) fn copy_value(&self, words: &[AtomicU64], len: u32, buf: &mut Vec<u8>) {
        let len = len.min(self.layout.width) as usize;
        buf.clear();
        if let Some(data) = words.get(2..2 + len.div_ceil(8)) {
            for w in data {
                buf.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
        }
        buf.truncate(len);
    }

    /// A consistent copy of slot `id` into `buf`; its flags, or `None`
    /// when empty.
    #[inline]
    pub(crate) fn read(&self, id: u64, buf: &mut Vec<u8>) -> Option<u32> {
        let words = self.slot(id);
        loop {
            let v1 = words[1].load(Ordering::Acquire);
            if version(v1) & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len_plus = words[0].load(Ordering::Relaxed) as u32;
            if len_plus != 0 {
                self.copy_value(words, len_plus - 1, buf);
            }
            // Order the copy before the second look at the version.
            fence(Ordering::Acquire);
            if words[1].load(Ordering::Relaxed) == v1 {
                return (len_plus != 0).then_some(v1 as u32);
            }
        }
    }

    /// Like [`Reader::read`], into a caller's slice. The common case (`out`
    /// has room for the whole width, no writer in the slot) is one straight
    /// pass over one cache line without bounds checks: the version, the
    /// slot's words copied whole, the version again. Few enough instructions
    /// that the out-of-order core keeps the cache misses of several
    /// consecutive random reads in flight at once; with bounds checks, a
    /// generic copy loop and the sequence in a separate stripe it kept half
    /// as many (see bench/results/history.md).
    #[inline(always)]
    pub(crate) fn read_buf(&self, id: u64, out: &mut [u8]) -> Option<(usize, u32)> {
        let n = self.layout.data_words;
        if out.len() < n * 8 {
            return self.read_buf_slow(self.slot(id), out);
        }
        let p = self.slot_ptr(id);
        // SAFETY: a slot is 2 + data_words words or more (Layout::slot_size),
        // so p..p+2+n lies in slot `id`, within the mapping (see `slot`).
        let (hdr, ver, data) =
            unsafe { (&*p, &*p.add(1), std::slice::from_raw_parts(p.add(2), n)) };
        let v1 = ver.load(Ordering::Acquire);
        let hdr = hdr.load(Ordering::Relaxed);
        if let [w] = data {
            // SAFETY: `out` has at least n * 8 = 8 bytes (checked above).
            unsafe {
                out.as_mut_ptr()
                    .cast::<[u8; 8]>()
                    .write_unaligned(w.load(Ordering::Relaxed).to_le_bytes());
            }
        } else {
            for (d, w) in out.chunks_exact_mut(8).zip(data) {
                d.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
        }
        fence(Ordering::Acquire);
        if version(v1) & 1 != 0 || ver.load(Ordering::Relaxed) != v1 {
            return self.read_buf_slow(self.slot(id), out);
        }
        let len_plus = hdr as u32;
        if len_plus == 0 {
            return None;
        }
        Some(((len_plus - 1).min(self.layout.width) as usize, v1 as u32))
    }

    #[cold]
    #[inline(never)]
    fn read_buf_slow(&self, words: &[AtomicU64], out: &mut [u8]) -> Option<(usize, u32)> {
        loop {
            let v1 = words[1].load(Ordering::Acquire);
            if version(v1) & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let got = self.copy_into(words, v1 as u32, out);
            fence(Ordering::Acquire);
            if words[1].load(Ordering::Relaxed) == v1 {
                return got;
            }
        }
    }

    /// Copies a slot into `out` (see [`crate::Table::get_buf`]), as much as
    /// fits; may be torn: the caller checks the version around it.
    fn copy_into(&self, words: &[AtomicU64], flags: u32, out: &mut [u8]) -> Option<(usize, u32)> {
        let hdr = words[0].load(Ordering::Relaxed);
        let len = ((hdr as u32).saturating_sub(1)).min(self.layout.width) as usize;
        let data = words.get(2..).unwrap_or_default();
        let mut chunks = out.chunks_exact_mut(8);
        let n = len.div_ceil(8);
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
    pub(crate) fn read_locked(&self, id: u64, buf: &mut Vec<u8>) -> Option<u32> {
        let words = self.slot(id);
        let hdr = words[0].load(Ordering::Relaxed);
        let len_plus = hdr as u32;
        if len_plus == 0 {
            return None;
        }
        self.copy_value(words, len_plus - 1, buf);
        Some(words[1].load(Ordering::Relaxed) as u32)
    }

    /// Writes slot `id` (or clears it) while its stripe lock is held: the
    /// version goes odd, then the value and the first word are written,
    /// then the flags with the next even version.
    pub(crate) fn write_locked(&self, id: u64, new: Option<(&[u8], u32)>) {
        let words = self.slot(id);
        let old = words[1].load(Ordering::Relaxed);
        let v = version(old);
        words[1].store(
            u64::from(v.wrapping_add(1)) << 32 | (old & 0xffff_ffff),
            Ordering::Relaxed,
        );
        // Readers that see any of the stores below also see the odd version.
        fence(Ordering::Release);
        let flags = match new {
            None => {
                words[0].store(0, Ordering::Relaxed);
                0
            }
            Some((value, flags)) => {
                for (i, chunk) in value.chunks(8).enumerate() {
                    let mut w = [0u8; 8];
                    w[..chunk.len()].copy_from_slice(chunk);
                    words[2 + i].store(u64::from_le_bytes(w), Ordering::Relaxed);
                }
                let len = value.len() as u32;
                let crc = slot_crc(len, flags, value);
                words[0].store(
                    u64::from(len + 1) | (u64::from(crc) << 32),
                    Ordering::Relaxed,
                );
                flags
            }
        };
        words[1].store(
            u64::from(v.wrapping_add(2)) << 32 | u64::from(flags),
            Ordering::Release,
        );
    }
}

/// The CRC a slot carries: of its length, flags and bytes.
pub(crate) fn slot_crc(len: u32, flags: u32, value: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&flags.to_le_bytes());
    h.update(value);
    h.finalize()
}
