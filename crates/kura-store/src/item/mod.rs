//! [`Item`]: one stored entry's key, value and client flags, with the
//! entry's metadata, in a single block of its shard's arena (arena.rs).
//! Readers get a handle (one atomic increment), never a copy of the bytes;
//! an item that is replaced, deleted, evicted or expired while a reader
//! holds it stays valid for that reader, and its block goes back to the
//! shard when the last handle drops.
//!
//! A block, in bytes (18 of header; the first word is the allocator's):
//!
//! ```text
//! 0  size in 4-byte units, heap mark (bit 28), wide-CAS mark (bit 29),
//!    allocator flags (bits 30, 31)
//! 4  reference count (atomic u16): handles, plus one while linked
//! 6  marks (atomic u8)        7  eviction policy's byte (atomic u8)
//! 8  CAS unique: its sequence number, or its low half if wide (u32)
//! 12 last access (Unix)       16 key length (12 bits), tail (4 bits)
//! 18 [eviction links: two u32, for list-based policies]
//!    [the CAS unique's high half: u32, only if wide]
//!    [deadline: u32 (Unix, 0 never), only for entries given one]
//!    [client flags: u32, only when not 0, as memcached]
//!    key, value, then 0-15 unused bytes (the tail)
//! ```
//!
//! Most cached items never expire (memcached's clients set exptime 0 by
//! default), so the deadline, like the flags, takes room only when an
//! entry has one. A shard's CAS uniques are a sequence number above the
//! shard's number ([`CasScheme`]): one it made, up to 2^32 of them, is kept
//! as that number in 4 bytes; any other (a client's, meta `E`, or one
//! past 2^32) in 8. So an item of 100 bytes with a 10-byte key and flags
//! is a block of 132 bytes (140 before both), 136 with a deadline. An
//! entry whose block has no room for a new deadline or CAS unique moves to
//! a block with the room (`Shard::set_exptime`, `Shard::set_cas`);
//! handles on the old block keep it, as after any replacement.
//!
//! The reference count has 16 bits, as memcached's. A block can have more
//! handles than that (one `get` line naming a key 50,000 times holds 50,000
//! of them): once the count reaches [`COUNT_LIMIT`], further handles are
//! counted in [`OVERFLOW`], a locked table by block address, which handles
//! given up draw from first. So the lock is only taken by blocks with tens
//! of thousands of handles, and a block's count reaches zero (the last
//! handle frees it) only with no overflow left.
//!
//! The value's length is what is left of the block before the tail (a
//! block is rounded up to whole units, and the allocator may hand out a few
//! more units than asked for rather than leave a sliver too small to be a
//! block). The metadata after the
//! reference count (CAS, deadline, access time, marks, policy byte, links)
//! belongs to the shard, which reads and writes it under its lock; a handle
//! only reads the size word, the marks that say where the key starts, and
//! the key, flags and value, which never change while a handle exists.
//! Items made with [`Item::new`] outside any store live on the heap with
//! the same layout (the `HEAP_BLOCK` bit of their first word).

use std::alloc::Layout;
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU16, AtomicU32, AtomicU8, Ordering};

use parking_lot::Mutex;

use bytes::Bytes;

use crate::arena::{release_detached, UNIT};

/// The reference count (an atomic u16).
const COUNT: usize = 4;
const MARKS: usize = 6;
const POLICY: usize = 7;
const CAS: usize = 8;
const LAST_ACCESS: usize = 12;
const KEY_LEN: usize = 16;
pub(crate) const HEADER: usize = 18;
const LINKS: usize = 8;
/// The deadline's bytes, in blocks marked [`HAS_DEADLINE`].
const DEADLINE: usize = 4;
/// The CAS unique's high half, in blocks marked [`WIDE_CAS`].
const CAS_HIGH: usize = 4;

/// In the first word of a block made by [`Item::new`]: a heap allocation,
/// not in an arena. Only ever set in heap blocks, whose first word nothing
/// but their handles reads (an arena's allocator keeps sizes below 2^28
/// units and its flags in bits 30 and 31, so the bit is 0 in its blocks).
const HEAP_BLOCK: u32 = 1 << 28;
/// In the first word of a block: the CAS unique has 8 bytes (its high
/// half after the links). Set when the block is made, before anyone else
/// sees it; the arena's allocator keeps the bit while the block is used.
const WIDE_CAS: u32 = 1 << 29;
/// The block's size in units, in its first word.
const SIZE_MASK: u32 = HEAP_BLOCK - 1;

/// Where the optional fields of a block with these marks and first word
/// are: the CAS unique's high half (if wide), the deadline (if any), and
/// the flags or, without flags, the key.
#[inline(always)]
fn optional_fields(marks: u8, word: u32) -> (Option<usize>, Option<usize>, usize) {
    let mut at = HEADER + if marks & HAS_LINKS != 0 { LINKS } else { 0 };
    let cas_high = (word & WIDE_CAS != 0).then_some(at);
    if cas_high.is_some() {
        at += CAS_HIGH;
    }
    let deadline = (marks & HAS_DEADLINE != 0).then_some(at);
    if deadline.is_some() {
        at += DEADLINE;
    }
    (cas_high, deadline, at)
}

/// The count at which further handles are counted in [`OVERFLOW`].
const COUNT_LIMIT: u16 = 0xc000;
/// Counts from which a handle given up looks for overflow first.
///
/// Increments and decrements are single atomic operations; one that goes
/// the wrong way is undone, so a count is briefly off by the number of
/// threads in the middle of one. Overflow is only added while the count is
/// at [`COUNT_LIMIT`], and handles given up at counts from here on take
/// from it first, so while there is overflow the count stays far above 1
/// and below 65,536, for fewer than 16,384 such threads at once.
const OVERFLOW_CHECK: u16 = 0x8000;

/// Handles beyond [`COUNT_LIMIT`], by block address. An entry exists only
/// while its block's count is near the limit.
static OVERFLOW: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

/// The entry was stored with a base64 (binary) key through the meta protocol.
pub(crate) const KEY_BINARY: u8 = 1;
/// The entry has been read since it was stored.
pub(crate) const FETCHED: u8 = 2;
/// The entry was invalidated (`md ... I`) and is served as stale.
pub(crate) const STALE: u8 = 4;
/// A client has been handed the recache token (`W`) for this entry.
pub(crate) const TOKEN_SENT: u8 = 8;
/// Client flags follow the header (they are not 0).
const HAS_FLAGS: u8 = 16;
/// Eviction links follow the header.
const HAS_LINKS: u8 = 32;
/// A deadline follows the header and links (the entry was given one).
const HAS_DEADLINE: u8 = 64;
/// The entry is in its shard's index.
pub(crate) const LINKED: u8 = 128;
/// The marks an entry's metadata may carry (the rest describe the block).
pub(crate) const ENTRY_MARKS: u8 = KEY_BINARY | FETCHED | STALE | TOKEN_SENT;

/// The largest key a block can hold.
pub const KEY_MAX: usize = (1 << 12) - 1;
/// The key length's share of its 16 bits; the rest is the tail.
const KEY_BITS: u32 = 12;

/// An immutable key/value/flags triple, cheap to clone and share.
pub struct Item(NonNull<u8>);

// SAFETY: what a handle reads never changes while it exists, or is atomic;
// the reference count is atomic (see the module documentation).
unsafe impl Send for Item {}
// SAFETY: as above.
unsafe impl Sync for Item {}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("flags", &self.flags())
            .field("value_len", &self.value().len())
            .finish()
    }
}

impl PartialEq for Item {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key() && self.flags() == other.flags() && self.value() == other.value()
    }
}

impl Eq for Item {}

impl Clone for Item {
    fn clone(&self) -> Self {
        // SAFETY: this handle keeps the block alive.
        unsafe { add_reference(self.0) };
        Item(self.0)
    }
}

/// The reference count of the block at `p`.
///
/// # Safety
/// `p` is a block written by [`Contents::write`] that stays allocated for
/// `'a`.
#[inline(always)]
unsafe fn count<'a>(p: NonNull<u8>) -> &'a AtomicU16 {
    // SAFETY: as the caller promised; the count is 2-aligned, and every
    // user accesses it atomically.
    unsafe { &*p.as_ptr().add(COUNT).cast::<AtomicU16>() }
}

/// Adds a reference to the block at `p`: to its count, or to [`OVERFLOW`]
/// when the count is at [`COUNT_LIMIT`].
///
/// # Safety
/// `p` is a block written by [`Contents::write`] that stays allocated for
/// the call (the caller holds a reference or the shard's lock).
#[inline]
unsafe fn add_reference(p: NonNull<u8>) {
    // SAFETY: as the caller promised.
    let word = unsafe { count(p) };
    if word.fetch_add(1, Ordering::Relaxed) < COUNT_LIMIT {
        return;
    }
    add_overflow(p, word);
}

#[cold]
#[inline(never)]
fn add_overflow(p: NonNull<u8>, word: &AtomicU16) {
    // Back to what it was (not the last reference: the caller's is one).
    word.fetch_sub(1, Ordering::Relaxed);
    let mut table = OVERFLOW.lock();
    if word.fetch_add(1, Ordering::Relaxed) < COUNT_LIMIT {
        return;
    }
    word.fetch_sub(1, Ordering::Relaxed);
    let extra = table
        .get_or_insert_with(HashMap::new)
        .entry(p.as_ptr() as usize)
        .or_insert(0);
    *extra += 1;
}

/// Gives up a reference to the block at `p`; true when it was the last
/// (the caller frees the block).
///
/// # Safety
/// The caller owns one of the block's references.
#[inline]
unsafe fn drop_reference(p: NonNull<u8>) -> bool {
    // SAFETY: the caller's reference keeps the block alive.
    let word = unsafe { count(p) };
    let old = word.fetch_sub(1, Ordering::Release);
    if old == 1 {
        fence(Ordering::Acquire);
        return true;
    }
    if old >= OVERFLOW_CHECK {
        drop_overflow(p, word);
    }
    false
}

/// A count this high may have handles in [`OVERFLOW`]: if so, one of them
/// is the one given up, and the count gets its one back.
#[cold]
#[inline(never)]
fn drop_overflow(p: NonNull<u8>, word: &AtomicU16) {
    let mut table = OVERFLOW.lock();
    let Some(table) = table.as_mut() else { return };
    let key = p.as_ptr() as usize;
    if let Some(extra) = table.get_mut(&key) {
        *extra -= 1;
        if *extra == 0 {
            table.remove(&key);
        }
        word.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        // SAFETY: this handle owns one reference.
        if !unsafe { drop_reference(self.0) } {
            return;
        }
        let p = self.0.as_ptr();
        if self.size_word() & HEAP_BLOCK != 0 {
            let layout = heap_layout(self.units());
            // SAFETY: a heap block was allocated with this layout (its size
            // never changes), and this was its last handle.
            unsafe { std::alloc::dealloc(p, layout) };
        } else {
            // SAFETY: an arena block whose count just reached zero: the
            // shard holds no reference (it would count), so this was the
            // last handle.
            unsafe { release_detached(p) };
        }
    }
}

fn heap_layout(units: u32) -> Layout {
    // Blocks are at most 2^28 units; 8-byte alignment keeps the header's
    // words aligned as they are in an arena.
    Layout::from_size_align(units as usize * UNIT, 8).unwrap_or(Layout::new::<u64>())
}

impl Item {
    /// Builds an item from a key, client flags and a value.
    pub fn new(key: &[u8], flags: u32, value: &[u8]) -> Item {
        Item::from_parts(key, flags, &[value])
    }

    /// Builds an item whose value is the concatenation of `parts`.
    ///
    /// # Panics
    /// If the key is longer than [`KEY_MAX`] bytes or the item larger than
    /// 1 GiB.
    pub fn from_parts(key: &[u8], flags: u32, parts: &[&[u8]]) -> Item {
        assert!(key.len() <= KEY_MAX, "key longer than {KEY_MAX} bytes");
        let c = Contents {
            key,
            flags,
            parts,
            links: false,
            deadline: false,
            wide_cas: false,
        };
        let units = c.units();
        assert!(units < 1 << 28, "item larger than 1 GiB");
        let layout = heap_layout(units);
        // SAFETY: the layout has a nonzero size (at least the header).
        let p = unsafe { std::alloc::alloc(layout) };
        let Some(p) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout);
        };
        // SAFETY: a fresh allocation of `units` units, ours alone.
        unsafe {
            p.as_ptr().cast::<u32>().write(units | HEAP_BLOCK);
            c.write(p.as_ptr(), units);
        }
        Item(p)
    }

    /// A handle on the block at `p`, taking over one reference the caller
    /// holds.
    ///
    /// # Safety
    /// `p` is a block written by [`Contents::write`], and the caller owns
    /// one of its references.
    pub(crate) unsafe fn from_raw(p: NonNull<u8>) -> Item {
        Item(p)
    }

    /// Writes the value of an item whose block was written by
    /// [`Contents::write_header`].
    ///
    /// # Safety
    /// This is the block's only handle and the block is not linked (nobody
    /// else reads it), and `value` has the length the contents had.
    pub(crate) unsafe fn fill_value(&self, value: &[u8]) {
        let (start, end) = self.value_range();
        debug_assert_eq!(end - start, value.len());
        let len = (end - start).min(value.len());
        // SAFETY: the value's bytes in the block, which nobody else reads
        // yet; the pointer is the block's own.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), self.0.as_ptr().add(start), len) };
    }

    /// Gives up the handle without dropping its reference: the block's
    /// address, whose reference the caller now owns.
    pub(crate) fn into_raw(self) -> NonNull<u8> {
        let p = self.0;
        std::mem::forget(self);
        p
    }

    #[cfg(test)]
    fn refcount(&self) -> &AtomicU16 {
        // SAFETY: this handle keeps the block alive.
        unsafe { count(self.0) }
    }

    fn marks(&self) -> u8 {
        // SAFETY: a byte of a live block's header.
        unsafe { &*self.0.as_ptr().add(MARKS).cast::<AtomicU8>() }.load(Ordering::Relaxed)
    }

    fn size_word(&self) -> u32 {
        // SAFETY: the first word of a live block.
        unsafe { &*self.0.as_ptr().cast::<AtomicU32>() }.load(Ordering::Relaxed)
    }

    fn units(&self) -> u32 {
        self.size_word() & SIZE_MASK
    }

    /// Whether the block has room for a deadline.
    pub(crate) fn has_deadline(&self) -> bool {
        self.marks() & HAS_DEADLINE != 0
    }

    /// Whether the block has room for a CAS unique of 8 bytes.
    pub(crate) fn has_wide_cas(&self) -> bool {
        self.size_word() & WIDE_CAS != 0
    }

    /// The key's length and the tail's.
    fn lengths(&self) -> (usize, usize) {
        // SAFETY: an immutable field of a live block, 2-aligned.
        let v = unsafe { self.0.as_ptr().add(KEY_LEN).cast::<u16>().read() };
        (
            usize::from(v & ((1 << KEY_BITS) - 1)),
            usize::from(v >> KEY_BITS),
        )
    }

    /// Where the flags (if any) and the key start.
    fn body(&self) -> (usize, bool) {
        let m = self.marks();
        (optional_fields(m, self.size_word()).2, m & HAS_FLAGS != 0)
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        let (at, flags) = self.body();
        let at = at + if flags { 4 } else { 0 };
        // SAFETY: the key's bytes, inside the block, immutable while this
        // handle lives (which the returned borrow cannot outlive).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(at), self.lengths().0) }
    }

    /// Where the value starts and ends in the block.
    fn value_range(&self) -> (usize, usize) {
        let (at, flags) = self.body();
        let (key_len, tail) = self.lengths();
        let start = at + if flags { 4 } else { 0 } + key_len;
        (start, self.units() as usize * UNIT - tail)
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        let (start, end) = self.value_range();
        // SAFETY: as in `key`: the bytes between the key and the tail.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(start), end - start) }
    }

    /// The client flags.
    pub fn flags(&self) -> u32 {
        let (at, flags) = self.body();
        if !flags {
            return 0;
        }
        // SAFETY: the four bytes after the header and links, immutable.
        u32::from_le_bytes(unsafe { self.0.as_ptr().add(at).cast::<[u8; 4]>().read_unaligned() })
    }

    /// The value as [`Bytes`] sharing this item's block (no copy).
    pub fn value_bytes(&self) -> Bytes {
        Bytes::from_owner(ValueOwner(self.clone()))
    }

    /// Bytes this item's block occupies.
    pub fn heap_size(&self) -> usize {
        self.units() as usize * UNIT
    }
}

struct ValueOwner(Item);

impl AsRef<[u8]> for ValueOwner {
    fn as_ref(&self) -> &[u8] {
        self.0.value()
    }
}

mod contents;
mod meta;

pub(crate) use contents::Contents;
pub(crate) use meta::{CasScheme, Meta};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_concatenated() {
        let it = Item::from_parts(b"key", 7, &[b"ab", b"", b"cde"]);
        assert_eq!(it.key(), b"key");
        assert_eq!(it.value(), b"abcde");
        assert_eq!(it.flags(), 7);
    }

    #[test]
    fn empty_value_and_key() {
        let it = Item::new(b"", 0, b"");
        assert_eq!(it.key(), b"");
        assert_eq!(it.value(), b"");
        assert_eq!(it.flags(), 0);
    }

    #[test]
    fn every_length_round_trips() {
        for klen in [0usize, 1, 3, 250, 1000] {
            for vlen in 0..40 {
                for flags in [0, 1, u32::MAX] {
                    let key = vec![b'k'; klen.min(KEY_MAX)];
                    let klen = key.len();
                    let value: Vec<u8> = (0..vlen as u8).collect();
                    let it = Item::new(&key, flags, &value);
                    assert_eq!(
                        (it.key(), it.value(), it.flags()),
                        (&key[..], &value[..], flags)
                    );
                    assert_eq!(it.heap_size() % UNIT, 0);
                    let flags_len = if flags != 0 { 4 } else { 0 };
                    assert!(it.heap_size() - (HEADER + flags_len + klen + vlen) < UNIT);
                }
            }
        }
    }

    #[test]
    fn value_bytes_outlive_the_item_handle() {
        let it = Item::new(b"k", 0, b"hello");
        let v = it.value_bytes();
        drop(it);
        assert_eq!(&v[..], b"hello");
    }

    #[test]
    fn clones_share_the_block() {
        let it = Item::new(b"k", 0, &[1u8; 1000]);
        let c = it.clone();
        assert_eq!(it.value().as_ptr(), c.value().as_ptr());
        drop(it);
        assert_eq!(c.value(), &[1u8; 1000][..]);
    }

    fn overflow_of(it: &Item) -> Option<u64> {
        let table = OVERFLOW.lock();
        table.as_ref()?.get(&(it.0.as_ptr() as usize)).copied()
    }

    #[test]
    fn handles_past_the_count_limit_share_the_block_and_leave_no_trace() {
        let it = Item::new(b"key", 9, b"value");
        let held: Vec<Item> = (0..COUNT_LIMIT + 1000).map(|_| it.clone()).collect();
        assert!(held
            .iter()
            .all(|h| h.value().as_ptr() == it.value().as_ptr()));
        assert_eq!(it.refcount().load(Ordering::Relaxed), COUNT_LIMIT);
        assert_eq!(overflow_of(&it), Some(1001));
        assert_eq!(
            (it.key(), it.flags(), it.value()),
            (&b"key"[..], 9, &b"value"[..])
        );
        drop(held);
        assert_eq!(it.refcount().load(Ordering::Relaxed), 1);
        assert_eq!(overflow_of(&it), None);
        assert_eq!(
            (it.key(), it.flags(), it.value()),
            (&b"key"[..], 9, &b"value"[..])
        );
    }

    #[test]
    fn threads_crossing_the_count_limit_keep_it_exact() {
        let it = Item::new(b"key", 1, b"value");
        // Just below the limit, so that every burst crosses it.
        let base: Vec<Item> = (0..COUNT_LIMIT - 3).map(|_| it.clone()).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..crate::testing::size(2000, 50) {
                        let burst: Vec<Item> = (0..8).map(|_| it.clone()).collect();
                        assert!(burst.iter().all(|b| b.value() == b"value"));
                    }
                });
            }
        });
        assert_eq!(it.refcount().load(Ordering::Relaxed), COUNT_LIMIT - 2);
        assert_eq!(overflow_of(&it), None);
        drop(base);
        assert_eq!(it.refcount().load(Ordering::Relaxed), 1);
        assert_eq!(it.key(), b"key");
    }

    #[test]
    fn handles_cross_threads() {
        let it = Item::new(b"k", 3, b"shared");
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let it = it.clone();
                std::thread::spawn(move || {
                    for _ in 0..crate::testing::size(1000, 100) {
                        let c = it.clone();
                        assert_eq!(c.value(), b"shared");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(it.refcount().load(Ordering::Relaxed), 1);
    }
}
