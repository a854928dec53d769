//! A fixed, single-threaded read loop for counting instructions with
//! callgrind, which gives nearly the same count for the same binary whatever
//! else the machine does (bench/results/history.md uses it where timings are too noisy):
//! 100,000 keys of 12 bytes with 100-byte values in an S3-FIFO store of
//! four shards, then GETS reads, in bursts of 64 reads of one key, keys
//! drawn by a fixed xorshift sequence.
//!
//! ```sh
//! cargo build --release -p kura-store --example get_loop
//! valgrind --tool=callgrind target/release/examples/get_loop 200000   # loads and reads
//! valgrind --tool=callgrind target/release/examples/get_loop 0        # loads only
//! ```
//!
//! (difference of the two totals) / GETS = instructions per read.

use kura_store::{EvictionKind, Expiry, Store, StoreConfig};

/// Reads of one key in a row. A key's first read in a second takes the
/// shard lock exclusively (it records the access time), the others share
/// it; in bursts, which second a read falls in (and so the count) hardly
/// depends on how fast the loop runs, under callgrind or not.
const BURST: usize = 64;

fn main() {
    let gets: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let store = Store::new(StoreConfig {
        capacity: 64 << 20,
        shards: 4,
        eviction: EvictionKind::S3Fifo,
        ..Default::default()
    });
    let keys: Vec<Vec<u8>> = (0..100_000u32)
        .map(|i| format!("key:{i:08}").into_bytes())
        .collect();
    let value = [7u8; 100];
    for k in &keys {
        store.insert(k, &value, Expiry::Never);
    }
    let mut x: u64 = 12345;
    let mut bytes = 0usize;
    for _ in 0..gets / BURST {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = &keys[(x % keys.len() as u64) as usize];
        for _ in 0..BURST {
            if let Some(item) = store.get(key) {
                bytes += item.value().len();
            }
        }
    }
    println!("{gets} reads, {bytes} bytes");
}
