//! A record whose bytes the system has in its page cache is read on the
//! caller's thread, without the reader threads (`Store::read_now`,
//! `preadv2(RWF_NOWAIT)`): the same bytes, counted as any read from flash;
//! a read that would wait on the device changes nothing and is left to a
//! reader thread.

use std::sync::atomic::Ordering::Relaxed;

use super::{check, fill, key, store, value, TempFile};

#[test]
fn records_in_the_page_cache_are_read_here_and_the_others_left_for_a_reader() {
    let f = TempFile::new("cached");
    let s = store(&f, 32, |_| {});
    let n = 3_000;
    fill(&s, n, 1);
    s.flash_sync();
    let on_flash: Vec<usize> = (0..n).filter(|&i| s.on_flash_only(&key(i))).collect();
    assert!(on_flash.len() > 1_000, "{} on flash", on_flash.len());
    let before = s.flash_stats().expect("a tier");
    // Just written: in the page cache (a file system that cannot say so
    // answers every read "would wait", which the next part covers).
    let faults = s.flash_faults().expect("a tier");
    let mut here = 0;
    for &i in &on_flash {
        match s.read_now(&key(i), false) {
            Some(Some(hit)) => {
                assert_eq!(hit.item.value(), &value(i, 1)[..], "key {i}");
                here += 1;
            }
            Some(None) => panic!("key {i} is on flash: not a miss"),
            None => {}
        }
    }
    let after = s.flash_stats().expect("a tier");
    assert_eq!(after.get_extstore - before.get_extstore, here as u64);
    assert_eq!(after.miss_from_extstore, before.miss_from_extstore);
    eprintln!("{here} of {} read from the page cache", on_flash.len());
    // A device that would make the read wait (held, as a slow device):
    // nothing read here, nothing counted, the record still on flash.
    faults.hold_reads.store(true, Relaxed);
    let i = on_flash[0];
    assert!(s.read_now(&key(i), false).is_none());
    assert!(s.read_now(&key(i), true).is_none());
    assert!(s.on_flash_only(&key(i)), "left on flash");
    assert_eq!(
        s.flash_stats().expect("a tier").get_extstore,
        after.get_extstore
    );
    faults.hold_reads.store(false, Relaxed);
    // For a change: back in RAM.
    assert!(matches!(s.read_now(&key(i), true), Some(Some(_)) | None));
    assert_eq!(check(&s, n, 1), n, "every value, byte for byte");
}

#[cfg(target_os = "linux")]
#[test]
fn on_linux_a_record_just_written_is_read_from_the_page_cache() {
    let f = TempFile::new("cached-linux");
    let s = store(&f, 32, |_| {});
    fill(&s, 3_000, 1);
    s.flash_sync();
    let i = (0..3_000)
        .find(|&i| s.on_flash_only(&key(i)))
        .expect("a key on flash");
    // ext4, xfs, btrfs and tmpfs answer RWF_NOWAIT reads from the cache.
    match s.read_now(&key(i), false) {
        Some(Some(hit)) => assert_eq!(hit.item.value(), &value(i, 1)[..]),
        other => panic!("a record just written: {other:?}"),
    }
}
