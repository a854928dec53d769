#![cfg(not(miri))] // files and a writer thread; the flash tier has no unsafe code
//! The flash tier under a store: values come back byte for byte through
//! page drops and compactions, damaged or short reads are misses, write
//! failures lose records rather than serve them, and commands see an entry
//! on flash as memcached sees one in extstore.

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

mod budget;
mod cached;
mod persist;
mod tags;
mod write_through;

use crate::{
    ArithOutcome, ArithRequest, Expiry, FlashConfig, SetMode, SetOutcome, SetRequest, Store,
    StoreConfig,
};

/// A file in the temporary directory, removed on drop.
pub(super) struct TempFile(pub(super) PathBuf);

impl TempFile {
    pub(super) fn new(tag: &str) -> TempFile {
        use std::sync::atomic::AtomicU32;
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Relaxed);
        let name = format!("kura-flash-{}-{tag}-{n}", std::process::id());
        TempFile(std::env::temp_dir().join(name))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) const PAGE: u64 = 256 << 10;

/// A store of 1 MiB of RAM in two shards, with a tier of `pages` pages of
/// 256 KiB in `file`, 32 KiB write buffers, values of 256 bytes and more.
pub(super) fn store(
    file: &TempFile,
    pages: u64,
    tune: impl FnOnce(&mut FlashConfig),
) -> Arc<Store> {
    let store = Arc::new(Store::new(StoreConfig {
        capacity: 1 << 20,
        shards: 2,
        ..Default::default()
    }));
    let mut config = FlashConfig {
        files: vec![(file.0.clone(), pages * PAGE)],
        page_size: PAGE,
        wbuf_size: 32 << 10,
        item_size: 256,
        // Tests check every value comes back: none dropped because the
        // writer thread was slow to run on a loaded machine.
        write_queue: 1 << 16,
        ..Default::default()
    };
    tune(&mut config);
    store.attach_flash(config).expect("the tier opens");
    store
}

pub(super) fn key(i: usize) -> Vec<u8> {
    format!("key:{i:06}").into_bytes()
}

/// A value of 300..2,300 bytes that only key `i`, version `v` has.
pub(super) fn value(i: usize, v: u32) -> Vec<u8> {
    kura_testkit::values::versioned(i, v, 300..2300)
}

pub(super) fn fill(store: &Store, n: usize, v: u32) {
    for i in 0..n {
        assert!(matches!(
            store.insert(&key(i), &value(i, v), Expiry::Never),
            SetOutcome::Stored { .. }
        ));
    }
}

/// Reads every key: each is a miss or exactly its value; the hits.
pub(super) fn check(store: &Store, n: usize, v: u32) -> usize {
    let mut hits = 0;
    for i in 0..n {
        if let Some(item) = store.get(&key(i)) {
            assert_eq!(item.value(), &value(i, v)[..], "key {i}");
            hits += 1;
        }
    }
    hits
}

#[test]
fn evicted_values_come_back_from_flash_byte_for_byte() {
    let f = TempFile::new("roundtrip");
    let s = store(&f, 32, |_| {});
    let n = 3_000; // about 4 MiB of values: four times the RAM
    fill(&s, n, 1);
    let ram = s.len();
    s.flash_sync();
    let st = s.flash_stats().expect("a tier");
    assert!(st.objects_written > 0 && st.bytes_written > 0);
    assert_eq!(st.page_evictions, 0, "8 MiB of flash holds it all");
    let hits = check(&s, n, 1);
    assert_eq!(hits, n, "RAM held {ram}; flash the rest");
    let st = s.flash_stats().expect("a tier");
    assert!(st.get_extstore >= (n - ram) as u64, "{st:?}");
    assert!(st.objects_read >= (n - ram) as u64);
    assert_eq!(st.miss_from_extstore, 0);
}

#[test]
fn a_full_device_drops_its_oldest_pages_and_their_values_miss() {
    let f = TempFile::new("full");
    let s = store(&f, 4, |_| {});
    let n = 4_000;
    fill(&s, n, 1);
    s.flash_sync();
    s.flash_maintain();
    let st = s.flash_stats().expect("a tier");
    assert!(st.page_evictions > 0 && st.objects_evicted > 0, "{st:?}");
    let hits = check(&s, n, 1);
    assert!(hits < n && hits > s.len(), "hits {hits}, RAM {}", s.len());
    // The oldest keys went with the oldest pages.
    assert!(s.get(&key(0)).is_none());
    assert!(s.flash_stats().expect("a tier").index_bytes > 0);
}

#[test]
fn compaction_keeps_live_values_and_frees_pages() {
    let f = TempFile::new("compact");
    let s = store(&f, 16, |c| c.compact_under = 8);
    let n = 3_000;
    fill(&s, n, 1);
    // Delete two keys in three: pages left mostly dead.
    for i in (0..n).filter(|i| i % 3 != 0) {
        s.delete(&key(i));
    }
    s.flash_sync();
    s.flash_maintain();
    let st = s.flash_stats().expect("a tier");
    assert!(st.compact_rescues > 0 && st.page_reclaims > 0, "{st:?}");
    assert_eq!(st.compact_lost, 0, "{st:?}");
    for i in 0..n {
        let got = s.get(&key(i));
        if i % 3 != 0 {
            assert!(got.is_none(), "deleted key {i} came back");
        } else {
            let Some(got) = got else {
                panic!("kept key {i} missing: {:?}", s.flash_stats())
            };
            assert_eq!(got.value(), &value(i, 1)[..], "key {i}");
        }
    }
    assert_eq!(s.flash_stats().expect("a tier").miss_from_extstore, 0);
}

#[test]
fn drop_unread_drops_records_never_read_when_compacting_under_pressure() {
    let f = TempFile::new("unread");
    let s = store(&f, 16, |c| {
        c.compact_under = 15;
        c.drop_under = 15;
        c.drop_unread = true;
    });
    fill(&s, 3_000, 1);
    s.flash_sync();
    s.flash_maintain();
    let st = s.flash_stats().expect("a tier");
    assert!(st.compact_skipped > 0 && st.compact_rescues == 0, "{st:?}");
    assert!(check(&s, 3_000, 1) < 3_000);
}

#[test]
fn short_and_damaged_reads_are_misses_never_other_bytes() {
    let f = TempFile::new("faults");
    let s = store(&f, 32, |_| {});
    fill(&s, 3_000, 1);
    s.flash_sync();
    let faults = s.flash_faults().expect("a tier");
    let on_flash: Vec<usize> = (0..3_000)
        .filter(|&i| !s.contains(&key(i)))
        .take(4)
        .collect();
    assert_eq!(on_flash.len(), 4);
    faults.short_reads.store(1, Relaxed);
    assert!(s.get(&key(on_flash[0])).is_none());
    faults.corrupt_reads.store(1, Relaxed);
    assert!(s.get(&key(on_flash[1])).is_none());
    let st = s.flash_stats().expect("a tier");
    assert_eq!((st.miss_from_extstore, st.badcrc_from_extstore), (2, 1));
    // A miss forgets the record: the key is gone, not retried.
    assert!(s.get(&key(on_flash[0])).is_none());
    assert_eq!(
        s.get(&key(on_flash[2])).expect("intact").value(),
        &value(on_flash[2], 1)[..]
    );
}

#[test]
fn failed_writes_lose_their_records_and_are_counted() {
    let f = TempFile::new("wfail");
    let s = store(&f, 32, |_| {});
    s.flash_faults()
        .expect("a tier")
        .fail_writes
        .store(true, Relaxed);
    fill(&s, 3_000, 1);
    s.flash_sync();
    s.flash_maintain();
    let st = s.flash_stats().expect("a tier");
    assert!(st.write_errors > 0, "{st:?}");
    // What is not in RAM is a miss, or comes from a buffer not yet
    // written: never wrong bytes.
    let hits = check(&s, 3_000, 1);
    assert!(hits < 3_000);
    s.flash_faults()
        .expect("a tier")
        .fail_writes
        .store(false, Relaxed);
    fill(&s, 3_000, 2);
    s.flash_sync();
    assert_eq!(check(&s, 3_000, 2), 3_000, "the tier works again");
}

#[test]
fn commands_see_entries_on_flash() {
    let f = TempFile::new("commands");
    let s = store(&f, 32, |_| {});
    fill(&s, 3_000, 1);
    s.flash_sync();
    let mut cold = (0..3_000).filter(|&i| !s.contains(&key(i)));
    let mut next = || cold.next().expect("a key on flash");
    // add fails, replace and append work on the value on flash.
    let k = key(next());
    let add = SetRequest {
        mode: SetMode::Add,
        ..SetRequest::new(&k, b"new")
    };
    assert_eq!(s.set(&add), SetOutcome::NotStored);
    let k = next();
    let appended = key(k);
    let append = SetRequest {
        mode: SetMode::Append,
        ..SetRequest::new(&appended, b"+tail")
    };
    assert!(matches!(s.set(&append), SetOutcome::Stored { .. }));
    let mut want = value(k, 1);
    want.extend_from_slice(b"+tail");
    assert_eq!(s.get(&key(k)).expect("appended").value(), &want[..]);
    // delete finds it; touch finds it.
    let k = next();
    assert!(s.delete(&key(k)));
    assert!(s.get(&key(k)).is_none());
    let k = next();
    assert!(s.touch(&key(k), Expiry::In(100)));
    // A plain set replaces it, and the old value never comes back.
    let k = next();
    s.insert(&key(k), b"short", Expiry::Never);
    assert_eq!(s.get(&key(k)).expect("set").value(), b"short");
    // incr on a value on flash: not a number.
    let k = next();
    let incr = ArithRequest::new(true, 1);
    assert_eq!(s.arith(&key(k), &incr), ArithOutcome::NonNumeric);
    // flush_all forgets everything on flash.
    s.flush(None);
    assert_eq!(check(&s, 3_000, 1), 0);
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.objects_used, 0, "{st:?}");
}

#[test]
fn repeated_hits_bring_a_value_back_into_ram() {
    let f = TempFile::new("recache");
    let s = store(&f, 32, |c| c.recache_rate = 1);
    fill(&s, 3_000, 1);
    s.flash_sync();
    let k = (0..3_000)
        .find(|&i| !s.contains(&key(i)))
        .expect("one on flash");
    assert_eq!(s.get(&key(k)).expect("hit").value(), &value(k, 1)[..]);
    assert!(!s.contains(&key(k)), "one hit leaves it on flash");
    assert_eq!(s.get(&key(k)).expect("hit").value(), &value(k, 1)[..]);
    assert!(s.contains(&key(k)), "the second hit brings it back");
    assert_eq!(s.flash_stats().expect("a tier").recache_from_extstore, 1);
}

#[test]
fn a_restarted_tier_starts_empty() {
    let f = TempFile::new("restart");
    {
        let s = store(&f, 32, |_| {});
        fill(&s, 3_000, 1);
        s.flash_sync();
    }
    let s = store(&f, 32, |_| {});
    assert_eq!(check(&s, 3_000, 1), 0);
    let bytes = std::fs::read(&f.0).expect("the file");
    assert_eq!(bytes.len() as u64, 32 * PAGE);
    assert!(
        bytes.iter().all(|&b| b == 0),
        "nothing of the last run is left"
    );
}

#[test]
fn a_tier_is_refused_on_a_store_that_holds_entries_or_has_one() {
    let f = TempFile::new("refuse");
    let s = store(&f, 4, |_| {});
    let again = FlashConfig {
        files: vec![(f.0.clone(), 4 * PAGE)],
        page_size: PAGE,
        ..Default::default()
    };
    assert!(s.attach_flash(again.clone()).is_err());
    let t = TempFile::new("small");
    let small = FlashConfig {
        files: vec![(t.0.clone(), PAGE - 1)],
        page_size: PAGE,
        wbuf_size: 4096,
        ..Default::default()
    };
    let fresh = Arc::new(Store::new(StoreConfig::with_capacity(1 << 20)));
    let e = fresh.attach_flash(small).expect_err("less than a page");
    assert!(e.to_string().contains("less than one page"), "{e}");
}

#[test]
fn concurrent_writers_never_read_another_version_through_compactions() {
    let f = TempFile::new("threads");
    let s = store(&f, 12, |c| c.compact_under = 6);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                // Each thread owns its keys and knows their last version.
                let keys: Vec<usize> = (t * 1_000..(t + 1) * 1_000).collect();
                let mut version = vec![0u32; keys.len()];
                for round in 1..=3u32 {
                    for (n, &i) in keys.iter().enumerate() {
                        if (i + round as usize).is_multiple_of(4) {
                            s.delete(&key(i));
                            version[n] = 0;
                        } else {
                            s.insert(&key(i), &value(i, round), Expiry::Never);
                            version[n] = round;
                        }
                    }
                    for (n, &i) in keys.iter().enumerate() {
                        match (s.get(&key(i)), version[n]) {
                            (Some(item), 0) => {
                                panic!("deleted key {i} read {} bytes", item.value().len())
                            }
                            (Some(item), v) => {
                                assert_eq!(item.value(), &value(i, v)[..], "key {i}")
                            }
                            (None, _) => {}
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a writer");
    }
    let st = s.flash_stats().expect("a tier");
    assert!(
        st.objects_read > 0 && st.page_evictions + st.page_reclaims > 0,
        "{st:?}"
    );
}

#[test]
fn entries_idle_longer_than_item_age_move_to_flash_before_ram_is_full() {
    let moved = |item_age: Option<u32>| {
        let f = TempFile::new("item-age");
        let s = store(&f, 8, |c| c.item_age = item_age);
        let n = 200; // about 260 KiB of values: RAM holds them all
        fill(&s, n, 1);
        s.clock().advance(30);
        // Read at 30 s: idle 40 s at 70 s; the rest, written at 0, 70 s.
        assert_eq!(check(&s, n / 2, 1), n / 2);
        s.clock().advance(40);
        // Bounded: 64 rounds walk 64 Ki index positions of each shard.
        for _ in 0..64 {
            s.flash_maintain();
        }
        s.flash_sync();
        let on_flash =
            |keys: std::ops::Range<usize>| keys.filter(|&i| s.on_flash_only(&key(i))).count();
        let moved = (on_flash(0..n / 2), on_flash(n / 2..n));
        assert_eq!(check(&s, n, 1), n, "every value still there");
        moved
    };
    // Values under 256 bytes stay in RAM: none here.
    assert_eq!(moved(Some(60)), (0, 100), "only those idle > 60 s move");
    assert_eq!(moved(None), (0, 0), "memcached's default: no age limit");
}
