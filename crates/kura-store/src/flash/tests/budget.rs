//! The flash map's bytes count against the store's memory limit (`-m`),
//! as memcached counts its flash items' headers: RAM entries go to flash
//! to make room for it, and past half the limit the map forgets its least
//! recently accessed records instead of growing.

use super::{check, key, store, TempFile, PAGE};
use crate::{Expiry, SetOutcome};

/// Values of 256..320 bytes: small records, so that many fit the flash and
/// their map outgrows a 1 MiB store.
fn small(i: usize) -> Vec<u8> {
    let len = 256 + i % 64;
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

#[test]
fn the_flash_map_is_charged_to_the_memory_limit() {
    let file = TempFile::new("budget");
    // 32 MiB of flash: about 100,000 records of ~330 bytes, whose map
    // (24-byte slots) would take more than the 1 MiB store.
    let s = store(&file, (32 << 20) / PAGE, |_| {});
    let limit = s.capacity() as u64;
    let n = 120_000;
    for i in 0..n {
        let stored = s.insert(&key(i), &small(i), Expiry::Never);
        assert!(matches!(stored, SetOutcome::Stored { .. }), "set {i}");
        if i % 5_000 == 4_999 {
            let (st, f) = (s.stats(), s.flash_stats().expect("a tier"));
            // Every set made room for its entry and the map as they were.
            assert!(
                st.bytes + f.index_bytes <= limit,
                "set {i}: entries {} + flash map {} > limit {limit}",
                st.bytes,
                f.index_bytes
            );
            assert!(f.index_bytes <= limit / 2, "set {i}: map {}", f.index_bytes);
        }
    }
    s.flash_sync();
    let f = s.flash_stats().expect("a tier");
    // The map reached its bound: records were forgotten, counted as
    // evicted from flash (with those of the pages dropped for room).
    let per_page = f
        .objects_evicted
        .saturating_sub(f.page_evictions * PAGE / 256);
    assert!(per_page > 0, "{f:?}");
    assert!(f.index_bytes > limit / 4, "the map took its share: {f:?}");
    // What is held is each key's own value.
    let mut hits = 0;
    for i in 0..n {
        if let Some(item) = s.get(&key(i)) {
            assert_eq!(item.value(), &small(i)[..], "key {i}");
            hits += 1;
        }
    }
    // Far more than RAM alone (about 3,000 entries of this size).
    assert!(hits > 10_000, "{hits} held");
    let _ = check;
}
