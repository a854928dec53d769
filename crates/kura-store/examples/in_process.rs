//! kura-store as an application's in-process cache: a read-through cache of
//! user profiles in front of a slow "database", shared by four request
//! threads. Entries live for a minute, a write to the database invalidates
//! the cached copy, a reaper sweeps expired entries in the background, and
//! readers get the cached bytes without a copy.
//!
//! Run with `cargo run -p kura-store --example in_process`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kura_store::{Expiry, Reaper, Store, StoreConfig};
use rand::Rng;

const THREADS: usize = 4;
const REQUESTS_PER_THREAD: usize = 20_000;
const USERS: u32 = 10_000;
/// How long a cached profile may be served before it is loaded again.
const TTL: Duration = Duration::from_secs(60);

/// The slow backend: every call costs a round trip.
fn load_user_from_db(id: u32) -> Vec<u8> {
    thread::sleep(Duration::from_micros(200));
    format!(r#"{{"id":{id},"name":"user{id}","plan":"free"}}"#).into_bytes()
}

/// A read-through cache of user profiles.
struct UserCache {
    store: Arc<Store>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl UserCache {
    fn new(capacity: usize) -> UserCache {
        UserCache {
            store: Arc::new(Store::new(StoreConfig::with_capacity(capacity))),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn key(id: u32) -> String {
        format!("user:{id}")
    }

    /// The profile of `id`, from the cache when possible. Two threads that
    /// miss the same key at once both load it; the second store wins.
    fn get(&self, id: u32) -> Bytes {
        let key = Self::key(id);
        if let Some(item) = self.store.get(key.as_bytes()) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            // Shares the cached allocation; stays valid even if the entry is
            // replaced or evicted while the caller still uses it.
            return item.value_bytes();
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let profile = load_user_from_db(id);
        self.store
            .insert(key.as_bytes(), &profile, Expiry::after(TTL));
        Bytes::from(profile)
    }

    /// A write went to the database: drop the cached copy so the next read
    /// loads the new one.
    fn invalidate(&self, id: u32) {
        self.store.delete(Self::key(id).as_bytes());
    }
}

/// A skewed choice of user: a few are very popular, most are rarely seen.
fn pick_user(rng: &mut impl Rng) -> u32 {
    let x: f64 = rng.gen();
    (x.powi(4) * f64::from(USERS)) as u32
}

fn main() {
    // 1 MiB: room for a good part of the users, not all of them.
    let cache = Arc::new(UserCache::new(1 << 20));
    let _reaper = Reaper::spawn(&cache.store, Duration::from_secs(1));

    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let cache = Arc::clone(&cache);
            thread::spawn(move || {
                let mut rng = rand::thread_rng();
                for _ in 0..REQUESTS_PER_THREAD {
                    let id = pick_user(&mut rng);
                    if rng.gen_ratio(1, 100) {
                        cache.invalidate(id);
                    } else {
                        let profile = cache.get(id);
                        assert!(profile.starts_with(b"{\"id\":"));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        if w.join().is_err() {
            eprintln!("a request thread panicked");
            std::process::exit(1);
        }
    }
    let elapsed = started.elapsed();

    let hits = cache.hits.load(Ordering::Relaxed);
    let misses = cache.misses.load(Ordering::Relaxed);
    let lookups = hits + misses;
    let stats = cache.store.stats();
    println!(
        "{lookups} lookups from {THREADS} threads in {:.2?}",
        elapsed
    );
    println!(
        "hits {hits}, misses (database loads) {misses}, hit ratio {:.1}%",
        100.0 * hits as f64 / lookups.max(1) as f64
    );
    println!(
        "cache: {} items, {} of {} bytes, {} evictions, {} shards",
        stats.curr_items, stats.bytes, stats.limit_maxbytes, stats.evictions, stats.shards
    );
}
