//! Time: TTLs, `flush_all` now and with a delay, and the reaper that
//! reclaims expired entries. The clock is moved with `Clock::advance`, so no
//! test waits for real time except the one driving the reaper thread.

use std::sync::Arc;
use std::time::Duration;

use kura_store::{EvictionKind, Expiry, Reaper, Store, StoreConfig};

fn store(shards: usize, capacity: usize) -> Store {
    Store::new(StoreConfig {
        shards,
        ..StoreConfig::with_capacity(capacity)
    })
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}:{i}").into_bytes()
}

#[test]
fn relative_ttl_ends_on_its_second() {
    let s = store(1, 1 << 20);
    s.insert(b"k", b"v", Expiry::In(10));
    s.clock().advance(9);
    assert!(s.contains(b"k"));
    s.clock().advance(1);
    assert!(!s.contains(b"k"));
    assert!(s.get(b"k").is_none());
    assert_eq!(s.stats().get_expired, 1);
}

#[test]
fn memcached_exptimes() {
    let s = store(1, 1 << 20);
    let now = i64::from(s.now());
    let set = |k: &[u8], exptime: i64| s.insert(k, b"v", Expiry::from_exptime(exptime));
    set(b"never", 0);
    set(b"thirty-days", 30 * 24 * 3600);
    set(b"absolute", now + 100);
    set(b"absolute-past", now - 1);
    set(b"just-over-thirty-days", 30 * 24 * 3600 + 1);
    set(b"negative", -1);
    assert!(s.contains(b"never"));
    assert!(s.contains(b"thirty-days"));
    assert!(s.contains(b"absolute"));
    assert!(!s.contains(b"absolute-past"));
    assert!(
        !s.contains(b"just-over-thirty-days"),
        "an absolute time in 1970"
    );
    assert!(!s.contains(b"negative"));
    s.clock().advance(100);
    assert!(!s.contains(b"absolute"));
    s.clock().advance(30 * 24 * 3600);
    assert!(!s.contains(b"thirty-days"));
    assert!(s.contains(b"never"));
}

#[test]
fn a_negative_exptime_hides_the_old_value() {
    let s = store(1, 1 << 20);
    s.insert(b"k", b"old", Expiry::Never);
    s.insert(b"k", b"new", Expiry::from_exptime(-1));
    assert!(s.get(b"k").is_none());
}

#[test]
fn touch_moves_the_deadline_both_ways() {
    let s = store(1, 1 << 20);
    s.insert(b"k", b"v", Expiry::In(10));
    assert!(s.touch(b"k", Expiry::In(100)));
    s.clock().advance(50);
    assert!(s.contains(b"k"));
    assert!(s.touch(b"k", Expiry::Never));
    s.clock().advance(1000);
    assert!(s.contains(b"k"));
    assert!(s.touch(b"k", Expiry::from_exptime(-1)));
    assert!(!s.contains(b"k"));
    assert!(!s.touch(b"k", Expiry::Never));
}

#[test]
fn delayed_flush_drops_what_was_stored_before_its_deadline() {
    let s = store(4, 1 << 20);
    for i in 0..100 {
        s.insert(&key("before", i), b"v", Expiry::Never);
    }
    s.flush(Some(Expiry::In(10)));
    // Nothing goes before the deadline...
    s.clock().advance(5);
    for i in 0..100 {
        s.insert(&key("pending", i), b"v", Expiry::Never);
    }
    s.clock().advance(4);
    assert!((0..100).all(|i| s.contains(&key("before", i))));
    assert!((0..100).all(|i| s.contains(&key("pending", i))));
    // ...then everything stored until then does.
    s.clock().advance(1);
    for i in 0..100 {
        s.insert(&key("after", i), b"v", Expiry::Never);
    }
    assert!((0..100).all(|i| s.get(&key("before", i)).is_none()));
    assert!((0..100).all(|i| s.get(&key("pending", i)).is_none()));
    // Items stored after the deadline survive, also later on.
    s.clock().advance(3600);
    assert!((0..100).all(|i| s.get(&key("after", i)).is_some()));
    s.reap(16);
    assert_eq!(s.len(), 100);
}

#[test]
fn an_immediate_flush_replaces_a_pending_delayed_one() {
    let s = store(4, 1 << 20);
    s.insert(b"old", b"v", Expiry::Never);
    s.flush(Some(Expiry::In(10)));
    s.flush(None);
    assert!(s.get(b"old").is_none());
    s.insert(b"new", b"v", Expiry::Never);
    s.clock().advance(20);
    assert!(s.get(b"new").is_some(), "the delayed flush was cancelled");
}

#[test]
fn a_later_delayed_flush_replaces_an_earlier_one() {
    let s = store(4, 1 << 20);
    s.insert(b"k", b"v", Expiry::Never);
    s.flush(Some(Expiry::In(10)));
    s.flush(Some(Expiry::In(100)));
    s.clock().advance(10);
    assert!(s.contains(b"k"));
    s.clock().advance(90);
    assert!(!s.contains(b"k"));
}

#[test]
fn a_due_flush_is_not_lost_when_another_replaces_it() {
    let s = store(4, 1 << 20);
    for i in 0..64 {
        s.insert(&key("k", i), b"v", Expiry::Never);
    }
    s.flush(Some(Expiry::In(10)));
    s.clock().advance(10);
    // No shard has been looked at since the deadline passed.
    s.flush(Some(Expiry::In(100)));
    assert!((0..64).all(|i| !s.contains(&key("k", i))));
}

#[test]
fn reap_reclaims_expired_entries() {
    let s = store(4, 1 << 20);
    for i in 0..1000 {
        s.insert(&key("short", i), b"value", Expiry::In(10));
    }
    for i in 0..100 {
        s.insert(&key("long", i), b"value", Expiry::In(1000));
        s.insert(&key("never", i), b"value", Expiry::Never);
    }
    let before = s.stats();
    assert_eq!(before.curr_items, 1200);
    assert_eq!(s.reap(64), 0, "nothing has expired yet");

    s.clock().advance(10);
    assert_eq!(s.reap(64), 1000);
    let after = s.stats();
    assert_eq!(after.curr_items, 200);
    assert_eq!(s.len(), 200);
    assert_eq!(after.crawler_reclaimed, 1000);
    assert_eq!(after.expired_unfetched, 1000);
    assert!(after.bytes < before.bytes);
    assert!((0..100).all(|i| s.contains(&key("long", i)) && s.contains(&key("never", i))));
}

#[test]
fn reap_ends_whatever_the_batch_size() {
    // 256 slots in one shard: a multiple of every batch size below.
    let s = store(1, 1 << 20);
    for i in 0..256 {
        s.insert(&key("k", i), b"v", Expiry::In(5));
    }
    for batch in [0, 1, 2, 64, 128, 256, 1000] {
        assert_eq!(s.reap(batch), 0);
    }
    s.clock().advance(5);
    assert_eq!(s.reap(128), 256);
    assert!(s.is_empty());
}

#[test]
fn reap_covers_the_whole_shard_wherever_its_cursor_is() {
    // A small shard full of short-lived items, so that making room for new
    // items moves the reaper's cursor into the middle of the slots.
    let s = store(1, 32 * 1024);
    let value = [b'x'; 1000];
    let mut n = 0;
    while s.stats().bytes + 3000 < 32 * 1024 {
        s.insert(&key("old", n), &value, Expiry::In(10));
        n += 1;
    }
    s.clock().advance(10);
    for i in 0..5 {
        s.insert(&key("new", i), &value, Expiry::In(20));
    }
    assert_eq!(s.stats().evictions, 0);
    s.clock().advance(20);
    s.reap(3);
    assert!(s.is_empty(), "{} entries left", s.len());
}

#[test]
fn expired_entries_make_room_before_live_ones_are_evicted() {
    for eviction in EvictionKind::ALL {
        expired_make_room(eviction);
    }
}

fn expired_make_room(eviction: EvictionKind) {
    let s = Store::new(StoreConfig {
        shards: 1,
        eviction,
        ..StoreConfig::with_capacity(64 * 1024)
    });
    let value = [b'x'; 500];
    for i in 0..20 {
        s.insert(&key("live", i), &value, Expiry::Never);
    }
    // Fill the rest with short-lived items, without evicting anything.
    let mut temp = 0;
    while s.stats().bytes + 1500 < 64 * 1024 {
        s.insert(&key("temp", temp), &value, Expiry::In(5));
        temp += 1;
    }
    assert!(temp > 50);
    assert_eq!(s.stats().evictions, 0);

    s.clock().advance(5);
    // New live items need all the room the expired ones hold.
    for i in 0..temp {
        s.insert(&key("new", i), &value, Expiry::Never);
    }
    let st = s.stats();
    assert_eq!(st.evictions, 0, "{eviction}: {st:?}");
    assert!((0..20).all(|i| s.contains(&key("live", i))));
    assert!((0..temp).all(|i| s.contains(&key("new", i))));
}

#[test]
fn a_short_ttl_given_after_a_sweep_is_reclaimed_before_evicting() {
    for by_touch in [false, true] {
        let s = store(1, 64 * 1024);
        let value = [b'x'; 500];
        // Fill until full: from now on every new item needs room.
        let mut n = 0;
        while s.stats().evictions == 0 {
            s.insert(&key("long", n), &value, Expiry::In(1000));
            n += 1;
        }
        // A full sweep finds nothing expired and nothing due before long.
        assert_eq!(s.reap(16), 0);
        if by_touch {
            assert!(s.touch(&key("long", n - 1), Expiry::In(5)));
        } else {
            s.insert(b"short", &value, Expiry::In(5));
        }
        s.reset_stats();
        s.clock().advance(5);
        s.insert(b"new", &value, Expiry::Never);
        let st = s.stats();
        assert_eq!(st.evictions, 0, "by_touch {by_touch}: {st:?}");
        assert_eq!(st.crawler_reclaimed, 1);
    }
}

#[test]
fn the_reaper_thread_reclaims_in_the_background() {
    let s = Arc::new(store(4, 1 << 20));
    for i in 0..500 {
        s.insert(&key("short", i), b"v", Expiry::In(1));
        s.insert(&key("never", i), b"v", Expiry::Never);
    }
    let reaper = Reaper::spawn(&s, Duration::from_millis(1));
    s.clock().advance(1);
    // Wait for a sweep, without relying on how long one takes.
    let mut polls = 0;
    while s.stats().curr_items > 500 {
        std::thread::sleep(Duration::from_millis(1));
        polls += 1;
        assert!(polls < 60_000, "the reaper never ran");
    }
    assert_eq!(s.stats().crawler_reclaimed, 500);
    drop(reaper);
    assert_eq!(s.len(), 500);
}

#[test]
fn the_reaper_thread_ends_with_the_store() {
    let s = Arc::new(store(1, 1 << 20));
    let reaper = Reaper::spawn(&s, Duration::from_millis(1));
    drop(s);
    // Joins the thread: it must not keep the store alive or hang.
    drop(reaper);
}
