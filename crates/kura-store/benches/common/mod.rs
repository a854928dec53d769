//! The workload and the caches of the in-process benchmarks, shared by
//! `benches/in_process.rs` (criterion) and `examples/alternate.rs` (the
//! same loads, caches taking turns).

#![allow(dead_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kura_store::{EvictionKind, Expiry, Store, StoreConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub const KEYS: usize = 100_000;
/// Requests pre-drawn from the Zipf distribution (a power of two).
const SEQUENCE: usize = 1 << 20;
const VALUE: [u8; 100] = [b'v'; 100];
/// The share of the keys every cache can hold, in percent.
const HELD_PERCENT: usize = 90;
const ZIPF_EXPONENT: f64 = 0.99;

/// The keys, and a request sequence of key indices.
pub struct Workload {
    keys: Vec<Arc<[u8]>>,
    requests: Vec<u32>,
}

impl Workload {
    pub fn new() -> Workload {
        let keys = (0..KEYS)
            .map(|i| Arc::from(format!("key:{i:08}").into_bytes()))
            .collect();
        // Inverse transform sampling over the cumulative weights of ranks
        // 1..=KEYS; rank r is key r-1, so the popular keys are the low ones.
        let mut cdf = Vec::with_capacity(KEYS);
        let mut total = 0.0;
        for rank in 1..=KEYS {
            total += 1.0 / (rank as f64).powf(ZIPF_EXPONENT);
            cdf.push(total);
        }
        let mut rng = StdRng::seed_from_u64(0x6b75_7261);
        let requests = (0..SEQUENCE)
            .map(|_| {
                let u = rng.gen::<f64>() * total;
                cdf.partition_point(|&c| c < u).min(KEYS - 1) as u32
            })
            .collect();
        Workload { keys, requests }
    }

    /// The key of request `i` (wrapping round the sequence).
    #[inline]
    fn key(&self, i: usize) -> &Arc<[u8]> {
        &self.keys[self.requests[i & (SEQUENCE - 1)] as usize]
    }
}

/// The operations measured, on each cache.
pub trait Cache: Sync {
    fn get(&self, key: &Arc<[u8]>) -> bool;
    fn set(&self, key: &Arc<[u8]>, value: &Bytes);
}

impl Cache for Store {
    #[inline]
    fn get(&self, key: &Arc<[u8]>) -> bool {
        black_box(Store::get(self, key)).is_some()
    }
    #[inline]
    fn set(&self, key: &Arc<[u8]>, value: &Bytes) {
        self.insert(key, value, Expiry::Never);
    }
}

impl Cache for moka::sync::Cache<Arc<[u8]>, Bytes> {
    #[inline]
    fn get(&self, key: &Arc<[u8]>) -> bool {
        black_box(moka::sync::Cache::get(self, &key[..])).is_some()
    }
    #[inline]
    fn set(&self, key: &Arc<[u8]>, value: &Bytes) {
        self.insert(Arc::from(&key[..]), Bytes::copy_from_slice(value));
    }
}

impl Cache for quick_cache::sync::Cache<Arc<[u8]>, Bytes> {
    #[inline]
    fn get(&self, key: &Arc<[u8]>) -> bool {
        black_box(quick_cache::sync::Cache::get(self, &key[..])).is_some()
    }
    #[inline]
    fn set(&self, key: &Arc<[u8]>, value: &Bytes) {
        self.insert(Arc::from(&key[..]), Bytes::copy_from_slice(value));
    }
}

/// A kura store of `kind` that holds `HELD_PERCENT` of the keys: its byte
/// capacity is measured from what one entry is charged.
pub fn kura(kind: EvictionKind, w: &Workload) -> Store {
    let probe = Store::new(StoreConfig {
        shards: 1,
        eviction: kind,
        ..StoreConfig::default()
    });
    probe.insert(&w.keys[0], &VALUE, Expiry::Never);
    let per_entry = probe.stats().bytes as usize;
    Store::new(StoreConfig {
        eviction: kind,
        ..StoreConfig::with_capacity(per_entry * KEYS * HELD_PERCENT / 100)
    })
}

pub fn held() -> usize {
    KEYS * HELD_PERCENT / 100
}

/// Fills `cache` in key order, then replays the sequence once so the
/// eviction order has seen the distribution.
pub fn fill(cache: &dyn Cache, w: &Workload) {
    let value = Bytes::from_static(&VALUE);
    for key in &w.keys {
        cache.set(key, &value);
    }
    for i in 0..SEQUENCE {
        if !cache.get(w.key(i)) {
            cache.set(w.key(i), &value);
        }
    }
}

/// Runs `iters` operations on each of `threads` threads, each from its
/// own place in the sequence; one in `set_every` is a set (0: none).
pub fn run(
    cache: &dyn Cache,
    w: &Workload,
    threads: usize,
    set_every: usize,
    iters: u64,
) -> Duration {
    let value = Bytes::from_static(&VALUE);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let value = &value;
            s.spawn(move || {
                let base = t * (SEQUENCE / threads.max(1)) + (iters as usize % SEQUENCE);
                let mut hits = 0u64;
                for i in 0..iters as usize {
                    let key = w.key(base + i);
                    if set_every != 0 && i % set_every == 0 {
                        cache.set(key, value);
                    } else {
                        hits += u64::from(cache.get(key));
                    }
                }
                black_box(hits);
            });
        }
    });
    start.elapsed()
}

/// Every cache of the comparison, filled.
pub fn caches(w: &Workload) -> Vec<(&'static str, Box<dyn Cache>)> {
    let mut caches: Vec<(&str, Box<dyn Cache>)> = vec![
        ("kura-lru", Box::new(kura(EvictionKind::Lru, w))),
        ("kura-s3fifo", Box::new(kura(EvictionKind::S3Fifo, w))),
        ("kura-tinylfu", Box::new(kura(EvictionKind::TinyLfu, w))),
        ("kura-sieve", Box::new(kura(EvictionKind::Sieve, w))),
        (
            "moka",
            Box::new(moka::sync::Cache::<Arc<[u8]>, Bytes>::new(held() as u64)),
        ),
        (
            "quick_cache",
            Box::new(quick_cache::sync::Cache::<Arc<[u8]>, Bytes>::new(held())),
        ),
    ];
    for (_, cache) in &mut caches {
        fill(cache.as_ref(), w);
    }
    caches
}
