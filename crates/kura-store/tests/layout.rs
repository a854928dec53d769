//! The item layout's optional fields: a deadline takes room in a block only
//! when the entry has one, and a CAS unique 8 bytes only when it is not one
//! the shard made (meta `E`) or its sequence number passed 2^32. An entry
//! given its first deadline (`touch`, `gat`, meta `T`, an invalidating
//! delete with `T`) or a wide CAS unique moves to a block with room for it,
//! keeping its value, flags, CAS and marks; handles on the old block keep
//! reading it; and the entry is never served past the deadline, even when
//! there was no room to move it.

use kura_store::{
    DeleteRequest, EvictionKind, Expiry, GetOptions, Item, SetRequest, Store, StoreConfig,
};

fn store(eviction: EvictionKind, capacity: usize) -> Store {
    Store::new(StoreConfig {
        shards: 1,
        eviction,
        ..StoreConfig::with_capacity(capacity)
    })
}

/// The benchmarks' item: a 10-byte key, 100 bytes of value, flags.
fn set(s: &Store, key: &[u8], expiry: Option<Expiry>) {
    s.set(&SetRequest {
        flags: 7,
        expiry,
        ..SetRequest::new(key, &[b'v'; 100])
    });
}

fn peek(s: &Store, key: &[u8]) -> Option<kura_store::Hit> {
    let opts = GetOptions {
        no_bump: true,
        ..Default::default()
    };
    s.get_with(key, &opts)
}

#[test]
fn a_deadline_takes_room_only_in_entries_that_have_one() {
    let s = store(EvictionKind::S3Fifo, 1 << 20);
    set(&s, b"key:000001", None);
    set(&s, b"key:000002", Some(Expiry::In(100)));
    // 18 bytes of header, 4 of flags, 110 of key and value: 132; a
    // deadline is 4 more.
    assert_eq!(s.get(b"key:000001").unwrap().heap_size(), 132);
    assert_eq!(s.get(b"key:000002").unwrap().heap_size(), 136);
}

/// Whether `exptime` is `secs` after some second between `t0` and now
/// (the store's clock follows the wall clock too).
fn is_in(s: &Store, exptime: u32, secs: u32, t0: u32) -> bool {
    (t0 + secs..=s.now() + secs).contains(&exptime)
}

fn assert_same(a: &Item, b: &Item) {
    assert_eq!(
        (a.key(), a.flags(), a.value()),
        (b.key(), b.flags(), b.value())
    );
}

#[test]
fn a_first_deadline_moves_the_entry_and_keeps_everything_else() {
    for eviction in EvictionKind::ALL {
        let s = store(eviction, 1 << 20);
        for i in 0..50 {
            set(&s, format!("other:{i}").as_bytes(), None);
        }
        set(&s, b"k", None);
        let before = s.get_with(b"k", &GetOptions::default()).unwrap();
        let held = before.item.clone();
        let total_items = s.stats().total_items;
        let t0 = s.now();
        let gat = GetOptions {
            touch: Some(Expiry::In(10)),
            ..Default::default()
        };
        let hit = s.get_with(b"k", &gat).unwrap();
        assert_eq!(hit.exptime_before, 0, "{eviction}");
        assert!(is_in(&s, hit.exptime, 10, t0), "{eviction}");
        assert_eq!(hit.cas, before.cas, "{eviction}: a touch keeps the CAS");
        assert!(hit.fetched, "{eviction}: the marks moved with the entry");
        assert_same(&hit.item, &before.item);
        assert_eq!(hit.item.heap_size(), held.heap_size() + 4, "{eviction}");
        // The handle from before the move reads its own block.
        assert_same(&held, &before.item);
        assert_ne!(held.value().as_ptr(), hit.item.value().as_ptr());
        // Not a new version; the others are untouched.
        let stats = s.stats();
        assert_eq!(stats.total_items, total_items, "{eviction}");
        assert_eq!(stats.curr_items, 51, "{eviction}");
        assert_eq!(peek(&s, b"k").unwrap().exptime, hit.exptime);
        // A second touch changes the deadline in place.
        let t0 = s.now();
        assert!(s.touch(b"k", Expiry::In(20)));
        let again = peek(&s, b"k").unwrap();
        assert_eq!(again.item.value().as_ptr(), hit.item.value().as_ptr());
        assert!(is_in(&s, again.exptime, 20, t0), "{eviction}");
        s.clock().advance(20);
        assert!(
            s.get(b"k").is_none(),
            "{eviction}: served past its deadline"
        );
        assert_same(&held, &before.item);
        assert_eq!(s.stats().curr_items, 50, "{eviction}");
    }
}

#[test]
fn an_invalidating_delete_with_a_ttl_gives_the_deadline_room() {
    let s = store(EvictionKind::S3Fifo, 1 << 20);
    set(&s, b"k", None);
    let t0 = s.now();
    let req = DeleteRequest {
        invalidate: true,
        touch: Some(Expiry::In(30)),
        ..Default::default()
    };
    s.delete_with(b"k", &req);
    let hit = peek(&s, b"k").unwrap();
    assert!(hit.stale);
    assert!(is_in(&s, hit.exptime, 30, t0));
    assert_eq!(hit.item.value(), &[b'v'; 100][..]);
    s.clock().advance(30);
    assert!(s.get(b"k").is_none());
}

#[test]
fn a_deadline_going_back_to_never_keeps_the_block() {
    let s = store(EvictionKind::S3Fifo, 1 << 20);
    set(&s, b"k", Some(Expiry::In(5)));
    let first = s.get(b"k").unwrap();
    assert!(s.touch(b"k", Expiry::Never));
    let hit = peek(&s, b"k").unwrap();
    assert_eq!(hit.exptime, 0);
    assert_eq!(hit.item.value().as_ptr(), first.value().as_ptr());
    s.clock().advance(10);
    assert!(s.contains(b"k"));
}

/// In a full cache, every entry touched is either moved or gone: none is
/// served after the deadline it was given.
#[test]
fn a_full_cache_never_serves_a_touched_entry_past_its_deadline() {
    for eviction in EvictionKind::ALL {
        let s = store(eviction, 256 * 1024);
        let keys: Vec<Vec<u8>> = (0..5000)
            .map(|i| format!("key:{i:06}").into_bytes())
            .collect();
        for k in &keys {
            set(&s, k, None);
        }
        assert!(s.stats().evictions > 0, "{eviction}: the cache is full");
        // Handles held across the moves and the evictions they cause.
        let held: Vec<Item> = keys.iter().filter_map(|k| s.get(k)).collect();
        let mut touched = 0;
        for k in &keys {
            if s.touch(k, Expiry::In(5)) {
                touched += 1;
            }
        }
        assert!(touched > 0, "{eviction}");
        let left = keys.iter().filter_map(|k| peek(&s, k)).count();
        assert!(left > 0, "{eviction}");
        assert!(
            keys.iter()
                .filter_map(|k| peek(&s, k))
                .all(|h| h.exptime != 0),
            "{eviction}: every entry left was touched, so has a deadline"
        );
        s.clock().advance(5);
        assert!(
            keys.iter().all(|k| s.get(k).is_none()),
            "{eviction}: an entry served past its deadline"
        );
        for h in &held {
            assert_eq!(h.value(), &[b'v'; 100][..]);
        }
    }
}

fn set_with_cas(s: &Store, key: &[u8], new_cas: Option<u64>) -> u64 {
    let req = SetRequest {
        flags: 7,
        new_cas,
        ..SetRequest::new(key, &[b'v'; 100])
    };
    match s.set(&req) {
        kura_store::SetOutcome::Stored { cas } => cas,
        other => panic!("{other:?}"),
    }
}

fn cas_of(s: &Store, key: &[u8]) -> u64 {
    peek(s, key).unwrap().cas
}

#[test]
fn a_cas_unique_the_shard_did_not_make_takes_8_bytes_and_reads_back() {
    for shards in [1, 4] {
        let s = Store::new(StoreConfig {
            shards,
            eviction: EvictionKind::S3Fifo,
            ..StoreConfig::with_capacity(1 << 22)
        });
        let made = set_with_cas(&s, b"key:000001", None);
        assert_eq!(cas_of(&s, b"key:000001"), made);
        assert_eq!(s.get(b"key:000001").unwrap().heap_size(), 132);
        // A client's unique (meta E), of every width.
        for (i, explicit) in [3u64, 1 << 31, (1 << 32) + 5, (1 << 40) + 7]
            .iter()
            .enumerate()
        {
            let key = format!("key:e{i:05}");
            assert_eq!(set_with_cas(&s, key.as_bytes(), Some(*explicit)), *explicit);
            assert_eq!(cas_of(&s, key.as_bytes()), *explicit, "{shards} shards");
        }
        assert!(s.get(b"key:e00003").unwrap().heap_size() == 136);
        // The shard's uniques go on above the largest seen, past 2^32
        // sequence numbers: 8 bytes from then on, and still increasing.
        let a = set_with_cas(&s, b"key:e00003", None);
        let b = set_with_cas(&s, b"key:e00003", None);
        assert!(b > a && a > (1 << 40) + 7, "{a} {b}");
        assert_eq!(cas_of(&s, b"key:e00003"), b);
        assert_eq!(s.get(b"key:e00003").unwrap().heap_size(), 136);
        // A `cas` with the unique read back succeeds; a stale one does not.
        let req = SetRequest {
            cas: Some(a),
            ..SetRequest::new(b"key:e00003", b"x")
        };
        assert_eq!(s.set(&req), kura_store::SetOutcome::Exists);
        let req = SetRequest {
            cas: Some(b),
            ..SetRequest::new(b"key:e00003", b"x")
        };
        assert!(matches!(s.set(&req), kura_store::SetOutcome::Stored { .. }));
    }
}

#[test]
fn an_invalidation_with_a_wide_cas_moves_the_entry_and_keeps_the_handle() {
    let s = store(EvictionKind::S3Fifo, 1 << 20);
    set(&s, b"key:000001", None);
    let held = s.get(b"key:000001").unwrap();
    assert_eq!(held.heap_size(), 132);
    let t0 = s.now();
    let req = DeleteRequest {
        invalidate: true,
        new_cas: Some(1 << 40),
        touch: Some(Expiry::In(30)),
        ..Default::default()
    };
    s.delete_with(b"key:000001", &req);
    let hit = peek(&s, b"key:000001").unwrap();
    assert_eq!(hit.cas, 1 << 40);
    assert!(hit.stale);
    assert!(is_in(&s, hit.exptime, 30, t0));
    assert_eq!(hit.item.heap_size(), 140);
    assert_same(&hit.item, &held);
    assert_ne!(hit.item.value().as_ptr(), held.value().as_ptr());
    assert_eq!(s.stats().curr_items, 1);
}

#[test]
fn counters_keep_their_cas_width_when_rewritten_in_place() {
    let s = store(EvictionKind::S3Fifo, 1 << 20);
    s.set(&SetRequest::new(b"n", b"100"));
    let held = s.get(b"n").unwrap();
    drop(held);
    let incr = kura_store::ArithRequest {
        new_cas: Some((1 << 33) + 1),
        ..kura_store::ArithRequest::new(true, 1)
    };
    s.arith(b"n", &incr);
    assert_eq!(cas_of(&s, b"n"), (1 << 33) + 1);
    assert_eq!(s.get(b"n").unwrap().value(), b"101");
    s.arith(b"n", &kura_store::ArithRequest::new(true, 1));
    let after = cas_of(&s, b"n");
    assert!(after > (1 << 33) + 1);
    assert_eq!(s.get(b"n").unwrap().value(), b"102");
}
