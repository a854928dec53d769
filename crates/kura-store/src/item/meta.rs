//! [`Meta`]: the shard's view of a block's metadata (CAS, deadline,
//! access time, marks, policy byte, links), read and written under the
//! shard's lock.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use super::*;

/// The shard's view of a block's metadata, under the shard lock, for as
/// long as `'a` (a borrow of the shard's arena).
#[derive(Clone, Copy)]
pub(crate) struct Meta<'a>(NonNull<u8>, std::marker::PhantomData<&'a ()>);

impl<'a> Meta<'a> {
    /// # Safety
    /// `p` is a live block written by [`Contents::write`], and the caller
    /// holds its shard's lock (exclusively, for the setters) for as long as
    /// it uses the view, and the block stays allocated for `'a`.
    pub(crate) unsafe fn new(p: *mut u8) -> Meta<'a> {
        // SAFETY: blocks are never at address 0.
        Meta(
            unsafe { NonNull::new_unchecked(p) },
            std::marker::PhantomData,
        )
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

    pub(crate) fn cas(&self) -> u64 {
        // SAFETY: the shard's field, under its lock.
        u64::from_le_bytes(unsafe { self.at::<[u8; 8]>(CAS).read_unaligned() })
    }

    pub(crate) fn set_cas(&self, cas: u64) {
        // SAFETY: the shard's field, under its exclusive lock.
        unsafe { self.at::<[u8; 8]>(CAS).write_unaligned(cas.to_le_bytes()) }
    }

    pub(crate) fn exptime(&self) -> u32 {
        // SAFETY: the shard's field, 4-aligned, under its lock.
        unsafe { self.at::<u32>(EXPTIME).read() }
    }

    pub(crate) fn set_exptime(&self, t: u32) {
        // SAFETY: the shard's field, under its exclusive lock.
        unsafe { self.at::<u32>(EXPTIME).write(t) }
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
