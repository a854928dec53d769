//! The change sink hears enough to rebuild the store: random operations run
//! on a store with a recording sink, the recorded changes are replayed into
//! a fresh store (as a durable server's recovery does), and both must hold
//! the same entries — values, flags, CAS uniques, deadlines and marks —
//! evictions, failed stores, flushes and meta's invalidation included.

use std::sync::{Arc, Mutex};

use kura_store::{
    ArithRequest, Change, ChangeSink, DeleteRequest, Entry, EvictionKind, Expiry, GetOptions, Item,
    Report, SetMode, SetRequest, Store, StoreConfig,
};
use proptest::prelude::*;

/// A change, owned.
#[derive(Debug, Clone)]
enum Rec {
    Put(Entry),
    Touch(Vec<u8>, u32),
    Remove(Vec<u8>),
    Flush(u32),
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Rec>>);

impl ChangeSink for Recorder {
    fn record(&self, change: Change<'_>, _: &Report) {
        let rec = match change {
            Change::Put(e) => Rec::Put(Entry {
                item: e.item.clone(),
                cas: e.cas,
                exptime: e.exptime,
                stale: e.stale,
                binary_key: e.binary_key,
            }),
            Change::Touch { key, exptime } => Rec::Touch(key.to_vec(), exptime),
            Change::Remove { key } | Change::Evict { key } => Rec::Remove(key.to_vec()),
            Change::Flush { at } => Rec::Flush(at),
        };
        self.0.lock().unwrap().push(rec);
    }
}

fn replay(records: &[Rec], into: &Store) {
    for r in records {
        let change = match r {
            Rec::Put(e) => Change::Put(e.as_ref()),
            Rec::Touch(key, exptime) => Change::Touch {
                key,
                exptime: *exptime,
            },
            Rec::Remove(key) => Change::Remove { key },
            Rec::Flush(at) => Change::Flush { at: *at },
        };
        into.replay(change);
    }
}

/// Entries in key order, values as length and checksum (readable diffs).
/// key, value length, value checksum, flags, CAS, exptime, stale, base64 key.
type Row = (String, usize, u32, u32, u64, u32, bool, bool);

fn snapshot(s: &Store) -> Vec<Row> {
    let mut all: Vec<_> = (0..s.shard_count())
        .flat_map(|i| s.entries(i))
        .map(|e| {
            (
                String::from_utf8_lossy(e.item.key()).into_owned(),
                e.item.value().len(),
                crc(e.item.value()),
                e.item.flags(),
                e.cas,
                e.exptime,
                e.stale,
                e.binary_key,
            )
        })
        .collect();
    all.sort();
    all
}

#[derive(Debug, Clone)]
enum Op {
    Store(SetMode, u8, usize, u32, u32),
    CasCurrent(u8, usize),
    Arith(u8, bool, u64),
    Delete(u8),
    Invalidate(u8),
    RemoveValue(u8),
    Touch(u8, u32),
    Vivify(u8),
    Get(u8),
    Flush,
    FlushLater(u32),
    Advance(u32),
}

fn op() -> impl Strategy<Value = Op> {
    let mode = prop_oneof![
        Just(SetMode::Set),
        Just(SetMode::Add),
        Just(SetMode::Replace),
        Just(SetMode::Append),
        Just(SetMode::Prepend),
        Just(SetMode::Rotate { max: 2500 }),
    ];
    let key = 0u8..12;
    prop_oneof![
        6 => (mode, key.clone(), 0usize..3000, 0u32..4, prop_oneof![Just(0u32), 1u32..5])
            .prop_map(|(m, k, len, f, ttl)| Op::Store(m, k, len, f, ttl)),
        1 => (key.clone(), 0usize..200).prop_map(|(k, l)| Op::CasCurrent(k, l)),
        2 => (key.clone(), any::<bool>(), 0u64..5).prop_map(|(k, i, d)| Op::Arith(k, i, d)),
        1 => key.clone().prop_map(Op::Delete),
        1 => key.clone().prop_map(Op::Invalidate),
        1 => key.clone().prop_map(Op::RemoveValue),
        1 => (key.clone(), 0u32..5).prop_map(|(k, t)| Op::Touch(k, t)),
        1 => key.clone().prop_map(Op::Vivify),
        2 => key.prop_map(Op::Get),
        1 => Just(Op::Flush),
        1 => (1u32..4).prop_map(Op::FlushLater),
        1 => (1u32..3).prop_map(Op::Advance),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k}").into_bytes()
}

fn run(ops: &[Op], eviction: EvictionKind) {
    let config = StoreConfig {
        // Small enough that 3000-byte values evict.
        capacity: 16 * 1024,
        shards: 1,
        eviction,
        ..StoreConfig::default()
    };
    let live = Store::new(config);
    let rec = Arc::new(Recorder::default());
    assert!(live.attach(rec.clone()));
    for op in ops {
        match *op {
            Op::Store(mode, k, len, flags, ttl) => {
                let value = vec![b'a' + k; len];
                live.set(&SetRequest {
                    mode,
                    key: &key(k),
                    value: &value,
                    flags,
                    expiry: Some(if ttl == 0 {
                        Expiry::Never
                    } else {
                        Expiry::In(ttl * 10)
                    }),
                    ..SetRequest::new(b"", b"")
                });
            }
            Op::CasCurrent(k, len) => {
                let cas = live
                    .get_with(&key(k), &GetOptions::default())
                    .map(|h| h.cas);
                let value = vec![b'c'; len];
                live.set(&SetRequest {
                    cas: Some(cas.unwrap_or(1)),
                    ..SetRequest::new(&key(k), &value)
                });
            }
            Op::Arith(k, incr, delta) => {
                live.arith(&key(k), &ArithRequest::new(incr, delta));
            }
            Op::Delete(k) => {
                live.delete(&key(k));
            }
            Op::Invalidate(k) => {
                live.delete_with(
                    &key(k),
                    &DeleteRequest {
                        invalidate: true,
                        touch: Some(Expiry::In(30)),
                        ..Default::default()
                    },
                );
            }
            Op::RemoveValue(k) => {
                live.delete_with(
                    &key(k),
                    &DeleteRequest {
                        remove_value: Some(9),
                        ..Default::default()
                    },
                );
            }
            Op::Touch(k, ttl) => {
                live.touch(
                    &key(k),
                    if ttl == 0 {
                        Expiry::Never
                    } else {
                        Expiry::In(ttl * 10)
                    },
                );
            }
            Op::Vivify(k) => {
                live.get_with(
                    &key(k),
                    &GetOptions {
                        vivify: Some(Expiry::In(20)),
                        ..Default::default()
                    },
                );
            }
            Op::Get(k) => {
                live.get(&key(k));
            }
            Op::Flush => live.flush(None),
            Op::FlushLater(secs) => live.flush(Some(Expiry::In(secs * 10))),
            Op::Advance(secs) => {
                live.clock().advance(secs * 10);
                // Reading the store lets a due flush happen.
                live.get(b"nothing");
            }
        }
    }
    let records = rec.0.lock().unwrap().clone();
    let restored = Store::new(config);
    // The restored store runs on the same time as the live one.
    restored
        .clock()
        .advance(live.now().saturating_sub(restored.now()));
    replay(&records, &restored);
    assert_eq!(snapshot(&restored), snapshot(&live), "{eviction}");
    assert_eq!(restored.pending_flush(), live.pending_flush());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn replaying_the_changes_rebuilds_the_store(ops in proptest::collection::vec(op(), 1..120)) {
        for eviction in EvictionKind::ALL {
            run(&ops, eviction);
        }
    }
}

#[test]
fn an_eviction_is_reported_before_the_store_that_caused_it() {
    let live = Store::new(StoreConfig {
        capacity: 8 * 1024,
        shards: 1,
        eviction: EvictionKind::Lru,
        ..StoreConfig::default()
    });
    let rec = Arc::new(Recorder::default());
    live.attach(rec.clone());
    live.insert(b"a", &[1; 3000], Expiry::Never);
    live.insert(b"b", &[2; 3000], Expiry::Never);
    live.insert(b"c", &[3; 3000], Expiry::Never);
    let recs = rec.0.lock().unwrap().clone();
    let shape: Vec<String> = recs
        .iter()
        .map(|r| match r {
            Rec::Put(e) => format!("put {}", String::from_utf8_lossy(e.item.key())),
            Rec::Remove(k) => format!("remove {}", String::from_utf8_lossy(k)),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(shape, ["put a", "put b", "remove a", "put c"]);
}

#[test]
fn a_store_without_a_sink_reports_nothing_and_a_second_sink_is_refused() {
    let s = Store::default();
    s.insert(b"k", b"v", Expiry::Never);
    let rec = Arc::new(Recorder::default());
    assert!(s.attach(rec.clone()));
    assert!(!s.attach(Arc::new(Recorder::default())));
    assert!(rec.0.lock().unwrap().is_empty());
    s.insert(b"k", b"w", Expiry::Never);
    assert_eq!(rec.0.lock().unwrap().len(), 1);
    let _ = Item::new(b"x", 0, b"");
}

/// An observer (`Store::observe`) hears every change beside the attached
/// sink, whichever comes first; each slot takes one.
#[test]
fn an_observer_hears_the_changes_beside_the_attached_sink() {
    let s = Store::default();
    let seen = Arc::new(Recorder::default());
    assert!(s.observe(seen.clone()));
    assert!(!s.observe(Arc::new(Recorder::default())));
    s.insert(b"k", b"v", Expiry::Never);
    let log = Arc::new(Recorder::default());
    // Attached after the observer (a replica promoted later, say).
    assert!(s.attach(log.clone()));
    assert!(!s.attach(Arc::new(Recorder::default())));
    s.delete(b"k");
    s.flush(None);
    assert_eq!(seen.0.lock().unwrap().len(), 3);
    assert_eq!(log.0.lock().unwrap().len(), 2);
    assert!(matches!(log.0.lock().unwrap()[0], Rec::Remove(_)));
}

fn crc(b: &[u8]) -> u32 {
    b.iter()
        .fold(17u32, |h, &x| h.wrapping_mul(31).wrapping_add(u32::from(x)))
}

/// A case the property test found (CI, 2026-11-22): under TinyLFU a
/// replayed store ended with two entries for one key.
#[test]
fn regression_tinylfu_rotation_then_set() {
    use SetMode::*;
    let ops = vec![
        Op::Vivify(0),
        Op::Advance(1),
        Op::Store(Set, 5, 0, 0, 1),
        Op::Store(Set, 8, 1117, 0, 0),
        Op::Store(Rotate { max: 2500 }, 9, 1273, 0, 0),
        Op::Vivify(4),
        Op::CasCurrent(4, 77),
        Op::Store(Rotate { max: 2500 }, 1, 797, 0, 0),
        Op::Advance(1),
        Op::Store(Set, 10, 1868, 0, 0),
        Op::Store(Append, 9, 1956, 0, 0),
        Op::Store(Rotate { max: 2500 }, 7, 2490, 0, 0),
        Op::Store(Set, 3, 1565, 0, 0),
        Op::Vivify(2),
        Op::Store(Set, 6, 2461, 0, 0),
        Op::Store(Append, 7, 211, 0, 0),
        Op::Store(Rotate { max: 2500 }, 0, 1229, 0, 0),
        Op::Store(Set, 0, 0, 0, 0),
    ];
    for eviction in EvictionKind::ALL {
        run(&ops, eviction);
    }
}

#[test]
fn a_snapshot_between_a_flush_and_its_reclamation_holds_only_what_came_after() {
    for eviction in EvictionKind::ALL {
        let config = StoreConfig {
            shards: 16,
            eviction,
            ..StoreConfig::default()
        };
        let live = Store::new(config);
        let rec = Arc::new(Recorder::default());
        live.attach(rec.clone());
        for i in 0..2000 {
            live.insert(format!("old{i}").as_bytes(), b"o", Expiry::Never);
        }
        live.flush(None);
        for i in 0..100 {
            live.insert(format!("new{i}").as_bytes(), b"n", Expiry::Never);
        }
        // The flushed entries are not reclaimed yet, and not in the
        // entries a snapshot reads.
        assert_eq!(live.len(), 2100, "{eviction}");
        let taken = snapshot(&live);
        assert_eq!(taken.len(), 100, "{eviction}");
        assert!(
            taken.iter().all(|row| row.0.starts_with("new")),
            "{eviction}"
        );
        // Recovered from the log (its flush replayed), or from the
        // snapshot: the same entries, before and after reclaiming.
        let records = rec.0.lock().unwrap().clone();
        let from_log = Store::new(config);
        replay(&records, &from_log);
        let from_snapshot = Store::new(config);
        for shard in 0..live.shard_count() {
            for e in live.entries(shard) {
                from_snapshot.replay(Change::Put(e.as_ref()));
            }
        }
        for s in [&live, &from_log, &from_snapshot] {
            assert_eq!(snapshot(s), taken, "{eviction}");
            s.reap(usize::MAX);
            assert_eq!(snapshot(s), taken, "{eviction}");
            assert_eq!(s.len(), 100, "{eviction}");
        }
    }
}
