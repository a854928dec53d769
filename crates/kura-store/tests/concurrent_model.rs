//! Threads setting, deleting and reading keys of a store so small that it
//! evicts all the time, each holding handles (`Item`s) across the evictions
//! and past the store's end, checked against a model of what each thread
//! may see. Small enough to run under Miri (TESTING.md): there the cases
//! and their operations are fewer.
//!
//! Each thread has keys of its own, which only it writes: a read of one
//! must give exactly the value the thread last stored, or nothing (evicted),
//! and once nothing, nothing until the thread stores it again; with no
//! eviction in the whole case, everything the model holds must be there.
//! The shared keys are written by every thread: a read must give a whole,
//! well-formed value of that key, and never one older than what the reader
//! saw or overwrote before (per writer, versions only go forward). Every
//! value says whose it is: key, writer, version, then bytes derived from
//! them, so a torn, stale or misplaced value fails the check.

use std::collections::HashMap;

use kura_store::{EvictionKind, Expiry, Item, SetOutcome, Store, StoreConfig};
use proptest::prelude::*;
use proptest::test_runner::Config;

const THREADS: u8 = 3;
const OWN_KEYS: u8 = 10;
const SHARED_KEYS: u8 = 4;
/// Handles a thread holds at most.
const HOLD: usize = 4;

/// Cases and operations per thread: fewer under Miri, in a smaller store
/// so that they still evict.
const CASES: u32 = if cfg!(miri) { 3 } else { 96 };
const OPS: std::ops::Range<usize> = if cfg!(miri) { 12..24 } else { 1..160 };
const CAPACITY: usize = if cfg!(miri) { 4 << 10 } else { 8 << 10 };

#[derive(Debug, Clone, Copy)]
enum Op {
    Set {
        shared: bool,
        key: u8,
        len: u16,
    },
    Delete {
        shared: bool,
        key: u8,
    },
    Get {
        shared: bool,
        key: u8,
    },
    /// A get whose handle the thread keeps (in place of its oldest).
    Hold {
        shared: bool,
        key: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let key =
        (any::<bool>(), 0u8..OWN_KEYS).prop_map(|(s, k)| (s, if s { k % SHARED_KEYS } else { k }));
    prop_oneof![
        5 => (key.clone(), 8u16..800).prop_map(|((shared, key), len)| Op::Set { shared, key, len }),
        1 => key.clone().prop_map(|(shared, key)| Op::Delete { shared, key }),
        4 => key.clone().prop_map(|(shared, key)| Op::Get { shared, key }),
        2 => key.prop_map(|(shared, key)| Op::Hold { shared, key }),
    ]
}

fn key_of(thread: u8, shared: bool, key: u8) -> [u8; 3] {
    if shared {
        [b's', 0, key]
    } else {
        [b'o', thread, key]
    }
}

fn filler(writer: u8, version: u32, i: usize) -> u8 {
    (version as u8).wrapping_mul(31) ^ (i as u8) ^ writer.wrapping_mul(7)
}

fn value_of(key: [u8; 3], writer: u8, version: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&key);
    v.push(writer);
    v.extend_from_slice(&version.to_le_bytes());
    v.extend((8..len).map(|i| filler(writer, version, i)));
    v
}

/// The writer and version of a well-formed value of `key`; panics on any
/// other bytes.
fn parse(key: [u8; 3], item: &Item) -> (u8, u32) {
    assert_eq!(item.key(), key, "a handle of another key");
    let v = item.value();
    assert!(
        v.len() >= 8 && v[..3] == key,
        "a value of another key: {v:?}"
    );
    let writer = v[3];
    let version = u32::from_le_bytes([v[4], v[5], v[6], v[7]]);
    assert!(writer < THREADS, "writer {writer}");
    for (i, &b) in v.iter().enumerate().skip(8) {
        assert_eq!(b, filler(writer, version, i), "torn value at byte {i}");
    }
    (writer, version)
}

/// What a thread knows of one of its own keys.
#[derive(Debug, Clone, Default)]
struct Own {
    /// The value last stored, if the store may still hold it.
    value: Option<Vec<u8>>,
    /// The store must hold it unless something was evicted (false after
    /// a store the store refused: it may have dropped the old value).
    certain: bool,
}

/// What a thread knows of a shared key's versions by one writer.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// The newest version the thread saw.
    newest: Option<u32>,
    /// The oldest version it may still see.
    floor: u32,
}

/// One thread's view: its own keys, and per shared key and writer what it
/// saw.
struct Thread {
    id: u8,
    version: u32,
    own: HashMap<u8, Own>,
    seen: HashMap<(u8, u8), Seen>,
    held: Vec<(Item, Vec<u8>)>,
}

impl Thread {
    fn new(id: u8) -> Thread {
        Thread {
            id,
            version: 0,
            own: HashMap::new(),
            seen: HashMap::new(),
            held: Vec::new(),
        }
    }

    fn run(&mut self, store: &Store, op: Op) {
        match op {
            Op::Set { shared, key, len } => self.set(store, shared, key, len as usize),
            Op::Delete { shared, key } => {
                let k = key_of(self.id, shared, key);
                let found = store.delete(&k);
                if shared {
                    self.overwrote(key);
                    // Its own versions so far are gone.
                    let own = self.seen.entry((key, self.id)).or_default();
                    own.floor = self.version + 1;
                } else {
                    let own = self.own.entry(key).or_default();
                    assert!(!found || own.value.is_some(), "deleted an absent {k:?}");
                    *own = Own {
                        value: None,
                        certain: true,
                    };
                }
            }
            Op::Get { shared, key } => {
                self.read(store, shared, key);
            }
            Op::Hold { shared, key } => {
                if let Some(item) = self.read(store, shared, key) {
                    if self.held.len() == HOLD {
                        let (old, bytes) = self.held.remove(0);
                        assert_eq!(old.value(), bytes, "a held value changed");
                    }
                    let bytes = item.value().to_vec();
                    self.held.push((item, bytes));
                }
            }
        }
    }

    fn set(&mut self, store: &Store, shared: bool, key: u8, len: usize) {
        self.version += 1;
        let k = key_of(self.id, shared, key);
        let value = value_of(k, self.id, self.version, len);
        let outcome = store.insert(&k, &value, Expiry::Never);
        let stored = matches!(outcome, SetOutcome::Stored { .. });
        assert!(stored || outcome == SetOutcome::NoMemory, "{outcome:?}");
        if shared {
            self.overwrote(key);
            // Its older versions are gone; this one it may see.
            let own = self.seen.entry((key, self.id)).or_default();
            own.floor = self.version;
        } else {
            let own = self.own.entry(key).or_default();
            *own = if stored {
                Own {
                    value: Some(value),
                    certain: true,
                }
            } else {
                // Refused: the old value may be kept or dropped.
                Own {
                    value: own.value.take(),
                    certain: false,
                }
            };
        }
    }

    /// This thread wrote a shared key: nothing it saw before may come back.
    fn overwrote(&mut self, key: u8) {
        for ((k, _), seen) in self.seen.iter_mut() {
            if let (true, Some(newest)) = (*k == key, seen.newest) {
                seen.floor = seen.floor.max(newest + 1);
            }
        }
    }

    fn read(&mut self, store: &Store, shared: bool, key: u8) -> Option<Item> {
        let k = key_of(self.id, shared, key);
        let got = store.get(&k);
        if shared {
            if let Some(item) = &got {
                let (writer, version) = parse(k, item);
                let seen = self.seen.entry((key, writer)).or_default();
                assert!(
                    version >= seen.floor,
                    "{k:?}: version {version} of {writer}, {seen:?}"
                );
                seen.floor = version;
                seen.newest = Some(version);
            }
        } else {
            let own = self.own.entry(key).or_default();
            match &got {
                Some(item) => {
                    parse(k, item);
                    assert_eq!(Some(item.value()), own.value.as_deref(), "{k:?}");
                }
                // Evicted (or never there): it stays gone.
                None => {
                    *own = Own {
                        value: None,
                        certain: true,
                    }
                }
            }
        }
        got
    }
}

fn config() -> Config {
    let mut c = Config::with_cases(CASES);
    if cfg!(miri) {
        // Under Miri no failure files (nor a file system, with isolation).
        c.failure_persistence = None;
    }
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn threads_agree_with_the_model_through_evictions(
        shards in prop::sample::select(vec![1usize, 2]),
        eviction in prop::sample::select(EvictionKind::ALL.to_vec()),
        ops in prop::collection::vec(prop::collection::vec(op(), OPS), THREADS as usize),
    ) {
        let store = Store::new(StoreConfig {
            shards,
            eviction,
            ..StoreConfig::with_capacity(CAPACITY)
        });
        let mut threads: Vec<Thread> = std::thread::scope(|s| {
            let workers: Vec<_> = ops
                .into_iter()
                .zip(0..THREADS)
                .map(|(ops, id)| {
                    let store = &store;
                    s.spawn(move || {
                        let mut t = Thread::new(id);
                        for op in ops {
                            t.run(store, op);
                        }
                        t
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().expect("a thread failed")).collect()
        });
        // Everything a thread's model holds for sure is there, unless
        // something was evicted.
        if store.stats().evictions == 0 {
            for t in &threads {
                for (&key, own) in &t.own {
                    if let (Some(v), true) = (&own.value, own.certain) {
                        let got = store.get(&key_of(t.id, false, key));
                        prop_assert_eq!(got.as_ref().map(Item::value), Some(&v[..]));
                    }
                }
            }
        }
        // Handles outlive evictions, replacements and the store itself.
        drop(store);
        for t in &mut threads {
            for (item, bytes) in t.held.drain(..) {
                prop_assert_eq!(item.value(), &bytes[..]);
            }
        }
    }
}
