//! A persistent tier (`FlashConfig::persist`) across restarts: what was on
//! flash at a clean stop comes back byte for byte, what a crash left (the
//! file as the page cache held it) comes back up to the torn write, deleted
//! and replaced keys never come back, a damaged record is a miss, and the
//! scan at start reads each page a bounded number of times. Also the
//! non-blocking get (`Store::get_or_read`).

use super::{check, fill, key, store, value, TempFile, PAGE};
use crate::{Expiry, Got, SetOutcome, Store};

const WBUF: u64 = 32 << 10;

fn persist(file: &TempFile, pages: u64) -> std::sync::Arc<Store> {
    store(file, pages, |c| c.persist = true)
}

/// Keys whose value is on flash now (RAM misses them).
fn on_flash(s: &Store, n: usize) -> Vec<usize> {
    (0..n).filter(|&i| !s.contains(&key(i))).collect()
}

#[test]
fn a_clean_stop_keeps_every_value_on_flash_byte_for_byte() {
    let f = TempFile::new("persist-clean");
    let n = 3_000;
    let (flashed, used) = {
        let s = persist(&f, 32);
        fill(&s, n, 1);
        let used = s.flash_stats().expect("a tier").objects_used;
        (on_flash(&s, n), used)
        // Dropped without `flash_sync`: the open buffer is written on drop.
    };
    assert!(flashed.len() > n / 2, "most of it went to flash");
    assert_eq!(flashed.len() as u64, used);
    let s = persist(&f, 32);
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.rebuild_records, used, "{st:?}");
    assert_eq!(st.rebuild_damaged, 0);
    for &i in &flashed {
        let item = s.get(&key(i)).unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
    }
    // New values go on after the old pages, which stay readable.
    fill(&s, n, 2);
    assert!(check(&s, n, 2) > n / 2);
}

#[test]
fn a_crash_keeps_what_was_written_and_cuts_the_torn_write() {
    let f = TempFile::new("persist-crash");
    let copy = TempFile::new("persist-crash-copy");
    let n = 3_000;
    let s = persist(&f, 32);
    fill(&s, n, 1);
    s.flash_sync();
    let written = on_flash(&s, n);
    // What a SIGKILL leaves: the file as the page cache holds it now,
    // while the store still runs (and keeps its open buffer to itself).
    for i in n..n + 200 {
        s.insert(&key(i), &value(i, 1), Expiry::Never);
    }
    let mut bytes = std::fs::read(&f.0).expect("the file");
    // A write cut short: the last written bytes of the newest page zeroed.
    let torn = last_record_of_newest_page(&bytes);
    let (at, len) = torn;
    bytes[at + len / 2..at + len].fill(0);
    std::fs::write(&copy.0, &bytes).expect("the copy");
    drop(s);
    let s = persist(&copy, 32);
    let st = s.flash_stats().expect("a tier");
    assert!(st.rebuild_damaged >= 1, "the torn record was found: {st:?}");
    let mut back = 0;
    for i in 0..n + 200 {
        if let Some(item) = s.get(&key(i)) {
            assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
            back += 1;
        }
    }
    // Everything written before the copy but the torn record.
    assert!(back + 1 >= written.len(), "{back} of {}", written.len());
}

/// (offset, length) in the file of the last record of the page with the
/// newest marker.
fn last_record_of_newest_page(bytes: &[u8]) -> (usize, usize) {
    use crate::flash::record;
    let pages = bytes.len() / PAGE as usize;
    let newest = (0..pages)
        .filter_map(|p| {
            let at = p * PAGE as usize;
            record::mark_at(&bytes[at..at + record::HEADER]).map(|g| (g, p))
        })
        .max()
        .expect("a page in use");
    let base = newest.1 * PAGE as usize;
    let mut at = base;
    let mut last = (base, record::HEADER);
    while let Some(len) = record::len_at(&bytes[at..base + PAGE as usize]) {
        if record::decode(&bytes[at..at + len], newest.0).is_err() {
            break;
        }
        last = (at, len);
        at += len;
    }
    last
}

#[test]
fn deleted_and_replaced_keys_never_come_back_after_a_restart() {
    let f = TempFile::new("persist-dead");
    let n = 3_000;
    let gone: Vec<usize>;
    let replaced: Vec<usize>;
    {
        let s = persist(&f, 32);
        fill(&s, n, 1);
        let flashed = on_flash(&s, n);
        // Some deleted while still in a write buffer, some once written.
        let half = flashed.len() / 2;
        let early: Vec<usize> = flashed[half..].iter().step_by(7).copied().collect();
        for &i in &early {
            assert!(s.delete(&key(i)));
        }
        s.flash_sync();
        let late: Vec<usize> = flashed[..half].iter().step_by(7).copied().collect();
        for &i in &late {
            assert!(s.delete(&key(i)));
        }
        gone = early.into_iter().chain(late).collect();
        replaced = flashed.iter().skip(3).step_by(7).copied().collect();
        for &i in &replaced {
            let stored = s.insert(&key(i), &value(i, 2), Expiry::Never);
            assert!(matches!(stored, SetOutcome::Stored { .. }));
        }
    }
    let s = persist(&f, 32);
    for &i in &gone {
        assert!(s.get(&key(i)).is_none(), "deleted key {i} came back");
    }
    for &i in &replaced {
        if let Some(item) = s.get(&key(i)) {
            assert_eq!(item.value(), &value(i, 2)[..], "old version of {i}");
        }
    }
}

#[test]
fn a_flipped_byte_on_disk_is_a_miss_and_the_rest_comes_back() {
    let f = TempFile::new("persist-flip");
    let n = 3_000;
    let flashed = {
        let s = persist(&f, 32);
        fill(&s, n, 1);
        on_flash(&s, n)
    };
    let victim = flashed[flashed.len() / 3];
    let mut bytes = std::fs::read(&f.0).expect("the file");
    let name = key(victim);
    let at = bytes
        .windows(name.len())
        .position(|w| w == &name[..])
        .expect("the key's record");
    bytes[at + name.len() + 40] ^= 0x01;
    std::fs::write(&f.0, &bytes).expect("written back");
    let s = persist(&f, 32);
    assert_eq!(s.flash_stats().expect("a tier").rebuild_damaged, 1);
    assert!(s.get(&name).is_none(), "a damaged record is a miss");
    for &i in flashed.iter().filter(|&&i| i != victim) {
        let item = s.get(&key(i)).unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
    }
}

#[test]
fn the_start_scan_reads_each_page_a_bounded_number_of_times() {
    let f = TempFile::new("persist-bound");
    let pages = 64;
    let used = {
        let s = persist(&f, pages);
        // Eight times the flash: every page in use, the oldest dropped.
        fill(&s, 16_000, 1);
        s.flash_sync();
        let st = s.flash_stats().expect("a tier");
        assert!(st.page_evictions > 0, "{st:?}");
        st.objects_used
    };
    let s = persist(&f, pages);
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.rebuild_records, used);
    // Each chunk of a write buffer read once, plus one read again where a
    // record straddles two chunks.
    let bound = pages * 2 * PAGE.div_ceil(WBUF);
    assert!(st.rebuild_reads <= bound, "{} > {bound}", st.rebuild_reads);
}

#[test]
fn keys_of_dropped_pages_stay_gone_after_a_restart() {
    let f = TempFile::new("persist-dropped");
    let n = 16_000;
    let before: Vec<bool> = {
        let s = persist(&f, 8);
        fill(&s, n, 1);
        s.flash_sync();
        (0..n).map(|i| s.get(&key(i)).is_some()).collect()
    };
    assert!(before.iter().any(|&b| !b), "pages were dropped");
    let s = persist(&f, 8);
    for (i, was) in before.iter().enumerate() {
        let now = s.get(&key(i));
        if let Some(item) = &now {
            assert!(*was, "key {i} missed before the stop and came back");
            assert_eq!(item.value(), &value(i, 1)[..]);
        }
    }
}

#[test]
fn get_or_read_answers_ram_at_once_and_flash_from_a_reader_thread() {
    let f = TempFile::new("nonblocking");
    let s = store(&f, 32, |c| c.threads = 2);
    let n = 3_000;
    fill(&s, n, 1);
    s.flash_sync();
    let flashed = on_flash(&s, n);
    // A cold device: no read answered from the page cache on this thread.
    let faults = s.flash_faults().expect("a tier");
    faults
        .uncached
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let in_ram = (0..n).find(|&i| s.contains(&key(i))).expect("a key in RAM");
    assert!(
        matches!(s.get_or_read(&key(in_ram)), Got::Hit(h) if h.item.value() == &value(in_ram, 1)[..])
    );
    let before = s.flash_stats().expect("a tier").get_extstore;
    assert!(matches!(s.get_or_read(b"never-stored"), Got::Miss));
    assert_eq!(s.flash_stats().expect("a tier").get_extstore, before);
    let reads: Vec<_> = flashed
        .iter()
        .take(200)
        .map(|&i| match s.get_or_read(&key(i)) {
            Got::Flash(read) => (i, read),
            other => panic!("key {i}: {other:?}"),
        })
        .collect();
    for (i, read) in reads {
        let hit = read.wait().unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(hit.item.value(), &value(i, 1)[..], "key {i}");
    }
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.get_extstore, before + 200);
    assert_eq!(st.read_queue_full, 0);
}

#[test]
fn flush_after_writes_a_buffer_that_is_not_filling_and_recache_after_one_read() {
    let f = TempFile::new("flush-after");
    let s = store(&f, 32, |c| {
        c.flush_after = Some(std::time::Duration::from_millis(50));
        c.recache_after = 1;
        c.recache_rate = 1;
        c.persist = true;
    });
    let n = 3_000;
    fill(&s, n, 1);
    let flashed = on_flash(&s, n);
    let faults = s.flash_faults().expect("a tier");
    faults
        .uncached
        .store(true, std::sync::atomic::Ordering::Relaxed);
    // No flush_sync: the writer hands the open buffer over by itself.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.flash_stats().expect("a tier").bytes_buffered > 0 {
        assert!(std::time::Instant::now() < deadline, "never written");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let i = *flashed.last().expect("a key on flash");
    let hit = match s.get_or_read(&key(i)) {
        Got::Flash(read) => read.wait().expect("read back"),
        other => panic!("key {i}: {other:?}"),
    };
    assert_eq!(hit.item.value(), &value(i, 1)[..]);
    // Read once: back in RAM.
    assert!(s.contains(&key(i)));
    assert_eq!(s.flash_stats().expect("a tier").recache_from_extstore, 1);
    drop(s);
    // What the writer wrote is there for the next store.
    let s = persist(&f, 32);
    let back = flashed
        .iter()
        .filter(|&&k| k != i)
        .all(|&k| s.get(&key(k)).is_some());
    assert!(back, "records written by flush_after read back");
}

#[test]
fn a_spill_at_a_stop_brings_ram_back_after_the_restart() {
    let f = TempFile::new("spill-all");
    let n = 3_000;
    let kept;
    {
        // Few write buffers may wait: the spill waits for the writer rather than drop.
        let s = store(&f, 32, |c| {
            c.persist = true;
            c.write_queue = 1;
        });
        fill(&s, n, 1);
        let in_ram = n - on_flash(&s, n).len();
        assert!(in_ram > 100, "RAM holds part of them: {in_ram}");
        let dropped = s.flash_stats().expect("a tier").writes_dropped;
        assert_eq!(s.flash_spill_all(), in_ram);
        assert_eq!(on_flash(&s, n).len(), n, "all moved to flash");
        assert_eq!(s.flash_stats().expect("a tier").writes_dropped, dropped);
        // Still usable, from flash: all but what the fill dropped (one buffer waiting).
        assert_eq!(check(&s, n, 1), n - dropped as usize);
        kept = n - dropped as usize;
    }
    let s = persist(&f, 32);
    assert_eq!(
        s.flash_stats().expect("a tier").rebuild_records as usize,
        kept
    );
    assert_eq!(check(&s, n, 1), kept);
}

#[test]
fn a_spill_at_a_stop_writes_the_coldest_first_so_the_hottest_stay() {
    let f = TempFile::new("spill-coldest");
    // 500 values (about 650 KB) in RAM, a tier of two pages (512 KiB): the spill drops its
    // first page to write the last; what was written first is lost.
    let n = 500;
    let hot: Vec<usize> = (0..n).step_by(3).collect();
    {
        let s = store(&f, 2, |c| {
            c.persist = true;
            c.write_queue = 1;
        });
        fill(&s, n, 1);
        assert!(on_flash(&s, n).is_empty(), "all in RAM");
        // A third read later: the hottest, spread over every shard and place.
        s.clock().advance(10);
        for &i in &hot {
            assert!(s.get(&key(i)).is_some());
        }
        assert_eq!(s.flash_spill_all(), n);
        assert!(
            s.flash_stats().expect("a tier").page_evictions > 0,
            "not all fit"
        );
    }
    let s = persist(&f, 2);
    let back = check(&s, n, 1);
    assert!(back < n, "the tier kept only part: {back}");
    for &i in &hot {
        assert!(s.get(&key(i)).is_some(), "hot key {i} lost ({back} back)");
    }
}

/// A read under way when its record is marked dead in place (a concurrent read brought the
/// value back into RAM, or the key was deleted) is a miss counted as gone, not as damage.
#[test]
fn a_record_marked_dead_during_its_read_is_gone_not_damaged() {
    use std::sync::atomic::Ordering;
    let f = TempFile::new("dead-during-read");
    let s = persist(&f, 32);
    let n = 3_000;
    fill(&s, n, 1);
    s.flash_sync();
    let i = *on_flash(&s, n).first().expect("a key on flash");
    let faults = s.flash_faults().expect("a tier");
    faults.hold_reads.store(true, Ordering::Release);
    let Got::Flash(read) = s.get_or_read(&key(i)) else {
        panic!("key {i} is on flash");
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while faults.reads_held.load(Ordering::Acquire) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the read never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Deleted while the read waits on the device: its record gets the dead mark there.
    assert!(s.delete(&key(i)));
    faults.hold_reads.store(false, Ordering::Release);
    assert!(read.wait().is_none(), "a deleted key's read is a miss");
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.badcrc_from_extstore, 0, "not counted as damage: {st:?}");
}
