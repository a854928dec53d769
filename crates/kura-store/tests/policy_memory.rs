//! What S3-FIFO holds outside the entries (its ghost queue and its small
//! queue's ring of ids) is charged to every entry at a fixed rate
//! (`EvictionKind::entry_bytes`), so that the entries a full cache holds do
//! not change as the ghost fills after the cache does. Checked here with a
//! counting allocator (the entries and indexes are in mappings of their
//! own, not on the heap): the heap the store takes is what it reports as
//! `policy_bytes`, and in a full cache whose entries are read it is within
//! the rate charged. In one whose entries are never read, the small queue is
//! the whole cache and the ring holds an id for every entry (S3-FIFO's
//! arrival order kept): more than charged, by a bound checked here too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;

use kura_store::{EvictionKind, Expiry, Store, StoreConfig};

/// The system allocator, counting the bytes allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator with the same
// arguments; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract, passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The tests measure the whole heap: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const CAPACITY: usize = 16 << 20;
const KEYS: u32 = 400_000;

/// Fills a full S3-FIFO store with KEYS 100-byte items (reading every
/// `read_every`-th twice as it goes, if not 0), then returns the heap it
/// took (checked against what it reports) and its stats.
fn fill(read_every: u32) -> (u64, kura_store::StoreStats) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let store = Store::new(StoreConfig {
        eviction: EvictionKind::S3Fifo,
        ..StoreConfig::with_capacity(CAPACITY)
    });
    let before = LIVE.load(Ordering::Relaxed);
    let value = [b'v'; 100];
    for i in 0..KEYS {
        let key = format!("key:{i:08}");
        store.insert(key.as_bytes(), &value, Expiry::Never);
        if read_every != 0 && i % read_every == 0 {
            store.get(key.as_bytes());
            store.get(key.as_bytes());
        }
    }
    let heap = (LIVE.load(Ordering::Relaxed) - before) as u64;
    let st = store.stats();
    assert!(
        st.evictions > KEYS as u64 / 2,
        "the store hardly filled: {st:?}"
    );
    // The heap the store took is the policy's, to a few kilobytes (the
    // shards' own small allocations).
    assert!(
        heap.abs_diff(st.policy_bytes) <= 64 << 10,
        "heap grew {heap} bytes, the policy reports {}",
        st.policy_bytes
    );
    (heap, st)
}

#[test]
fn a_full_cache_with_reads_holds_what_its_entries_are_charged() {
    let (heap, st) = fill(3);
    let charged = st.curr_items * EvictionKind::S3Fifo.entry_bytes() as u64;
    // The ghost holds about 1.4 fingerprints an entry by now, at 4.6 to
    // 6.4 bytes each.
    assert!(heap >= st.curr_items * 6, "{heap} bytes for {st:?}");
    assert!(heap <= charged, "{heap} bytes, {charged} charged: {st:?}");
}

#[test]
fn a_full_cache_nobody_reads_holds_a_ring_id_for_every_entry() {
    let (heap, st) = fill(0);
    let charged = st.curr_items * EvictionKind::S3Fifo.entry_bytes() as u64;
    // Ids of 4 bytes for every entry, where the charge counts them for a
    // tenth: 13.5 bytes an entry in all against 11 charged (with ids of 8
    // bytes and a ghost of a queue and a set, 21.7 against 17).
    assert!(heap > charged, "{heap} bytes for {st:?}");
    assert!(
        heap <= charged + st.curr_items * 4,
        "{heap} bytes for {st:?}"
    );
}
