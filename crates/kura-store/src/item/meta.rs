//! [`Meta`]: the shard's view of a block's metadata (CAS, deadline,
//! access time, marks, policy byte, links), read and written under the
//! shard's lock.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use super::*;

/// How a shard makes its CAS uniques: a sequence number from 1, shifted
/// left by `shift` bits, above the shard's number (`index`), so that
/// shards never make the same one. A block keeps the sequence number of a
/// unique its shard made in 4 bytes, while it is below 2^32; any other
/// unique takes 8 ([`WIDE_CAS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CasScheme {
    pub shift: u32,
    pub index: u64,
}

impl CasScheme {
    /// The unique with sequence number `seq` (0 with CAS off).
    pub(crate) fn unique(self, seq: u64) -> u64 {
        (seq << self.shift) | self.index
    }

    /// The 4-byte form of `cas`: its sequence number if this shard made it
    /// (0 for 0, the unique of an entry stored with CAS off).
    pub(crate) fn narrow(self, cas: u64) -> Option<u32> {
        if cas == 0 {
            return Some(0);
        }
        let seq = cas >> self.shift;
        if seq == 0 || self.unique(seq) != cas {
            return None;
        }
        u32::try_from(seq).ok()
    }

    /// The unique a block keeps in 4 bytes.
    fn widen(self, seq: u32) -> u64 {
        match seq {
            0 => 0,
            seq => self.unique(u64::from(seq)),
        }
    }
}

/// The shard's view of a block's metadata, under the shard lock, for as
/// long as `'a` (a borrow of the shard's arena).
#[derive(Clone, Copy)]
pub(crate) struct Meta<'a>(NonNull<u8>, CasScheme, std::marker::PhantomData<&'a ()>);

impl<'a> Meta<'a> {
    /// A view of the block at `p` of a shard that makes CAS uniques as
    /// `cas` says.
    ///
    /// # Safety
    /// `p` is a live block written by [`Contents::write`], and the caller
    /// holds its shard's lock (exclusively, for the setters) for as long as
    /// it uses the view, and the block stays allocated for `'a`.
    pub(crate) unsafe fn new(p: *mut u8, cas: CasScheme) -> Meta<'a> {
        // SAFETY: blocks are never at address 0.
        Meta(
            unsafe { NonNull::new_unchecked(p) },
            cas,
            std::marker::PhantomData,
        )
    }

    /// Where the optional fields are ([`optional_fields`]).
    fn fields(&self) -> (Option<usize>, Option<usize>, usize) {
        // SAFETY: the first word of a live block, atomic for every user.
        let word = unsafe { &*self.at::<AtomicU32>(0) }.load(Ordering::Relaxed);
        optional_fields(self.marks_cell().load(Ordering::Relaxed), word)
    }

    fn at<T>(&self, off: usize) -> *mut T {
        // SAFETY: `off` is a header offset, inside the block.
        unsafe { self.0.as_ptr().add(off).cast::<T>() }
    }

    /// The handles on the block, plus one while the entry is linked (the
    /// limit when there may be more).
    pub(crate) fn refcount(&self) -> u32 {
        // SAFETY: the view stands for a live block.
        u32::from(unsafe { count(self.0) }.load(Ordering::Acquire))
    }

    /// Gives up the entry's reference; true when it was the last (the
    /// caller frees the block).
    pub(crate) fn release(&self) -> bool {
        // SAFETY: the entry owns a reference to its block.
        unsafe { drop_reference(self.0) }
    }

    /// The CAS unique.
    pub(crate) fn cas(&self) -> u64 {
        // SAFETY: the shard's field, 4-aligned, under its lock.
        let low = unsafe { self.at::<u32>(CAS).read() };
        match self.fields().0 {
            // SAFETY: as above, inside a block with room for it.
            Some(at) => {
                let high = unsafe { self.at::<[u8; 4]>(at).read_unaligned() };
                u64::from(u32::from_le_bytes(high)) << 32 | u64::from(low)
            }
            None => self.1.widen(low),
        }
    }

    /// Whether the block keeps its CAS unique in 8 bytes.
    pub(crate) fn has_wide_cas(&self) -> bool {
        self.fields().0.is_some()
    }

    /// Whether the block has room for `cas`.
    pub(crate) fn fits_cas(&self, cas: u64) -> bool {
        self.fields().0.is_some() || self.1.narrow(cas).is_some()
    }

    /// Sets the CAS unique.
    ///
    /// # Panics
    /// When the block has no room for it ([`Meta::fits_cas`]): the shard
    /// moves such an entry to a block that has.
    pub(crate) fn set_cas(&self, cas: u64) {
        let (low, high) = match self.fields().0 {
            Some(at) => (cas as u32, Some((at, (cas >> 32) as u32))),
            None => match self.1.narrow(cas) {
                Some(seq) => (seq, None),
                None => panic!("a CAS unique for a block without room for it"),
            },
        };
        // SAFETY: the shard's fields, inside the block, under its exclusive
        // lock.
        unsafe {
            self.at::<u32>(CAS).write(low);
            if let Some((at, high)) = high {
                self.at::<[u8; 4]>(at).write_unaligned(high.to_le_bytes());
            }
        }
    }

    /// Where the deadline is, in a block with room for one.
    fn deadline_at(&self) -> Option<usize> {
        self.fields().1
    }

    /// Whether the block has room for a deadline.
    pub(crate) fn has_deadline(&self) -> bool {
        self.deadline_at().is_some()
    }

    /// The deadline (Unix seconds), 0 when the entry never expires.
    pub(crate) fn exptime(&self) -> u32 {
        let Some(at) = self.deadline_at() else {
            return 0;
        };
        // SAFETY: the shard's field, inside a block with room for it, under
        // its lock.
        u32::from_le_bytes(unsafe { self.at::<[u8; 4]>(at).read_unaligned() })
    }

    /// Sets the deadline.
    ///
    /// # Panics
    /// When `t` is not 0 and the block has no room for a deadline: the
    /// shard moves such an entry to a block that has (serving it past its
    /// deadline would be the alternative).
    pub(crate) fn set_exptime(&self, t: u32) {
        let Some(at) = self.deadline_at() else {
            assert_eq!(t, 0, "a deadline for a block without room for one");
            return;
        };
        // SAFETY: the shard's field, inside a block with room for it, under
        // its exclusive lock.
        unsafe { self.at::<[u8; 4]>(at).write_unaligned(t.to_le_bytes()) }
    }

    pub(crate) fn last_access(&self) -> u32 {
        // SAFETY: the shard's field, 4-aligned, under its lock.
        unsafe { self.at::<u32>(LAST_ACCESS).read() }
    }

    pub(crate) fn set_last_access(&self, t: u32) {
        // SAFETY: the shard's field, under its exclusive lock.
        unsafe { self.at::<u32>(LAST_ACCESS).write(t) }
    }

    fn marks_cell(&self) -> &'a AtomicU8 {
        // SAFETY: the marks byte, atomic for every user.
        unsafe { &*self.at::<AtomicU8>(MARKS) }
    }

    /// The entry's marks ([`ENTRY_MARKS`] and [`LINKED`]).
    pub(crate) fn marks(&self) -> u8 {
        self.marks_cell().load(Ordering::Relaxed) & (ENTRY_MARKS | LINKED)
    }

    /// Replaces the entry's marks, keeping those describing the block.
    pub(crate) fn set_marks(&self, marks: u8) {
        let cell = self.marks_cell();
        let keep = cell.load(Ordering::Relaxed) & !(ENTRY_MARKS | LINKED);
        cell.store(keep | (marks & (ENTRY_MARKS | LINKED)), Ordering::Relaxed);
    }

    pub(crate) fn policy(&self) -> &'a AtomicU8 {
        // SAFETY: the policy byte, atomic (reads under a shared lock may
        // update it).
        unsafe { &*self.at::<AtomicU8>(POLICY) }
    }

    /// The eviction links, for blocks made with room for them.
    pub(crate) fn links(&self) -> [u32; 2] {
        // SAFETY: blocks of a list-based policy have 8 bytes of links after
        // the header; the shard's field, under its lock.
        let b = unsafe { self.at::<[u8; 8]>(HEADER).read_unaligned() };
        [
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        ]
    }

    pub(crate) fn set_links(&self, links: [u32; 2]) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&links[0].to_le_bytes());
        b[4..].copy_from_slice(&links[1].to_le_bytes());
        // SAFETY: as in `links`, under the exclusive lock.
        unsafe { self.at::<[u8; 8]>(HEADER).write_unaligned(b) }
    }

    /// The key (immutable).
    pub(crate) fn key(&self) -> &'a [u8] {
        // SAFETY: the view stands for a live block as a handle would; the
        // borrow is tied to the view, which the lock bounds.
        let item = std::mem::ManuallyDrop::new(Item(self.0));
        let key = item.key();
        // SAFETY: the key lives in the block, not in the handle.
        unsafe { std::slice::from_raw_parts(key.as_ptr(), key.len()) }
    }

    /// The client flags (immutable).
    pub(crate) fn flags(&self) -> u32 {
        // SAFETY: as in `key`; the flags are a copy.
        std::mem::ManuallyDrop::new(Item(self.0)).flags()
    }

    /// The value's length (immutable).
    pub(crate) fn value_len(&self) -> usize {
        // SAFETY: as in `key`.
        std::mem::ManuallyDrop::new(Item(self.0)).value().len()
    }

    /// A new handle on the block.
    pub(crate) fn handle(&self) -> Item {
        // SAFETY: a live block, allocated while the lock is held.
        unsafe { add_reference(self.0) };
        Item(self.0)
    }
}
