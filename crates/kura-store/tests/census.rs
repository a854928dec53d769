//! A flags census hears every entry that arrives and every one that leaves: random
//! operations (sets of new and same-length values, appends, counters, deletes, evictions in a
//! small store, flushes reclaimed later) leave the census's count per flags equal to the
//! entries the store holds, grouped by their flags.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kura_store::{
    ArithRequest, EvictionKind, FlagsCensus, SetMode, SetRequest, Store, StoreConfig,
};
use proptest::prelude::*;

#[derive(Default)]
struct Counts(Mutex<BTreeMap<u32, i64>>);

impl FlagsCensus for Counts {
    fn arrived(&self, flags: u32) {
        *self.0.lock().unwrap().entry(flags).or_default() += 1;
    }
    fn left(&self, flags: u32) {
        *self.0.lock().unwrap().entry(flags).or_default() -= 1;
    }
}

impl Counts {
    fn nonzero(&self) -> BTreeMap<u32, i64> {
        let counts = self.0.lock().unwrap();
        counts
            .iter()
            .filter(|(_, n)| **n != 0)
            .map(|(f, n)| (*f, *n))
            .collect()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Set { key: u8, flags: u32, len: usize },
    Append { key: u8 },
    Incr { key: u8 },
    Delete { key: u8 },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..48, 0u32..4, prop_oneof![Just(8usize), Just(100), 0usize..3000])
            .prop_map(|(key, flags, len)| Op::Set { key, flags, len }),
        1 => (0u8..48).prop_map(|key| Op::Append { key }),
        1 => (0u8..48).prop_map(|key| Op::Incr { key }),
        2 => (0u8..48).prop_map(|key| Op::Delete { key }),
        1 => Just(Op::Flush),
    ]
}

fn held_by_flags(store: &Store) -> BTreeMap<u32, i64> {
    let mut held = BTreeMap::new();
    for shard in 0..store.shard_count() {
        for entry in store.entries(shard) {
            *held.entry(entry.item.flags()).or_default() += 1;
        }
    }
    held
}

proptest! {
    #[test]
    fn the_census_counts_what_the_store_holds(
        ops in proptest::collection::vec(op(), 1..400),
        eviction in prop_oneof![Just(EvictionKind::Lru), Just(EvictionKind::S3Fifo)],
    ) {
        let store = Store::new(StoreConfig {
            capacity: 48 * 1024,
            shards: 2,
            eviction,
            ..StoreConfig::default()
        });
        let counts = Arc::new(Counts::default());
        prop_assert!(store.count_flags(counts.clone()));
        prop_assert!(!store.count_flags(Arc::new(Counts::default())), "one census only");
        for op in &ops {
            match *op {
                Op::Set { key, flags, len } => {
                    let value = vec![b'1'; len];
                    store.set(&SetRequest { flags, ..SetRequest::new(&[key], &value) });
                }
                Op::Append { key } => {
                    store.set(&SetRequest {
                        mode: SetMode::Append,
                        ..SetRequest::new(&[key], b"2")
                    });
                }
                Op::Incr { key } => {
                    store.arith(&[key], &ArithRequest::new(true, 1));
                }
                Op::Delete { key } => {
                    store.delete(&[key]);
                }
                Op::Flush => store.flush(None),
            }
        }
        // Flushed entries count until they are reclaimed; reclaim them.
        store.reap(usize::MAX);
        prop_assert_eq!(counts.nonzero(), held_by_flags(&store));
        let total: i64 = counts.nonzero().values().sum();
        prop_assert_eq!(total as usize, store.len());
    }
}

#[test]
fn only_an_empty_store_takes_a_census() {
    let store = Store::new(StoreConfig::with_capacity(1 << 20));
    store.set(&SetRequest::new(b"k", b"v"));
    assert!(!store.count_flags(Arc::new(Counts::default())));
}
