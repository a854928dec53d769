//! A long random run of one full store under each eviction policy, checked
//! against a model after every operation: a read returns the value last
//! stored under its key or nothing (an evicted key), never an older value or
//! another key's; the store stays within its limit and its counts agree.
//! Long enough for shards' indexes to be rebuilt several times while the
//! policies evict, which moves S3-FIFO's hand and makes ids in its small
//! queue go stale and be reused (its debug checks run in this build).

use std::collections::HashMap;

use kura_store::{EvictionKind, Expiry, Store, StoreConfig};

const CAPACITY: usize = 2 << 20;
const KEYS: u64 = 40_000;
const OPS: usize = 300_000;

/// A xorshift sequence: the same run every time.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The value of version `version` of key `k`: its length varies with the
/// version, so a new version often needs a block of another size.
fn value(k: u64, version: u32) -> Vec<u8> {
    let len = (k as usize * 7 + version as usize * 13) % 300;
    let mut v = format!("{k}/{version}/").into_bytes();
    v.resize(v.len() + len, b'a' + (version % 26) as u8);
    v
}

fn run(kind: EvictionKind) {
    let store = Store::new(StoreConfig {
        shards: 2,
        eviction: kind,
        ..StoreConfig::with_capacity(CAPACITY)
    });
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut versions: HashMap<u64, u32> = HashMap::new();
    let mut present: HashMap<u64, bool> = HashMap::new();
    for step in 0..OPS {
        let r = rng.next();
        // Skewed keys: a hot tenth gets half the operations.
        let k = if r & 1 == 0 {
            (r >> 8) % (KEYS / 10)
        } else {
            (r >> 8) % KEYS
        };
        let key = format!("key:{k}");
        match (r >> 40) % 10 {
            0..=3 => {
                let version = versions.get(&k).map_or(0, |v| v + 1);
                store.insert(key.as_bytes(), &value(k, version), Expiry::Never);
                versions.insert(k, version);
                present.insert(k, true);
            }
            4 => {
                store.delete(key.as_bytes());
                present.insert(k, false);
            }
            _ => {
                let got = store.get(key.as_bytes());
                if let Some(item) = got {
                    assert!(
                        present.get(&k) == Some(&true),
                        "{kind}, step {step}: {key} read back after its delete"
                    );
                    let want = value(k, versions[&k]);
                    assert!(
                        item.value() == &want[..],
                        "{kind}, step {step}: {key} read a stale or foreign value"
                    );
                }
            }
        }
        if step % 1_000 == 0 {
            let st = store.stats();
            assert!(st.bytes <= CAPACITY as u64, "{kind}: {st:?}");
            assert_eq!(st.curr_items, store.len() as u64, "{kind}");
        }
    }
    let st = store.stats();
    assert!(
        st.evictions > OPS as u64 / 10,
        "{kind}: hardly evicted: {st:?}"
    );
    // Everything left can still be read and is the latest version.
    let mut left = 0;
    for (&k, &version) in &versions {
        if let Some(item) = store.get(format!("key:{k}").as_bytes()) {
            assert_eq!(item.value(), &value(k, version)[..], "{kind}: key {k}");
            left += 1;
        }
    }
    assert_eq!(left as u64, st.curr_items, "{kind}");
}

#[test]
fn s3fifo_under_a_long_random_run() {
    run(EvictionKind::S3Fifo);
}

#[test]
fn the_other_policies_under_a_long_random_run() {
    for kind in EvictionKind::ALL {
        if kind != EvictionKind::S3Fifo {
            run(kind);
        }
    }
}
