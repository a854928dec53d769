//! Unit tests of the store: shards for a large capacity, reads under the
//! shared lock.

use super::*;
use crate::eviction::EvictionKind;

#[test]
fn a_large_capacity_gets_enough_shards_for_its_arenas() {
    let capacity = 6 << 30;
    let s = Store::new(StoreConfig {
        shards: 2,
        ..StoreConfig::with_capacity(capacity)
    });
    let n = s.shard_count();
    assert!(
        n.is_power_of_two() && capacity / n <= crate::shard::max_limit(),
        "{n}"
    );
    s.insert(b"k", &[7; 1000], Expiry::Never);
    assert_eq!(s.get(b"k").unwrap().value(), &[7; 1000][..]);
    assert_eq!(s.stats().limit_maxbytes, capacity as u64);
}

#[test]
fn a_repeated_plain_read_shares_the_lock_and_answers_alike() {
    for eviction in EvictionKind::ALL {
        let s = Store::new(StoreConfig {
            shards: 1,
            eviction,
            ..StoreConfig::default()
        });
        s.insert(b"k", b"v", Expiry::In(100));
        s.insert(b"other", b"w", Expiry::Never);
        let hash = s.hasher.hash_one(b"k");
        // Never fetched: the first read needs the lock exclusive.
        let now = s.now();
        let first = s.cell(hash).read().get_shared(hash, b"k", now);
        assert!(matches!(first, SharedRead::Exclusive), "{eviction}");
        // The clock may tick between the two reads; try again if so.
        let shared = (0..3)
            .find_map(|_| {
                let now = s.now();
                s.get(b"k");
                (s.now() == now).then(|| s.cell(hash).read().get_shared(hash, b"k", now))
            })
            .expect("the clock stood still for a moment");
        let exclusive = s
            .get_with(
                b"k",
                &GetOptions {
                    stale_token: true,
                    ..Default::default()
                },
            )
            .unwrap();
        let fields = |h: &Hit| {
            (
                h.item.clone(),
                h.cas,
                h.exptime,
                h.exptime_before,
                h.fetched,
                h.stale,
                h.won,
                h.token_sent,
                h.created,
                h.binary_key,
            )
        };
        match shared {
            // LRU and TinyLFU move entries on a read, so they share
            // the lock only when there is nothing to move.
            SharedRead::Hit(hit) => assert_eq!(fields(&hit), fields(&exclusive)),
            SharedRead::Exclusive => assert!(
                matches!(eviction, EvictionKind::TinyLfu | EvictionKind::Lru),
                "{eviction}"
            ),
            SharedRead::Miss => panic!("{eviction}: miss"),
        }
        let now = s.now();
        let miss = s.cell(hash).read().get_shared(hash, b"absent", now);
        assert!(matches!(miss, SharedRead::Miss));
    }
}
