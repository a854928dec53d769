//! A tier that writes through (`FlashConfig::write_through`, kura http's
//! `disk_cache_all`): every value stored is on flash while RAM holds it, so
//! a crash keeps RAM's values too; a value replaced, deleted or invalidated
//! never comes back in its old version; an eviction or a read back into RAM
//! does not write the value again.

use super::{key, store, value, TempFile};
use crate::{DeleteRequest, Expiry, SetOutcome, Store};

fn through(file: &TempFile) -> std::sync::Arc<Store> {
    store(file, 32, |c| {
        c.persist = true;
        c.write_through = true;
        c.recache_rate = 1;
        c.recache_after = 1;
    })
}

fn put(s: &Store, i: usize, v: u32) {
    let stored = s.insert(&key(i), &value(i, v), Expiry::Never);
    assert!(matches!(stored, SetOutcome::Stored { .. }), "key {i}");
}

/// What a SIGKILL leaves: the objects file as the page cache holds it now,
/// copied while the store still runs, opened by a new store.
fn crash_copy(s: &Store, file: &TempFile, tag: &str) -> (std::sync::Arc<Store>, TempFile) {
    s.flash_sync();
    let copy = TempFile::new(tag);
    std::fs::copy(&file.0, &copy.0).expect("the copy");
    let again = store(&copy, 32, |c| c.persist = true);
    (again, copy)
}

#[test]
fn values_in_ram_are_on_flash_too_and_survive_a_crash() {
    let f = TempFile::new("through-crash");
    // 1 MiB of RAM holds these 300 values (1,300 bytes on average).
    let n = 300;
    let s = through(&f);
    for i in 0..n {
        put(&s, i, 1);
    }
    assert!((0..n).all(|i| s.contains(&key(i))), "all in RAM");
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.objects_used, n as u64, "a copy of each: {st:?}");
    let (again, _copy) = crash_copy(&s, &f, "through-crash-copy");
    assert_eq!(
        again.flash_stats().expect("a tier").rebuild_records,
        n as u64
    );
    for i in 0..n {
        let item = again.get(&key(i)).unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
    }
}

#[test]
fn changed_keys_never_come_back_in_their_old_version() {
    let f = TempFile::new("through-changed");
    let n = 300;
    let s = through(&f);
    for i in 0..n {
        put(&s, i, 1);
    }
    // Half the changes while the copies are still in the open buffer, half
    // once they are written.
    let mut changes = Vec::new();
    for round in 0..2 {
        if round == 1 {
            s.flash_sync();
        }
        for i in (round..n).step_by(10) {
            put(&s, i, 2);
            changes.push((i, "replaced"));
        }
        for i in (round + 2..n).step_by(10) {
            assert!(s.delete(&key(i)));
            changes.push((i, "deleted"));
        }
        for i in (round + 4..n).step_by(10) {
            assert!(s.touch(&key(i), Expiry::In(3600)));
            changes.push((i, "touched"));
        }
        for i in (round + 6..n).step_by(10) {
            let soft = DeleteRequest {
                invalidate: true,
                ..Default::default()
            };
            s.delete_with(&key(i), &soft);
            changes.push((i, "invalidated"));
        }
    }
    let (again, _copy) = crash_copy(&s, &f, "through-changed-copy");
    for (i, what) in changes {
        let back = again.get(&key(i));
        match what {
            "replaced" => {
                let item = back.unwrap_or_else(|| panic!("replaced key {i} lost"));
                assert_eq!(
                    item.value(),
                    &value(i, 2)[..],
                    "replaced key {i} came back old"
                );
            }
            _ => assert!(back.is_none(), "{what} key {i} came back old"),
        }
    }
    // The keys nobody changed are all there.
    let kept = (0..n).filter(|i| i % 10 >= 8).collect::<Vec<_>>();
    for i in kept {
        let item = again.get(&key(i)).unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
    }
}

#[test]
fn evictions_and_reads_back_do_not_write_values_again() {
    let f = TempFile::new("through-evict");
    // Ten times what RAM holds: most are evicted, each written once.
    let n = 3_000;
    let s = through(&f);
    for i in 0..n {
        put(&s, i, 1);
    }
    s.flash_sync();
    let st = s.flash_stats().expect("a tier");
    assert_eq!(st.objects_written, n as u64, "{st:?}");
    assert_eq!(st.writes_dropped, 0);
    let evicted: Vec<usize> = (0..n).filter(|&i| !s.contains(&key(i))).collect();
    assert!(evicted.len() > n / 2, "most were evicted");
    // Read back (brought into RAM by repeated reads), and still on flash.
    for &i in evicted.iter().take(50) {
        for _ in 0..3 {
            let item = s.get(&key(i)).unwrap_or_else(|| panic!("key {i} lost"));
            assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
        }
    }
    s.flash_sync();
    let after = s.flash_stats().expect("a tier");
    assert_eq!(
        after.objects_written, n as u64,
        "nothing written again: {after:?}"
    );
    assert!(after.recache_from_extstore > 0, "{after:?}");
    assert_eq!(after.objects_used, st.objects_used, "the copies stay");
    let (again, _copy) = crash_copy(&s, &f, "through-evict-copy");
    for &i in evicted.iter().take(50) {
        let item = again.get(&key(i)).unwrap_or_else(|| panic!("key {i} lost"));
        assert_eq!(item.value(), &value(i, 1)[..], "key {i}");
    }
}
