//! kura-store in process against moka and quick_cache (seed 001's
//! HashLruCache, and the DESIGN.md target: >= quick_cache, >= 2x moka).
//!
//! 100,000 keys of 12 bytes, 100-byte values, Zipf-distributed requests
//! (exponent 0.99), every cache sized to hold 90% of the keys and filled
//! before measuring. Two loads, each on 1 and 2 threads: `get` (reads only)
//! and `mix` (90% reads, 10% sets of an existing key). Throughput is
//! operations per second summed over the threads.
//!
//! ```sh
//! cargo bench -p kura-store --bench in_process -- --measurement-time 2 --warm-up-time 1
//! ```
//!
//! On a shared machine the figures drift by more than the differences
//! between caches from one minute to the next; `cargo run --release -p
//! kura-store --example alternate` runs the same loads with the caches
//! taking turns, round after round, and prints medians and ratios.
//!
//! Values are reference-counted in every cache (kura's `Item`, `Bytes` for
//! the others) and moka's and quick_cache's keys are `Arc<[u8]>`, so a
//! read clones a handle and a set allocates only what the cache itself
//! needs. A value is a heap buffer of its own in every cache, as one read
//! from the network or a database would be (a `Bytes` of static memory
//! would clone without touching a reference count, which no cached value
//! from a real source does). Every cache keeps its own copy of a key: moka and quick_cache get
//! a fresh `Arc` on insert, not the one the requests look up with (kura
//! copies keys into its blocks). Sharing the lookup's allocation would let
//! their key comparison read memory the request has just hashed, which an
//! application building its keys per request never gives a cache.

mod common;

use std::time::Duration;

use common::{caches, run, Workload};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn in_process(c: &mut Criterion) {
    let w = Workload::new();
    let caches = caches(&w);
    for (load, set_every) in [("get", 0), ("mix90-10", 10)] {
        for threads in [1, 2] {
            let mut group = c.benchmark_group(format!("{load}/{threads}t"));
            group.throughput(Throughput::Elements(threads as u64));
            for (name, cache) in &caches {
                group.bench_function(BenchmarkId::from_parameter(name), |b| {
                    b.iter_custom(|iters| run(cache.as_ref(), &w, threads, set_every, iters))
                });
            }
            group.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = in_process
}
criterion_main!(benches);
