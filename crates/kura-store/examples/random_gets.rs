//! Reads of keys drawn uniformly from 1,000,000 (12-byte keys, 100-byte
//! values, S3-FIFO, eight shards as `kura server -t 2` has): nearly every read
//! misses the processor's caches twice, in the index and in the entry's
//! block, as a server's reads under load (1) do. Prints nanoseconds a read,
//! the median of ROUNDS rounds of READS reads; for comparing builds that
//! change the index or block layout, or huge pages (`huge`: the store's
//! `huge_pages`, the server's `-L`) against none, run alternately.
//!
//! ```sh
//! cargo run --release -p kura-store --example random_gets [ROUNDS] [READS] [huge]
//! ```

use std::time::Instant;

use kura_store::{EvictionKind, Expiry, Store, StoreConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let reads: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let huge_pages = args.next().as_deref() == Some("huge");
    let store = Store::new(StoreConfig {
        capacity: 1 << 30,
        shards: 8,
        eviction: EvictionKind::S3Fifo,
        huge_pages,
        ..Default::default()
    });
    const KEYS: u64 = 1_000_000;
    // Keys are written out per read, as a server parses them from a
    // request: a table of them would add misses of its own.
    let key = |i: u64, buf: &mut [u8; 12]| {
        buf[..4].copy_from_slice(b"key:");
        let mut n = i;
        for b in buf[4..].iter_mut().rev() {
            *b = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    let value = [7u8; 100];
    let mut buf = [0u8; 12];
    for i in 0..KEYS {
        key(i, &mut buf);
        store.insert(&buf, &value, Expiry::Never);
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut found = 0usize;
    let mut per_read = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..reads {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            key(x % KEYS, &mut buf);
            if let Some(item) = store.get(&buf) {
                found += item.value().len();
            }
        }
        per_read.push(start.elapsed().as_nanos() as f64 / reads as f64);
    }
    per_read.sort_by(f64::total_cmp);
    println!(
        "{:.1} ns a read (median of {rounds}; {found} bytes read)",
        per_read[rounds / 2]
    );
}
