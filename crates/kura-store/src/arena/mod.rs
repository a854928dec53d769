//! A shard's memory for items: one reserved region of address space, carved
//! into blocks by a two-level segregated-fit allocator (TLSF: Masmano et
//! al., 2004), in units of 4 bytes with a 4-byte header per block.
//!
//! Why not the global allocator: an item there pays malloc's chunk header
//! and its 16-byte size steps (about 16 bytes of 140), and its metadata
//! (CAS, deadline, marks, eviction state) lived in a separate slot array.
//! Here the block header doubles as the item's size, items carry their own
//! metadata, and an index entry is a 4-byte block offset (see item.rs and
//! bench/results/history.md for the bytes per item).
//!
//! * The region is [`REGION`] bytes of address space aligned to its size,
//!   reserved without access and made readable and writable up to the
//!   shard's limit (plus slack for blocks in flight), so pages are only
//!   paid for once touched. Its first page is [`Shared`]: what handles on
//!   other threads need (see below).
//! * A block starts with a word: its size in units (28 bits) and the
//!   allocator's flags (free, previous free: bits 31, 30). Bits 28 and 29
//!   of a used block are its item's, which the allocator keeps. A
//!   free block also holds its free-list links and, in its last word, its
//!   size, so the block after it can merge with it. Free neighbours are
//!   always merged.
//! * Blocks are freed by the shard under its lock, except when an item
//!   handle outlives its entry: the last handle to drop pushes the block on
//!   a lock-free stack in [`Shared`], which the shard drains before it
//!   allocates. If the shard is gone by then (the store was dropped), the
//!   last such handle unmaps the region.
//!
//! Every word is accessed as an `AtomicU32` (relaxed): a used block's
//! first word is read by item handles on any thread for its size while the
//! shard may flip its "previous free" flag.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes per allocation unit.
pub(crate) const UNIT: usize = 4;
/// Address space per region: the largest shard.
#[cfg(not(miri))]
pub(crate) const REGION: usize = 1 << 30;
/// Under Miri a region is an allocation aligned to its size (region.rs),
/// and rustc allows alignments up to 2^29 only: a quarter of the size,
/// so a store has more, smaller shards for the same capacity.
#[cfg(miri)]
pub(crate) const REGION: usize = 1 << 28;
/// Units before the first block: the shared header's page.
const FIRST: u32 = (4096 / UNIT) as u32;
/// The smallest block: header, two free-list links and the size footer.
const MIN_UNITS: u32 = 4;

/// The block's size in units.
const SIZE_MASK: u32 = (1 << 28) - 1;
/// The block before this one is free (its last word is its size).
const PREV_FREE: u32 = 1 << 30;
/// This block is free.
const FREE: u32 = 1 << 31;

/// Outstanding count's flag: the shard is gone.
const CLOSING: u64 = 1 << 63;

const SL_LOG: u32 = 4;
const SL: usize = 1 << SL_LOG;
/// First-level classes: sizes below 2^28 units.
const FL: usize = 25;

/// What handles on other threads share with the shard, at the region's base.
#[repr(C)]
pub(crate) struct Shared {
    /// Head of a stack of blocks whose last handle dropped (their second
    /// word links to the next); 0 when empty.
    deferred: AtomicU32,
    /// Blocks unlinked while handles held them, not yet pushed back; with
    /// [`CLOSING`] once the shard is gone.
    outstanding: AtomicU64,
}

/// One shard's arena.
pub(crate) struct Arena {
    base: NonNull<u8>,
    /// Bytes from `base` that are readable and writable.
    mapped: usize,
    /// The sentinel: a used block of size 0 after the last block.
    end: u32,
    fl_bitmap: u32,
    sl_bitmap: [u16; FL],
    heads: [[u32; SL]; FL],
    /// Units in used blocks.
    used_units: usize,
    /// Where [`Arena::walk`] goes on: always a block's first unit.
    cursor: u32,
    /// How the items in this arena keep their CAS uniques (their shard's
    /// scheme, item/meta.rs).
    pub(crate) cas: crate::item::CasScheme,
}

// SAFETY: the arena owns its region; the only memory it shares with other
// threads is `Shared` (atomics) and item blocks, whose shared fields are
// atomics or immutable while any handle exists (see item.rs).
unsafe impl Send for Arena {}
// SAFETY: `&Arena` methods only read words atomically.
unsafe impl Sync for Arena {}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("mapped", &self.mapped)
            .field("used_units", &self.used_units)
            .finish_non_exhaustive()
    }
}

fn page_up(bytes: usize) -> usize {
    bytes.div_ceil(4096) * 4096
}

impl Arena {
    /// An arena able to hold `bytes` of blocks, on huge pages if `huge`
    /// and the system has them (`pages.rs`).
    ///
    /// # Panics
    /// When the operating system refuses the address space (this process
    /// is out of it).
    pub(crate) fn new(bytes: usize, huge: bool) -> Arena {
        let base = region::reserve(huge)
            .unwrap_or_else(|e| panic!("kura-store: cannot reserve an arena: {e}"));
        let mut arena = Arena {
            base,
            mapped: 0,
            end: FIRST,
            fl_bitmap: 0,
            sl_bitmap: [0; FL],
            heads: [[0; SL]; FL],
            used_units: 0,
            cursor: FIRST,
            cas: Default::default(),
        };
        if let Err(e) = arena.map_to(FIRST as usize * UNIT + UNIT) {
            panic!("kura-store: cannot map an arena's first page: {e}");
        }
        // The sentinel at the start; growing turns the space before it
        // into one free block.
        arena.set(FIRST, 0);
        arena.grow_to(bytes);
        arena
    }

    /// Bytes the arena's blocks span now.
    pub(crate) fn bytes(&self) -> usize {
        (self.end - FIRST) as usize * UNIT
    }

    /// The largest number of block bytes an arena can hold.
    pub(crate) fn max_bytes() -> usize {
        REGION - FIRST as usize * UNIT - UNIT
    }

    /// Makes room for `bytes` of blocks (never shrinks); false when the
    /// memory could not be mapped.
    pub(crate) fn grow_to(&mut self, bytes: usize) -> bool {
        let bytes = bytes.min(Self::max_bytes());
        let units = (bytes / UNIT) as u32;
        let new_end = FIRST + units;
        if new_end <= self.end || new_end - self.end < MIN_UNITS {
            return true;
        }
        if self.map_to(new_end as usize * UNIT + UNIT).is_err() {
            return false;
        }
        let old = self.end;
        let prev_free = self.word(old) & PREV_FREE;
        self.set(new_end, 0);
        // The old sentinel becomes a used block over the new space, which
        // is then freed (merging with a free block before it).
        self.set(old, (new_end - old) | prev_free);
        self.end = new_end;
        self.used_units += (new_end - old) as usize;
        self.free(old);
        true
    }

    /// The region's shared header.
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: the first page is mapped and holds a `Shared` (zeroed by
        // the mapping, which is a valid `Shared`), aligned to the page.
        unsafe { &*self.base.as_ptr().cast::<Shared>() }
    }

    /// The address of unit `off`.
    #[inline(always)]
    pub(crate) fn ptr(&self, off: u32) -> *mut u8 {
        // SAFETY: offsets are below 2^28 units = REGION bytes, inside the
        // reservation.
        unsafe { self.base.as_ptr().add(off as usize * UNIT) }
    }

    /// The unit at the block starting at `ptr`, or `None` if it is not in
    /// this arena.
    pub(crate) fn offset_of(&self, ptr: *const u8) -> Option<u32> {
        let d = (ptr as usize).wrapping_sub(self.base.as_ptr() as usize);
        (d < REGION && d.is_multiple_of(UNIT)).then_some((d / UNIT) as u32)
    }

    #[inline(always)]
    fn cell(&self, off: u32) -> &AtomicU32 {
        // SAFETY: every unit the allocator touches is below `end + 1`, in
        // the mapped part, aligned to 4 bytes; AtomicU32 has u32's layout.
        unsafe { &*self.ptr(off).cast::<AtomicU32>() }
    }

    #[inline(always)]
    fn word(&self, off: u32) -> u32 {
        self.cell(off).load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn set(&self, off: u32, v: u32) {
        self.cell(off).store(v, Ordering::Relaxed);
    }

    /// Size in units of the block at `off`.
    #[inline(always)]
    pub(crate) fn units(&self, off: u32) -> u32 {
        self.word(off) & SIZE_MASK
    }

    /// Units in used blocks (items, in flight or held by handles).
    #[cfg(test)]
    pub(crate) fn used_units(&self) -> usize {
        self.used_units
    }

    /// Makes the first `bytes` of the region readable and writable. Fails
    /// when the system refuses (under `mlockall` with a small
    /// `RLIMIT_MEMLOCK`, for instance): the arena then stays as it is.
    fn map_to(&mut self, bytes: usize) -> std::io::Result<()> {
        let want = page_up(bytes).min(REGION);
        if want <= self.mapped {
            return Ok(());
        }
        region::open(self.base, self.mapped, want)?;
        self.mapped = want;
        Ok(())
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Handles may still hold blocks: the last of them unmaps.
        let prev = self
            .shared()
            .outstanding
            .fetch_or(CLOSING, Ordering::AcqRel);
        if prev & !CLOSING == 0 {
            // SAFETY: no handle holds a block, and the shard is going.
            unsafe { region::release(self.base) };
        }
    }
}

/// The last handle of a block whose entry is gone dropped: push the block
/// back to its shard, or unmap the region if the shard is gone and this
/// was the last such block.
///
/// # Safety
/// `block` is the first byte of a used block in a live region, whose
/// reference count just reached zero (so nothing else uses it).
pub(crate) unsafe fn release_detached(block: *mut u8) {
    // The region's base, with the block's provenance (the whole region).
    let base = block.map_addr(|a| a & !(REGION - 1));
    // SAFETY: regions are aligned to REGION, so `base` is this block's
    // region, whose first page holds its `Shared`, live until the count of
    // outstanding blocks (which includes this one) reaches zero.
    let shared = unsafe { &*base.cast::<Shared>() };
    let off = ((block as usize - base as usize) / UNIT) as u32;
    // SAFETY: the block's second word is ours now (its reference count,
    // which is zero, and the marks and policy bytes, which nobody reads
    // any more: no handle is left, and the entry is unlinked).
    let link = unsafe { &*block.add(UNIT).cast::<AtomicU32>() };
    let mut head = shared.deferred.load(Ordering::Relaxed);
    loop {
        link.store(head, Ordering::Relaxed);
        match shared
            .deferred
            .compare_exchange_weak(head, off, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    let prev = shared.outstanding.fetch_sub(1, Ordering::AcqRel);
    if prev == CLOSING | 1 {
        if let Some(base) = NonNull::new(base) {
            // SAFETY: the shard is gone and no block is outstanding: nothing
            // refers to the region any more.
            unsafe { region::release(base) };
        }
    }
}

mod region;
mod tlsf;
mod walk;

#[cfg(test)]
mod tests {
    use super::tlsf::{mapping, mapping_search};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn size_classes_cover_every_size_in_order() {
        let mut last = (0, 0);
        // Under Miri the first two thousand sizes only (pure arithmetic).
        for size in 1..crate::testing::size(100_000, 2_000) as u32 {
            let c = mapping(size);
            assert!(c >= last, "{size}");
            last = c;
            if let Some(s) = mapping_search(size) {
                assert!(s >= c);
                // Every block of the searched class holds `size` units.
                let smallest = (size..).find(|&x| mapping(x) >= s).unwrap();
                assert!(smallest >= size);
            }
        }
    }

    #[test]
    // The kernel's advice, read back from /proc: under Miri a region is an
    // allocation, advised for nothing (region.rs).
    #[cfg_attr(miri, ignore = "Miri's regions are allocations (region.rs)")]
    fn an_arena_is_advised_for_huge_pages_only_when_asked() {
        if !crate::pages::kernel_has_them() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        let huge = Arena::new(1 << 20, true);
        let small = Arena::new(1 << 20, false);
        // The first page (the region's header) is in use in both.
        assert_eq!(
            crate::pages::advised(huge.base.as_ptr() as usize),
            Some(true)
        );
        assert_eq!(
            crate::pages::advised(small.base.as_ptr() as usize),
            Some(false)
        );
        // The advice covers the part mapped later, as the arena grows.
        let mut huge = huge;
        assert!(huge.grow_to(8 << 20));
        let late = huge.ptr(huge.end - 16) as usize;
        assert_eq!(crate::pages::advised(late), Some(true));
    }

    #[test]
    fn blocks_split_merge_and_fill_the_arena() {
        let mut a = Arena::new(1 << 20, false);
        a.check().unwrap();
        let total = a.large_free_blocks(10);
        assert_eq!(total.len(), 1);
        let blocks: Vec<u32> = (0..100).map(|i| a.alloc(4 + i % 40).unwrap()).collect();
        a.check().unwrap();
        for (i, &b) in blocks.iter().enumerate() {
            if i % 2 == 0 {
                a.free(b);
            }
        }
        a.check().unwrap();
        for (i, &b) in blocks.iter().enumerate() {
            if i % 2 == 1 {
                a.free(b);
            }
        }
        a.check().unwrap();
        assert_eq!(a.used_units(), 0);
        assert_eq!(a.large_free_blocks(10).len(), 1, "all merged again");
        // The whole arena in one block, and nothing more.
        let all = (1 << 20) / UNIT as u32;
        let b = a.alloc(all).unwrap();
        assert_eq!(a.alloc(4), None);
        a.free(b);
        a.check().unwrap();
    }

    #[test]
    fn the_walk_visits_used_blocks_and_survives_frees() {
        let mut a = Arena::new(1 << 16, false);
        let blocks: Vec<u32> = (0..20).map(|_| a.alloc(8).unwrap()).collect();
        let mut seen = Vec::new();
        while let Some(b) = a.walk() {
            seen.push(b);
            // Freeing the block just visited and its neighbour ahead keeps
            // the cursor on a block boundary.
            if seen.len() % 3 == 0 {
                a.free(b);
                if let Some(n) = a.next_block(b) {
                    if !a.is_free(n) {
                        a.free(n);
                    }
                }
            }
        }
        a.check().unwrap();
        assert!(seen.len() >= 14 && seen.iter().all(|b| blocks.contains(b)));
        assert!(a.walk_at_start());
    }

    #[test]
    fn growing_adds_a_free_block_merged_with_the_last() {
        let mut a = Arena::new(4096, false);
        let b = a.alloc(100).unwrap();
        a.grow_to(1 << 20);
        a.check().unwrap();
        assert_eq!(a.large_free_blocks(10).len(), 1);
        // The whole free block, although its size class also holds larger
        // blocks than it.
        let free = a.large_free_blocks(1)[0];
        assert!(a.alloc(a.units(free)).is_some());
        a.free(b);
        a.check().unwrap();
    }

    #[test]
    fn the_item_bits_of_a_used_block_survive_its_neighbours() {
        // Bits 28 and 29 of a used block's first word are its item's
        // (item/mod.rs): freeing, merging and allocating around the block
        // flips its previous-free flag but keeps them.
        let mut a = Arena::new(1 << 16, false);
        let blocks: Vec<u32> = (0..4).map(|_| a.alloc(10).unwrap()).collect();
        let item_bits = 3 << 28;
        let units = a.units(blocks[1]);
        a.cell(blocks[1]).fetch_or(item_bits, Ordering::Relaxed);
        a.free(blocks[0]);
        a.check().unwrap();
        assert_eq!(a.word(blocks[1]) & PREV_FREE, PREV_FREE);
        a.free(blocks[2]);
        let again = a.alloc(10).unwrap();
        a.free(blocks[3]);
        a.check().unwrap();
        assert_eq!(a.word(blocks[1]) & item_bits, item_bits);
        assert_eq!(a.units(blocks[1]), units);
        a.free(blocks[1]);
        a.free(again);
        a.check().unwrap();
    }

    #[test]
    fn a_block_pushed_back_by_a_handle_is_taken_once() {
        let mut a = Arena::new(1 << 16, false);
        let b = a.alloc(10).unwrap();
        a.note_detached();
        // SAFETY: `b` is a used block nothing else refers to.
        unsafe { release_detached(a.ptr(b)) };
        assert!(a.has_deferred());
        assert_eq!(a.take_deferred(), [b]);
        assert!(!a.has_deferred());
        a.free(b);
        a.check().unwrap();
    }

    #[test]
    fn a_region_outlives_its_arena_while_a_block_is_held() {
        let mut a = Arena::new(1 << 16, false);
        let b = a.alloc(10).unwrap();
        let p = a.ptr(b);
        // SAFETY: writing inside a used block of a live region.
        unsafe { p.add(16).write(42) };
        a.note_detached();
        drop(a);
        // SAFETY: the region is still mapped: one block is outstanding.
        assert_eq!(unsafe { p.add(16).read() }, 42);
        // SAFETY: the last handle lets go; the region is unmapped.
        unsafe { release_detached(p) };
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u32),
        Free(usize),
    }

    proptest! {
        #![proptest_config(crate::testing::config(256))]

        #[test]
        fn random_allocations_keep_the_structure(
            ops in prop::collection::vec(prop_oneof![
                3 => (4u32..3000).prop_map(Op::Alloc),
                2 => any::<usize>().prop_map(Op::Free),
            ], 1..crate::testing::size(300, 40))
        ) {
            let mut a = Arena::new(1 << 18, false);
            let mut live: Vec<(u32, u32)> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(n) => {
                        if let Some(b) = a.alloc(n) {
                            let got = a.units(b);
                            prop_assert!(got >= n && got < n + MIN_UNITS.max(n / 8 + 1) + 16);
                            // No overlap with a live block.
                            for &(o, s) in &live {
                                prop_assert!(b + got <= o || o + s <= b);
                            }
                            live.push((b, got));
                        } else {
                            // Refused only when no free block is that large.
                            let free: u32 = a.large_free_blocks(usize::MAX).iter().map(|&f| a.units(f)).max().unwrap_or(0);
                            prop_assert!(free < n, "refused {n} with a free block of {free}");
                        }
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (b, _) = live.swap_remove(i % live.len());
                        a.free(b);
                    }
                    Op::Free(_) => {}
                }
                prop_assert_eq!(a.check(), Ok(()));
            }
        }
    }
}
