//! Writing a new block: [`Contents`] laid out as the block's header,
//! flags, key and value (the layout is in `item/mod.rs`).

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use super::*;

/// What a new block holds.
pub(crate) struct Contents<'a> {
    pub key: &'a [u8],
    pub flags: u32,
    /// The value, as pieces laid end to end (append builds from two).
    pub parts: &'a [&'a [u8]],
    /// Room for the eviction policy's links.
    pub links: bool,
    /// Room for a deadline (the entry has one).
    pub deadline: bool,
    /// Room for a CAS unique of 8 bytes (see [`CasScheme`]).
    pub wide_cas: bool,
}

impl Contents<'_> {
    fn value_len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    fn bytes(&self) -> usize {
        self.key_at() + self.key.len() + self.value_len()
    }

    /// The block size these contents need, in units.
    pub(crate) fn units(&self) -> u32 {
        self.bytes().div_ceil(UNIT) as u32
    }

    /// Writes everything but the first word into the block at `p` of
    /// `units` units, with a reference count of one (the caller's handle).
    ///
    /// # Safety
    /// `p` is the start of a block of `units` units, at least
    /// `self.units()` and at most 3 more, that nothing else uses, whose
    /// first word (its size) is already written; the key is at most
    /// [`KEY_MAX`] bytes.
    pub(crate) unsafe fn write(&self, p: *mut u8, units: u32) {
        // SAFETY: as the caller promised.
        unsafe {
            self.write_header(p, units);
            self.write_value(p);
        }
    }

    /// Writes these contents over the block at `p` of `units` units, which
    /// holds the same key, when they need a block of that size with the
    /// same layout (flags present or not, links, deadline, CAS width);
    /// false, writing nothing, when they do not. The metadata is left to the caller.
    ///
    /// # Safety
    /// `p` is a live block of `units` units that no handle refers to (its
    /// reference count is the shard's one) and whose key is this key, and
    /// the caller holds its shard's lock exclusively.
    pub(crate) unsafe fn rewrite(&self, p: *mut u8, units: u32) -> bool {
        // SAFETY: the marks byte and first word of a live block.
        let (marks, word) = unsafe {
            (
                (*p.add(MARKS).cast::<AtomicU8>()).load(Ordering::Relaxed),
                (*p.cast::<AtomicU32>()).load(Ordering::Relaxed),
            )
        };
        if units != self.units()
            || (marks & HAS_FLAGS != 0) != (self.flags != 0)
            || (marks & HAS_LINKS != 0) != self.links
            || (marks & HAS_DEADLINE != 0) != self.deadline
            || (word & WIDE_CAS != 0) != self.wide_cas
        {
            return false;
        }
        // SAFETY: the block has the size and layout these contents need,
        // and nothing else reads it meanwhile.
        unsafe {
            self.write_lengths_and_flags(p, units);
            self.write_value(p);
        }
        true
    }

    /// Writes the key length, the tail and the flags (when not 0).
    ///
    /// # Safety
    /// `p` is a block of `units` units laid out for these contents, which
    /// nothing else reads meanwhile.
    unsafe fn write_lengths_and_flags(&self, p: *mut u8, units: u32) {
        let tail = units as usize * UNIT - self.bytes();
        debug_assert!(tail < 16 && self.key.len() <= KEY_MAX);
        // SAFETY: header offsets inside the block.
        unsafe {
            p.add(KEY_LEN)
                .cast::<u16>()
                .write(self.key.len() as u16 | (tail as u16) << KEY_BITS);
            if self.flags != 0 {
                p.add(self.key_at() - 4)
                    .cast::<[u8; 4]>()
                    .write_unaligned(self.flags.to_le_bytes());
            }
        }
    }

    /// Writes the value's pieces after the key.
    ///
    /// # Safety
    /// As [`Contents::write_lengths_and_flags`].
    unsafe fn write_value(&self, p: *mut u8) {
        let mut at = self.key_at() + self.key.len();
        for part in self.parts {
            // SAFETY: the value's bytes lie in the block, after the key.
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), p.add(at), part.len()) };
            at += part.len();
        }
    }

    /// Where the key starts in the block.
    fn key_at(&self) -> usize {
        HEADER
            + if self.links { LINKS } else { 0 }
            + if self.wide_cas { CAS_HIGH } else { 0 }
            + if self.deadline { DEADLINE } else { 0 }
            + if self.flags != 0 { 4 } else { 0 }
    }

    /// Like [`Contents::write`], but leaves the value's bytes unwritten:
    /// [`Item::fill_value`] writes them, without the shard's lock.
    ///
    /// # Safety
    /// As [`Contents::write`].
    pub(crate) unsafe fn write_header(&self, p: *mut u8, units: u32) {
        let mut marks = 0;
        if self.deadline {
            marks |= HAS_DEADLINE;
        }
        if self.links {
            marks |= HAS_LINKS;
        }
        if self.flags != 0 {
            marks |= HAS_FLAGS;
        }
        // SAFETY: all offsets below are inside the block (its size was
        // computed from these contents), which is ours alone.
        unsafe {
            p.add(COUNT).cast::<u16>().write(1);
            p.add(CAS).cast::<u32>().write(0);
            p.add(LAST_ACCESS).cast::<u32>().write(0);
            if self.wide_cas {
                // The first word is the allocator's, which reads it atomically.
                (*p.cast::<AtomicU32>()).fetch_or(WIDE_CAS, Ordering::Relaxed);
            }
            p.add(MARKS).write(marks);
            p.add(POLICY).write(0);
            if self.links {
                p.add(HEADER).cast::<[u8; 8]>().write_unaligned([0xff; 8]);
            }
            // The CAS unique's high half and the deadline, when present.
            let at = HEADER + if self.links { LINKS } else { 0 };
            let zeros =
                if self.wide_cas { CAS_HIGH } else { 0 } + if self.deadline { DEADLINE } else { 0 };
            std::ptr::write_bytes(p.add(at), 0, zeros);
            self.write_lengths_and_flags(p, units);
            std::ptr::copy_nonoverlapping(self.key.as_ptr(), p.add(self.key_at()), self.key.len());
        }
    }
}
