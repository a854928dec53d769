//! The memory limit: whatever sequence of operations a small store sees, the
//! bytes it accounts for never exceed its capacity, it evicts (or, with
//! eviction off, refuses) to stay under it, and the accounting returns to
//! zero once everything is deleted.

use kura_store::{
    ArithRequest, EvictionKind, Expiry, SetMode, SetOutcome, SetRequest, Store, StoreConfig,
};
use proptest::prelude::*;

const CAPACITY: usize = 64 * 1024;
const KEYS: u16 = 300;

/// Values are slices of this; digits, so short ones are counters too.
static FILLER: [u8; 20_000] = [b'7'; 20_000];

#[derive(Debug, Clone)]
enum Op {
    Store {
        mode: SetMode,
        key: u16,
        size: usize,
        ttl: u32,
    },
    Incr {
        key: u16,
    },
    Touch {
        key: u16,
        ttl: u32,
    },
    Delete {
        key: u16,
    },
    Get {
        key: u16,
    },
    Advance {
        secs: u32,
    },
    Reap,
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 0usize..64,
        3 => 64usize..1024,
        3 => 1024usize..8192,
        // Larger than a shard's share when there are four.
        1 => 15_000usize..20_000,
    ]
}

fn ttl() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(0u32), 1 => 1u32..100]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    let mode = prop::sample::select(vec![
        SetMode::Set,
        SetMode::Set,
        SetMode::Set,
        SetMode::Add,
        SetMode::Replace,
        SetMode::Append,
        SetMode::Prepend,
    ]);
    prop_oneof![
        12 => (mode, key.clone(), size(), ttl())
            .prop_map(|(mode, key, size, ttl)| Op::Store { mode, key, size, ttl }),
        1 => key.clone().prop_map(|key| Op::Incr { key }),
        1 => (key.clone(), ttl()).prop_map(|(key, ttl)| Op::Touch { key, ttl }),
        2 => key.clone().prop_map(|key| Op::Delete { key }),
        3 => key.prop_map(|key| Op::Get { key }),
        1 => (1u32..50).prop_map(|secs| Op::Advance { secs }),
        1 => Just(Op::Reap),
    ]
}

fn key_name(k: u16) -> Vec<u8> {
    format!("item:{k}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bytes_never_exceed_the_capacity(
        shards in prop::sample::select(vec![1usize, 4]),
        evict in any::<bool>(),
        eviction in prop::sample::select(EvictionKind::ALL.to_vec()),
        ops in prop::collection::vec(op(), 400..800),
    ) {
        let store = Store::new(StoreConfig {
            shards,
            evict,
            eviction,
            ..StoreConfig::with_capacity(CAPACITY)
        });
        let per_shard = CAPACITY / store.shard_count();
        for op in ops {
            match op {
                Op::Store { mode, key, size, ttl } => {
                    let key = key_name(key);
                    let outcome = store.set(&SetRequest {
                        mode,
                        expiry: Some(Expiry::from_exptime(i64::from(ttl))),
                        ..SetRequest::new(&key, &FILLER[..size])
                    });
                    // With eviction on, a plain set of an item that fits in
                    // an empty shard always finds room.
                    if evict && mode == SetMode::Set && size + key.len() + 256 <= per_shard {
                        prop_assert!(matches!(outcome, SetOutcome::Stored { .. }), "{outcome:?}");
                    }
                }
                Op::Incr { key } => {
                    store.arith(&key_name(key), &ArithRequest::new(true, 1));
                }
                Op::Touch { key, ttl } => {
                    store.touch(&key_name(key), Expiry::from_exptime(i64::from(ttl)));
                }
                Op::Delete { key } => {
                    store.delete(&key_name(key));
                }
                Op::Get { key } => {
                    store.get(&key_name(key));
                }
                Op::Advance { secs } => store.clock().advance(secs),
                Op::Reap => {
                    store.reap(16);
                }
            }
            let st = store.stats();
            prop_assert!(st.bytes <= CAPACITY as u64, "{} bytes in a {CAPACITY}-byte store", st.bytes);
        }
        let st = store.stats();
        prop_assert_eq!(store.len() as u64, st.curr_items);
        if evict {
            // The test must have pushed the store past its limit.
            prop_assert!(st.evictions > 0, "no eviction: {st:?}");
        } else {
            prop_assert_eq!(st.evictions, 0);
            prop_assert!(st.out_of_memory > 0, "never full: {st:?}");
        }

        // The accounting has no leaks: with every key gone, nothing is charged.
        for k in 0..KEYS {
            store.delete(&key_name(k));
        }
        store.reap(64);
        let st = store.stats();
        prop_assert_eq!(st.curr_items, 0);
        prop_assert_eq!(st.bytes, 0);
    }
}

#[test]
fn a_shrunk_capacity_is_enforced_on_the_next_store() {
    for eviction in EvictionKind::ALL {
        let store = Store::new(StoreConfig {
            shards: 1,
            eviction,
            ..StoreConfig::with_capacity(CAPACITY)
        });
        for k in 0..KEYS {
            store.insert(&key_name(k), &FILLER[..500], Expiry::Never);
        }
        store.set_capacity(CAPACITY / 4);
        store.insert(b"one more", b"x", Expiry::Never);
        let st = store.stats();
        assert!(st.bytes <= (CAPACITY / 4) as u64, "{eviction}: {st:?}");
        assert_eq!(st.limit_maxbytes, (CAPACITY / 4) as u64);
        assert!(store.contains(b"one more"), "{eviction}");
    }
}

/// Growing an entry in place makes room from the others, even when it is
/// the entry the policy would evict first.
#[test]
fn a_growing_entry_is_not_refused_while_others_can_go() {
    for eviction in EvictionKind::ALL {
        let store = Store::new(StoreConfig {
            shards: 1,
            eviction,
            ..StoreConfig::with_capacity(CAPACITY)
        });
        // The oldest entry, never read, then a full store.
        store.insert(b"grows", &FILLER[..100], Expiry::Never);
        let mut k = 0;
        while store.stats().bytes + 1000 < CAPACITY as u64 {
            store.insert(&key_name(k), &FILLER[..500], Expiry::Never);
            k += 1;
        }
        assert_eq!(store.stats().evictions, 0);
        for size in [1000, 4000, 16_000] {
            let outcome = store.insert(b"grows", &FILLER[..size], Expiry::Never);
            assert!(
                matches!(outcome, SetOutcome::Stored { .. }),
                "{eviction}: {outcome:?}"
            );
            assert_eq!(store.get(b"grows").map(|i| i.value().len()), Some(size));
        }
        assert!(store.stats().evictions > 0);
    }
}
#[test]
fn an_item_larger_than_a_shard_is_refused_and_changes_nothing() {
    let store = Store::new(StoreConfig {
        shards: 4,
        ..StoreConfig::with_capacity(CAPACITY)
    });
    store.insert(b"small", b"v", Expiry::Never);
    let before = store.stats();
    let big = vec![b'x'; CAPACITY / 4];
    assert_eq!(
        store.insert(b"big", &big, Expiry::Never),
        SetOutcome::NoMemory
    );
    assert!(store.get(b"big").is_none());
    assert!(store.contains(b"small"));
    let after = store.stats();
    assert_eq!(after.bytes, before.bytes);
    assert_eq!(after.out_of_memory, before.out_of_memory + 1);
}

/// The index reported in `stats` (memcached's `hash_bytes`) follows the
/// entries: a few bytes each whatever their number, never a doubled table's
/// worth, and a flush leaves it sized for a cache that fills up again.
#[test]
fn the_index_costs_a_few_bytes_an_entry_at_any_count() {
    let store = Store::new(StoreConfig {
        shards: 4,
        ..StoreConfig::with_capacity(256 << 20)
    });
    let empty = store.stats();
    assert_eq!(empty.hash_bytes, 0, "no table before the first entry");
    let mut worst: f64 = 0.0;
    for k in 0..200_000u32 {
        store.insert(format!("key:{k:06}").as_bytes(), b"v", Expiry::Never);
        if k % 1000 == 999 && k >= 20_000 {
            let st = store.stats();
            // Whole pages: at most one per shard beyond the slots.
            let bytes = st.hash_bytes - 4 * 4096;
            if !st.hash_is_expanding {
                worst = worst.max(bytes as f64 / st.curr_items as f64);
            }
        }
    }
    let st = store.stats();
    assert_eq!(st.curr_items, 200_000);
    assert!(worst <= 7.2, "{worst:.2} index bytes an entry");
    assert!(st.hash_slots as f64 * 0.7 <= 200_000.0 + 4.0 * 816.0);
    store.flush(None);
    // As in memcached, flushed items count until they are reclaimed.
    assert_eq!(store.stats().curr_items, 200_000);
    store.reap(256);
    let after = store.stats();
    assert_eq!(after.curr_items, 0);
    assert!(after.hash_bytes > 0 && after.hash_bytes <= st.hash_bytes);
}
