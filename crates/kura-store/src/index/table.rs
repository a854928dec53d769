//! One open-addressing table of block offsets: groups of 16 slots, each
//! slot a control byte and a 4-byte offset (5 bytes a slot). A control byte
//! is 0 (empty), 1 (deleted: a tombstone that lookups walk past) or a 7-bit
//! tag of the key hash with the high bit set, so a lookup compares 16 tags
//! at once and reads a block only for a tag that matches (1 in 128 for
//! another key). Any number of groups is allowed (a hash picks its home
//! group by multiplying, not masking), so a table can be sized to the load
//! it should have instead of to a power of two; probing goes on to the next
//! group until one has an empty slot.
//!
//! The groups live in an anonymous mapping of the table's own: zero bytes
//! are an empty table, pages the table never touches cost nothing, and a
//! dropped table's memory goes back to the system at once instead of
//! staying with the allocator.

use std::ptr::NonNull;

/// Slots in a group.
pub(super) const WIDTH: usize = 16;
const EMPTY: u8 = 0;
const DELETED: u8 = 1;

#[repr(C)]
#[derive(Clone, Copy)]
struct Group {
    ctrl: [u8; WIDTH],
    slots: [u32; WIDTH],
}

/// Slots of a group picked out by a test on their control bytes, lowest
/// first.
#[derive(Clone, Copy)]
struct Mask(bits::Word);

impl Mask {
    #[inline]
    fn is_set(self) -> bool {
        self.0 != 0
    }

    /// The lowest slot in the mask (the mask is not empty).
    #[inline]
    fn lowest(self) -> usize {
        (self.0.trailing_zeros() / bits::STRIDE) as usize
    }
}

impl Iterator for Mask {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        self.is_set().then(|| {
            let s = self.lowest();
            self.0 &= self.0 - 1;
            s
        })
    }
}

/// A group's 16 control bytes, compared all at once: SSE2 on x86_64 (one
/// compare and one mask move, as SwissTables do), integer arithmetic on a
/// `u128` elsewhere.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod bits {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };

    /// One bit a slot.
    pub(super) type Word = u32;
    pub(super) const STRIDE: u32 = 1;

    #[derive(Clone, Copy)]
    pub(super) struct Ctrl(__m128i);

    impl Ctrl {
        #[inline]
        pub(super) fn load(bytes: &[u8; 16]) -> Ctrl {
            // SAFETY: reads the 16 bytes of `bytes` (an unaligned load);
            // this module is compiled only where SSE2 is enabled.
            Ctrl(unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) })
        }

        /// Slots whose control byte is `b`.
        #[inline]
        pub(super) fn equal(self, b: u8) -> Word {
            // SAFETY: register operations only; SSE2 is enabled here.
            let m = unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(self.0, _mm_set1_epi8(b as i8))) };
            m as u16 as Word
        }

        /// Slots whose control byte has its high bit set.
        #[inline]
        pub(super) fn high(self) -> Word {
            // SAFETY: a register operation only; SSE2 is enabled here.
            let m = unsafe { _mm_movemask_epi8(self.0) };
            m as u16 as Word
        }

        /// Slots whose control byte has its high bit clear.
        #[inline]
        pub(super) fn low(self) -> Word {
            !self.high() & 0xffff
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
use swar as bits;

/// The portable group compare (tested on every machine).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
mod swar {
    /// The high bit of each byte stands for its slot.
    pub(super) type Word = u128;
    pub(super) const STRIDE: u32 = 8;

    const LOW7: u128 = u128::from_le_bytes([0x7f; 16]);
    const HIGH: u128 = u128::from_le_bytes([0x80; 16]);
    const ONES: u128 = u128::from_le_bytes([0x01; 16]);

    #[derive(Clone, Copy)]
    pub(super) struct Ctrl(u128);

    /// The high bit of every byte of `x` that is 0, and no other bit.
    /// Exact: `(b & 0x7f) + 0x7f` never carries into the next byte.
    #[inline]
    pub(super) fn zero_bytes(x: u128) -> u128 {
        !(((x & LOW7) + LOW7) | x) & HIGH
    }

    impl Ctrl {
        #[inline]
        pub(super) fn load(bytes: &[u8; 16]) -> Ctrl {
            Ctrl(u128::from_le_bytes(*bytes))
        }

        #[inline]
        pub(super) fn equal(self, b: u8) -> Word {
            zero_bytes(self.0 ^ (ONES * u128::from(b)))
        }

        #[inline]
        pub(super) fn high(self) -> Word {
            self.0 & HIGH
        }

        #[inline]
        pub(super) fn low(self) -> Word {
            !self.0 & HIGH
        }
    }
}

impl Group {
    #[inline]
    fn ctrl(&self) -> bits::Ctrl {
        bits::Ctrl::load(&self.ctrl)
    }

    /// Slots whose control byte is `b`.
    #[inline]
    fn equal(&self, b: u8) -> Mask {
        Mask(self.ctrl().equal(b))
    }

    /// Slots holding an entry.
    #[inline]
    fn live(&self) -> Mask {
        Mask(self.ctrl().high())
    }

    /// Slots free for an entry: empty or deleted.
    #[inline]
    fn free(&self) -> Mask {
        Mask(self.ctrl().low())
    }

    /// Whether the group has an empty slot: a lookup ends at such a group.
    #[inline]
    fn has_empty(&self) -> bool {
        self.equal(EMPTY).is_set()
    }
}

/// The control byte of an entry whose key hashes to `hash`: the low seven
/// bits with the high bit set. Everything the table uses comes from the
/// hash's low 32 bits (the home group from their top, scaled; the tag from
/// their bottom), so a 32-bit part of a hash is enough to find an entry
/// (the small queue of `s3fifo` checks its ids that way), and the shard is
/// chosen from the other half.
#[inline]
fn tag(hash: u64) -> u8 {
    0x80 | (hash as u8 & 0x7f)
}

/// A number of groups in whole pages of the mapping.
pub(super) fn groups_for(want: usize) -> usize {
    let page = 4096;
    let bytes = (want.max(1) * size_of::<Group>()).div_ceil(page) * page;
    bytes / size_of::<Group>()
}

/// Zeroed groups in an anonymous mapping owned like a `Box<[Group]>`.
struct Groups {
    ptr: NonNull<Group>,
    len: usize,
}

// SAFETY: `Groups` owns its mapping exclusively, as a `Box<[Group]>` owns
// its allocation; `Group` is plain integers.
unsafe impl Send for Groups {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Groups {}

impl Groups {
    /// `len` zeroed groups, advised for huge pages if `huge`.
    fn new(len: usize, huge: bool) -> Groups {
        if len == 0 {
            return Groups {
                ptr: NonNull::dangling(),
                len: 0,
            };
        }
        let bytes = len * size_of::<Group>();
        // SAFETY: a new anonymous private mapping; no memory of ours is
        // involved.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        match NonNull::new(p.cast::<Group>()) {
            Some(ptr) if p != libc::MAP_FAILED => {
                if huge {
                    // Advice only: without huge pages the table works on
                    // small ones.
                    crate::pages::advise_huge(p.cast(), bytes);
                }
                Groups { ptr, len }
            }
            // As for any collection whose allocation is refused.
            _ => std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<Group>(len)
                    .unwrap_or(std::alloc::Layout::new::<Group>()),
            ),
        }
    }
}

impl std::ops::Deref for Groups {
    type Target = [Group];
    fn deref(&self) -> &[Group] {
        // SAFETY: `ptr` is either dangling with `len` 0, or a mapping of
        // `len` groups that lives as long as `self`: page aligned (more than
        // `Group` needs), zero filled by the system, and every bit pattern
        // is a valid `Group`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Groups {
    fn deref_mut(&mut self) -> &mut [Group] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: the mapping made in `new`, which nothing refers to now.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.len * size_of::<Group>());
            }
        }
    }
}

/// Where an entry is: group and slot.
pub(super) type Place = (usize, usize);

/// A table of offsets by key hash.
pub(super) struct Table {
    groups: Groups,
    items: usize,
    deleted: usize,
}

impl Table {
    /// A table of `groups` groups (0: no memory at all), on huge pages if
    /// `huge`.
    pub(super) fn new(groups: usize, huge: bool) -> Table {
        Table {
            groups: Groups::new(groups, huge),
            items: 0,
            deleted: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items
    }

    pub(super) fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Slots in use, by entries or tombstones.
    pub(super) fn used(&self) -> usize {
        self.items + self.deleted
    }

    /// Where the table's groups start (0 for none).
    #[cfg(test)]
    pub(super) fn addr(&self) -> usize {
        if self.groups.len == 0 {
            0
        } else {
            self.groups.ptr.as_ptr() as usize
        }
    }

    /// Bytes of the table's mapping.
    pub(super) fn bytes(&self) -> usize {
        self.groups.len() * size_of::<Group>()
    }

    /// The group where a search for `hash` starts: the hash's low half
    /// scaled to the number of groups.
    #[inline]
    fn home(&self, hash: u64) -> usize {
        ((u64::from(hash as u32) * self.groups.len() as u64) >> 32) as usize
    }

    #[inline]
    fn next(&self, g: usize) -> usize {
        if g + 1 == self.groups.len() {
            0
        } else {
            g + 1
        }
    }

    /// The place of the entry with `hash` that `eq` recognises.
    #[inline]
    pub(super) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<Place> {
        self.find_where(hash, |_, off| eq(off))
    }

    /// As [`find`](Self::find), with each candidate's position (as
    /// [`at`](Self::at) numbers them) given to `eq` with its offset.
    #[inline]
    pub(super) fn find_where(
        &self,
        hash: u64,
        mut eq: impl FnMut(usize, u32) -> bool,
    ) -> Option<Place> {
        if self.items == 0 {
            return None;
        }
        let t = tag(hash);
        let mut g = self.home(hash);
        for _ in 0..self.groups.len() {
            let group = &self.groups[g];
            for s in group.equal(t) {
                if eq(g * WIDTH + s, group.slots[s]) {
                    return Some((g, s));
                }
            }
            // An entry is never placed beyond a group that had room.
            if group.has_empty() {
                return None;
            }
            g = self.next(g);
        }
        None
    }

    /// Adds `off` under `hash`. The caller keeps [`used`](Self::used) below
    /// the number of slots.
    pub(super) fn insert(&mut self, hash: u64, off: u32) {
        let mut g = self.home(hash);
        for _ in 0..self.groups.len() {
            let group = &mut self.groups[g];
            let free = group.free();
            if free.is_set() {
                let s = free.lowest();
                if group.ctrl[s] == DELETED {
                    self.deleted -= 1;
                }
                group.ctrl[s] = tag(hash);
                group.slots[s] = off;
                self.items += 1;
                return;
            }
            g = self.next(g);
        }
        unreachable!("an index table is never let fill up");
    }

    /// The entry in slot `pos` (group `pos / 16`), if there is one.
    #[inline]
    pub(super) fn at(&self, pos: usize) -> Option<u32> {
        let group = self.groups.get(pos / WIDTH)?;
        let s = pos % WIDTH;
        (group.ctrl[s] & 0x80 != 0).then_some(group.slots[s])
    }

    pub(super) fn get(&self, (g, s): Place) -> u32 {
        self.groups[g].slots[s]
    }

    pub(super) fn set(&mut self, (g, s): Place, off: u32) {
        self.groups[g].slots[s] = off;
    }

    /// Empties the slot at `place`. It becomes a tombstone only if its
    /// group has no empty slot: a lookup stops at a group with one, so one
    /// that went on past this group must still go on once a slot is freed.
    pub(super) fn remove(&mut self, (g, s): Place) -> u32 {
        let group = &mut self.groups[g];
        let full = !group.has_empty();
        group.ctrl[s] = if full { DELETED } else { EMPTY };
        self.deleted += usize::from(full);
        self.items -= 1;
        group.slots[s]
    }

    /// Takes every entry out of group `g`, leaving tombstones (the rest of
    /// the table is still searched while a table is emptied group by group).
    pub(super) fn take_group(&mut self, g: usize, mut each: impl FnMut(u32)) {
        let group = &mut self.groups[g];
        for s in group.live() {
            each(group.slots[s]);
            group.ctrl[s] = DELETED;
            self.items -= 1;
            self.deleted += 1;
        }
    }

    /// Every offset in the table.
    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.groups
            .iter()
            .flat_map(|group| group.live().map(|s| group.slots[s]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots a mask names.
    fn slots(m: Mask) -> Vec<usize> {
        m.collect()
    }

    #[test]
    fn the_portable_compare_agrees_with_a_byte_loop() {
        let slots_of = |w: u128| -> Vec<usize> {
            // Only the high bit of a byte may be set; it names the byte.
            assert_eq!(w & !u128::from_le_bytes([0x80; WIDTH]), 0);
            (0..128)
                .filter(|&b| w >> b & 1 == 1)
                .map(|b| b / swar::STRIDE as usize)
                .collect()
        };
        // Under Miri every fifth byte value.
        for b in (0..=255u8).step_by(crate::testing::size(1, 5)) {
            for other in [
                EMPTY,
                DELETED,
                0x7f,
                0x80,
                0xff,
                b.wrapping_add(1),
                b.wrapping_sub(1),
            ] {
                for at in [0, 7, 15] {
                    let mut ctrl = [other; WIDTH];
                    ctrl[at] = b;
                    ctrl[(at + 1) % WIDTH] = 0;
                    let c = swar::Ctrl::load(&ctrl);
                    let want = |f: &dyn Fn(u8) -> bool| -> Vec<usize> {
                        (0..WIDTH).filter(|&i| f(ctrl[i])).collect()
                    };
                    assert_eq!(slots_of(c.equal(b)), want(&|x| x == b), "{ctrl:?}");
                    assert_eq!(slots_of(c.equal(EMPTY)), want(&|x| x == EMPTY));
                    assert_eq!(slots_of(c.high()), want(&|x| x >= 0x80));
                    assert_eq!(slots_of(c.low()), want(&|x| x < 0x80));
                }
            }
        }
    }

    #[test]
    fn group_masks_name_exactly_the_slots_asked_for() {
        // Every byte value (under Miri every fifth), beside every other,
        // in every position.
        for b in (0..=255u8).step_by(crate::testing::size(1, 5)) {
            for other in [EMPTY, DELETED, 0x80, 0xff, b.wrapping_add(1)] {
                for at in [0, 7, 15] {
                    let mut ctrl = [other; WIDTH];
                    ctrl[at] = b;
                    let g = Group {
                        ctrl,
                        slots: [0; WIDTH],
                    };
                    let want = |f: &dyn Fn(u8) -> bool| -> Vec<usize> {
                        (0..WIDTH).filter(|&i| f(ctrl[i])).collect()
                    };
                    assert_eq!(slots(g.equal(b)), want(&|c| c == b));
                    assert_eq!(slots(g.equal(EMPTY)), want(&|c| c == EMPTY));
                    assert_eq!(slots(g.live()), want(&|c| c >= 0x80));
                    assert_eq!(slots(g.free()), want(&|c| c < 0x80));
                    assert_eq!(g.has_empty(), ctrl.contains(&EMPTY));
                }
            }
        }
    }

    #[test]
    fn a_table_is_whole_pages_of_groups() {
        assert_eq!(size_of::<Group>(), 80);
        assert_eq!(groups_for(1), 4096 / 80);
        assert!(groups_for(1000) >= 1000);
        assert!(groups_for(1000) * 80 - 1000 * 80 < 4096);
    }

    #[test]
    fn tombstones_only_where_a_group_was_full() {
        // One group: every hash has the same home.
        let mut t = Table::new(1, false);
        assert_eq!(t.groups(), 1);
        for off in 1..=10 {
            t.insert(u64::from(off) << 57, off);
        }
        let p = t.find(4 << 57, |o| o == 4).expect("found");
        assert_eq!(t.remove(p), 4);
        assert_eq!((t.len(), t.used()), (9, 9), "room in the group: empty");
        for off in 11..=17 {
            t.insert(u64::from(off) << 57, off);
        }
        assert_eq!(t.used(), 16);
        let p = t.find(3 << 57, |o| o == 3).expect("found");
        t.remove(p);
        assert_eq!((t.len(), t.used()), (15, 16), "full group: a tombstone");
        assert!(t.find(3 << 57, |o| o == 3).is_none());
        t.insert(99 << 57, 99);
        assert_eq!((t.len(), t.used()), (16, 16), "the tombstone reused");
        assert!(t.find(99 << 57, |o| o == 99).is_some());
        let mut all: Vec<u32> = t.iter().collect();
        all.sort_unstable();
        let want: Vec<u32> = (1..=17).filter(|&o| o != 3 && o != 4).chain([99]).collect();
        assert_eq!(all, want);
    }

    #[test]
    fn a_lookup_walks_past_full_groups_and_tombstones() {
        // Three groups; every hash below has home 0 (low half 0).
        let mut t = Table::new(3, false);
        for off in 1..=40 {
            t.insert(u64::from(off % 100) << 57, off);
        }
        // 1-16 fill group 0, 17-32 group 1, 33-40 start group 2.
        for off in [2, 20] {
            let p = t.find(u64::from(off) << 57, |o| o == off).expect("found");
            t.remove(p);
        }
        for off in (1..=40).filter(|&o| o != 2 && o != 20) {
            assert_eq!(
                t.find(u64::from(off) << 57, |o| o == off).map(|p| t.get(p)),
                Some(off)
            );
        }
    }
    #[test]
    #[cfg_attr(miri, ignore = "the kernel's advice, read from /proc: Miri has none")]
    fn a_table_is_advised_for_huge_pages_only_when_asked() {
        if !crate::pages::kernel_has_them() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        for huge in [true, false] {
            let mut t = Table::new(groups_for(100_000), huge);
            t.insert(7, 7);
            assert_eq!(crate::pages::advised(t.addr()), Some(huge));
        }
    }

    #[test]
    fn an_empty_table_has_no_mapping_and_finds_nothing() {
        let t = Table::new(0, false);
        assert_eq!((t.bytes(), t.len()), (0, 0));
        assert!(t.find(7, |_| true).is_none());
        assert_eq!(t.iter().count(), 0);
    }
}
