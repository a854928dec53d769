//! The longest single insert while one shard grows from empty to
//! `ITEMS` entries (default 2,000,000 of 100 bytes): what a client waits
//! for when it hits a shard whose index is growing. The index grows a few
//! buckets per change (index.rs); rehashing a full table at once stalled an
//! insert for 173 ms at 1.8M entries on the machine of bench/results/history.md.
//!
//! ```sh
//! cargo run --release -p kura-store --example growth [ITEMS]
//! ```

use std::time::Instant;

use kura_store::{EvictionKind, Expiry, Store, StoreConfig};

fn main() {
    let items: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let store = Store::new(StoreConfig {
        shards: 1,
        eviction: EvictionKind::S3Fifo,
        ..StoreConfig::with_capacity(items * 400)
    });
    let value = [b'v'; 100];
    let mut worst = (0u128, 0usize);
    let mut slow = Vec::new();
    let start = Instant::now();
    for i in 0..items {
        let key = format!("key:{i:08}");
        let t = Instant::now();
        store.insert(key.as_bytes(), &value, Expiry::Never);
        let us = t.elapsed().as_micros();
        if us > 1000 {
            slow.push((i, us));
        }
        if us > worst.0 {
            worst = (us, i);
        }
    }
    println!(
        "{items} inserts in {:.2} s; longest {} us (at item {}); inserts over 1 ms: {slow:?}",
        start.elapsed().as_secs_f64(),
        worst.0,
        worst.1
    );
}
