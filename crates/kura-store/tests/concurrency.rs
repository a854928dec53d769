//! Many threads on one store: nothing written is lost while it fits, every
//! read returns an intact value of the key asked for, read-modify-write
//! operations are atomic, and the accounting is consistent afterwards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use kura_store::{
    ArithOutcome, ArithRequest, EvictionKind, Expiry, GetOptions, SetMode, SetOutcome, SetRequest,
    Store, StoreConfig,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const THREADS: usize = 4;

fn value_for(t: usize, i: usize) -> Vec<u8> {
    format!("thread {t} item {i} ")
        .repeat(1 + i % 7)
        .into_bytes()
}

#[test]
fn disjoint_writers_lose_nothing() {
    const PER_THREAD: usize = 5000;
    for shards in [0, 1, 16] {
        let store = Arc::new(Store::new(StoreConfig {
            shards,
            ..StoreConfig::with_capacity(256 << 20)
        }));
        let start = Arc::new(Barrier::new(THREADS));
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (store, start) = (Arc::clone(&store), Arc::clone(&start));
                thread::spawn(move || {
                    start.wait();
                    for i in 0..PER_THREAD {
                        let key = format!("t{t}:{i}");
                        let outcome = store.insert(key.as_bytes(), &value_for(t, i), Expiry::Never);
                        assert!(matches!(outcome, SetOutcome::Stored { .. }));
                    }
                    for i in 0..PER_THREAD {
                        let key = format!("t{t}:{i}");
                        let item = store.get(key.as_bytes()).expect("written item is there");
                        assert_eq!(item.key(), key.as_bytes());
                        assert_eq!(item.value(), &value_for(t, i)[..]);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker panicked");
        }
        let st = store.stats();
        assert_eq!(st.evictions, 0);
        assert_eq!(st.curr_items, (THREADS * PER_THREAD) as u64);
        assert_eq!(store.len(), THREADS * PER_THREAD);
        assert_eq!(st.total_items, (THREADS * PER_THREAD) as u64);
    }
}

/// Keys below this hold counters; the others hold runs of one byte.
const COUNTERS: usize = 16;
const KEYS: usize = 64;

fn key_name(k: usize) -> Vec<u8> {
    format!("shared:{k}").into_bytes()
}

/// The only byte a non-counter key's value may contain.
fn fill_byte(k: usize) -> u8 {
    b'a' + (k % 26) as u8
}

/// Whether `value` is something the writers could have left under key `k`.
fn intact(k: usize, value: &[u8]) -> bool {
    if k < COUNTERS {
        let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
        digits > 0 && value[digits..].iter().all(|&b| b == b' ')
    } else {
        value.iter().all(|&b| b == fill_byte(k))
    }
}

/// One random operation on the shared keys, checking whatever it reads.
fn random_op(store: &Store, rng: &mut StdRng) {
    let k = rng.gen_range(0..KEYS);
    let key = key_name(k);
    let expiry = if rng.gen_bool(0.2) {
        Expiry::In(rng.gen_range(1..4))
    } else {
        Expiry::Never
    };
    let check = |item: &kura_store::Item| {
        assert_eq!(item.key(), &key[..]);
        assert_eq!(item.flags(), k as u32);
        assert!(intact(k, item.value()), "{k}: {:?}", item.value());
    };
    match rng.gen_range(0..10) {
        0..=2 => {
            if let Some(item) = store.get(&key) {
                check(&item);
            }
        }
        3 if k < COUNTERS => {
            store.arith(&key, &ArithRequest::new(rng.gen(), rng.gen_range(0..1000)));
        }
        3 | 4 => {
            let mode = [
                SetMode::Set,
                SetMode::Add,
                SetMode::Replace,
                SetMode::Append,
                SetMode::Prepend,
            ][rng.gen_range(0..5)];
            let value = if k < COUNTERS {
                rng.gen_range(0..100_000u32).to_string().into_bytes()
            } else {
                vec![fill_byte(k); rng.gen_range(0..3000)]
            };
            // Appending to a counter would make it non-numeric.
            if k >= COUNTERS || matches!(mode, SetMode::Set | SetMode::Add | SetMode::Replace) {
                store.set(&SetRequest {
                    mode,
                    flags: k as u32,
                    expiry: Some(expiry),
                    ..SetRequest::new(&key, &value)
                });
            }
        }
        5 => {
            // get, then cas: either it stores or someone else got there.
            let opts = GetOptions::default();
            if let Some(hit) = store.get_with(&key, &opts) {
                check(&hit.item);
                let value = hit.item.value().to_vec();
                let outcome = store.set(&SetRequest {
                    flags: k as u32,
                    cas: Some(hit.cas),
                    ..SetRequest::new(&key, &value)
                });
                assert!(!matches!(outcome, SetOutcome::NotStored));
            }
        }
        6 => {
            store.delete(&key);
        }
        7 => {
            store.touch(&key, expiry);
        }
        8 => {
            let opts = GetOptions {
                touch: Some(expiry),
                ..Default::default()
            };
            if let Some(hit) = store.get_with(&key, &opts) {
                check(&hit.item);
            }
        }
        _ => {
            store.contains(&key);
        }
    }
}

#[test]
fn overlapping_mixed_ops_keep_the_store_consistent() {
    for eviction in EvictionKind::ALL {
        mixed_ops(eviction);
    }
}

fn mixed_ops(eviction: EvictionKind) {
    const OPS: usize = 20_000;
    const CAPACITY: usize = 64 * 1024;
    let store = Arc::new(Store::new(StoreConfig {
        shards: 8,
        eviction,
        ..StoreConfig::with_capacity(CAPACITY)
    }));
    let done = Arc::new(AtomicBool::new(false));
    // Moves time, sweeps and flushes while the workers run.
    let janitor = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        thread::spawn(move || {
            let mut rounds = 0u64;
            while !done.load(Ordering::Relaxed) {
                rounds += 1;
                store.reap(16);
                if rounds.is_multiple_of(8) {
                    store.clock().advance(1);
                }
                match rounds % 500 {
                    0 => store.flush(None),
                    250 => store.flush(Some(Expiry::In(2))),
                    _ => {}
                }
                assert!(store.stats().bytes <= CAPACITY as u64);
                thread::yield_now();
            }
            rounds
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(0x5eed + t as u64);
                for _ in 0..OPS {
                    random_op(&store, &mut rng);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked");
    }
    done.store(true, Ordering::Relaxed);
    janitor.join().expect("janitor panicked");

    let st = store.stats();
    assert_eq!(store.len() as u64, st.curr_items);
    assert!(st.bytes <= CAPACITY as u64, "{st:?}");
    assert!(
        st.evictions > 0,
        "{eviction}: the store was never full: {st:?}"
    );
    for k in 0..KEYS {
        if let Some(item) = store.get(&key_name(k)) {
            assert!(intact(k, item.value()));
        }
    }
    // The accounting survived: with every key gone and the reaper past,
    // nothing is charged. (A few entries that no lookup finds any more,
    // dropped by a flush or past their time, can stay charged until the
    // reaper's pass: about one run in twenty leaves some.)
    for k in 0..KEYS {
        store.delete(&key_name(k));
    }
    for _ in 0..100 {
        if store.reap(1 << 20) == 0 {
            break;
        }
    }
    let st = store.stats();
    assert_eq!((st.curr_items, st.bytes), (0, 0), "{eviction}: {st:?}");
}

#[test]
fn increments_are_atomic() {
    const PER_THREAD: u64 = 10_000;
    let store = Arc::new(Store::new(StoreConfig::with_capacity(1 << 20)));
    store.insert(b"hits", b"0", Expiry::Never);
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for _ in 0..PER_THREAD {
                    let outcome = store.arith(b"hits", &ArithRequest::new(true, 1));
                    assert!(matches!(outcome, ArithOutcome::Updated { .. }));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked");
    }
    let want = (THREADS as u64 * PER_THREAD).to_string();
    assert_eq!(store.get(b"hits").unwrap().value(), want.as_bytes());
}

#[test]
fn cas_loops_lose_no_update() {
    const PER_THREAD: u64 = 1000;
    let store = Arc::new(Store::new(StoreConfig::with_capacity(1 << 20)));
    store.insert(b"n", b"0", Expiry::Never);
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let mut retries = 0u64;
                for _ in 0..PER_THREAD {
                    loop {
                        let hit = store.get_with(b"n", &GetOptions::default()).unwrap();
                        let n: u64 = std::str::from_utf8(hit.item.value())
                            .unwrap()
                            .parse()
                            .unwrap();
                        let next = (n + 1).to_string();
                        let outcome = store.set(&SetRequest {
                            cas: Some(hit.cas),
                            ..SetRequest::new(b"n", next.as_bytes())
                        });
                        match outcome {
                            SetOutcome::Stored { .. } => break,
                            SetOutcome::Exists => retries += 1,
                            other => panic!("cas: {other:?}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker panicked");
    }
    let want = (THREADS as u64 * PER_THREAD).to_string();
    assert_eq!(store.get(b"n").unwrap().value(), want.as_bytes());
}
