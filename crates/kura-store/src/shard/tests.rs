//! Unit tests of a shard's blocks: handles, the arena's growth, writes in
//! place.

use super::room::arena_bytes;
use super::*;
use crate::api::{GetOptions, SetRequest};
use crate::arena::UNIT;
use crate::eviction::EvictionKind;

impl Shard {
    /// Blocks in the arena, in bytes (the store's `bytes` counts `used`).
    fn arena_used(&self) -> usize {
        self.arena.used_units() * UNIT
    }
}

fn shard(kind: EvictionKind) -> Shard {
    shard_of(kind, 1 << 20)
}

fn shard_of(kind: EvictionKind, limit: usize) -> Shard {
    let config = StoreConfig {
        eviction: kind,
        ..Default::default()
    };
    Shard::new(&config, FixedState::with_seed(7), limit, 0, 0)
}

fn hash(s: &Shard, key: &[u8]) -> u64 {
    s.hasher.hash_one(key)
}

fn set(s: &mut Shard, key: &[u8], value: &[u8]) {
    let h = hash(s, key);
    s.set(h, &SetRequest::new(key, value), 0, None);
}

/// A plain read's handle on `key`'s item.
fn read(s: &mut Shard, key: &[u8]) -> Option<Item> {
    let h = hash(s, key);
    s.get(h, key, &GetOptions::default(), 0).map(|hit| hit.item)
}

#[test]
fn a_block_held_by_a_handle_comes_back_after_it_drops() {
    for kind in EvictionKind::ALL {
        let mut s = shard(kind);
        set(&mut s, b"a", &[1; 100]);
        let h = hash(&s, b"a");
        let item = read(&mut s, b"a").unwrap();
        s.unlink(h, s.find(h, b"a").unwrap());
        assert!(s.arena_used() > 0, "{kind}: the handle keeps its block");
        assert_eq!(item.value(), &[1; 100][..]);
        drop(item);
        // The block went back through the deferred stack; the next
        // allocation takes it.
        set(&mut s, b"b", &[2; 100]);
        let hb = hash(&s, b"b");
        s.unlink(hb, s.find(hb, b"b").unwrap());
        assert_eq!(s.arena_used(), 0, "{kind}");
        assert_eq!(s.used, 0, "{kind}");
    }
}

#[test]
fn the_arena_takes_its_room_only_when_a_block_would_not_fit() {
    // Under Miri a sixteenth of the limit and of the items.
    let limit = crate::testing::size(1 << 20, 1 << 16);
    let n = crate::testing::size(20_000, 1_250);
    let mut s = shard_of(EvictionKind::S3Fifo, limit);
    let key = |i: usize| format!("key:{i:06}").into_bytes();
    // Three times the limit in items of one size: evicted blocks are
    // reused as they are.
    for i in 0..n {
        set(&mut s, &key(i), &[b'v'; 100]);
    }
    assert!(s.stats.evictions > n as u64 / 2);
    assert!(s.arena.bytes() <= limit, "{}", s.arena.bytes());
    // Readers holding items whose entries are then evicted keep their
    // blocks: new items need room beyond the budget's share (more than
    // the slack between blocks and what each entry is charged).
    let held: Vec<Item> = (n - n / 10..n)
        .filter_map(|i| read(&mut s, &key(i)))
        .collect();
    assert!(held.len() > n / 10 * 9 / 10);
    for i in n..2 * n {
        set(&mut s, &key(i), &[b'w'; 100]);
    }
    assert!(s.arena.bytes() > limit && s.arena.bytes() <= arena_bytes(limit));
    assert!(held.iter().all(|it| it.value() == [b'v'; 100]));
    assert!(s.used <= s.limit);
}

#[test]
fn a_value_of_the_same_size_is_written_over_its_block_unless_held() {
    for kind in EvictionKind::ALL {
        let mut s = shard(kind);
        set(&mut s, b"k", &[1; 100]);
        let h = hash(&s, b"k");
        let off = s.find(h, b"k").unwrap();
        set(&mut s, b"k", &[2; 100]);
        assert_eq!(s.find(h, b"k"), Some(off), "{kind}: written in place");
        let held = read(&mut s, b"k").unwrap();
        set(&mut s, b"k", &[3; 100]);
        let moved = s.find(h, b"k").unwrap();
        assert_ne!(moved, off, "{kind}: a held block is not written over");
        assert_eq!(held.value(), &[2; 100][..]);
        let now = s.get(h, b"k", &GetOptions::default(), 0).unwrap();
        assert_eq!(now.item.value(), &[3; 100][..]);
        assert_eq!(s.len(), 1);
    }
}

#[test]
fn replacing_a_value_keeps_one_block() {
    for kind in EvictionKind::ALL {
        let mut s = shard(kind);
        for round in 0..50u8 {
            set(&mut s, b"k", &vec![round; 10 + round as usize * 7]);
        }
        let h = hash(&s, b"k");
        let off = s.find(h, b"k").unwrap();
        assert_eq!(s.arena_used(), s.arena.units(off) as usize * UNIT, "{kind}");
        assert_eq!(s.used, s.charge(s.arena.units(off)), "{kind}");
        s.clear();
        assert_eq!((s.arena_used(), s.used, s.len()), (0, 0, 0), "{kind}");
    }
}

#[test]
fn a_flushed_shard_refills_in_the_blocks_it_had() {
    // Half the budget: the arena has grown just enough for the entries, so
    // the refill would grow it again if it did not reuse the flushed
    // entries' blocks first.
    for kind in EvictionKind::ALL {
        let limit = crate::testing::size(4 << 20, 1 << 16);
        let mut s = shard_of(kind, limit);
        let key = |i: usize| format!("key:{i:06}").into_bytes();
        let mut i = 0;
        while s.used < limit / 2 {
            set(&mut s, &key(i), &[b'v'; 100]);
            i += 1;
        }
        let arena = s.arena.bytes();
        s.flush();
        assert_eq!(s.len(), i, "{kind}: flushed entries count until reclaimed");
        for k in 0..i {
            set(&mut s, &key(k), &[b'w'; 100]);
        }
        assert_eq!(s.arena.bytes(), arena, "{kind}: the arena grew");
        assert_eq!(s.stats.evictions, 0, "{kind}");
        // The reaper reclaims the rest.
        for _ in 0..i {
            if !s.has_flushed() {
                break;
            }
            s.reap(0, 256);
        }
        assert_eq!(s.len(), i, "{kind}");
        assert_eq!(s.stats.reclaimed, i as u64, "{kind}");
    }
}

#[test]
fn a_lookup_that_meets_a_flushed_entry_lets_it_go_once() {
    for kind in EvictionKind::ALL {
        let mut s = shard_of(kind, 4 << 20);
        let key = |i: usize| format!("key:{i:06}").into_bytes();
        let n = crate::testing::size(2_000, 300);
        for i in 0..n {
            set(&mut s, &key(i), &[b'v'; 100]);
        }
        // A handle held across the flush stays valid after its entry goes.
        let held = read(&mut s, &key(7)).unwrap();
        s.flush();
        let used = s.used;
        assert!(read(&mut s, &key(7)).is_none(), "{kind}");
        assert_eq!(s.stats.get_flushed, 1, "{kind}");
        assert!(s.used < used, "{kind}: its memory is let go");
        assert_eq!(s.len(), n - 1, "{kind}");
        // Met again: a plain miss.
        assert!(read(&mut s, &key(7)).is_none(), "{kind}");
        assert_eq!(s.stats.get_flushed, 1, "{kind}");
        assert_eq!(held.value(), &[b'v'; 100][..], "{kind}");
        // A store does not count (memcached's storage commands do not).
        set(&mut s, &key(8), b"new");
        assert_eq!(s.stats.get_flushed, 1, "{kind}");
        // The walk that reclaims the rest never meets the one let go.
        for _ in 0..n {
            if !s.has_flushed() {
                break;
            }
            s.reap(0, 256);
        }
        assert!(!s.has_flushed(), "{kind}");
        assert_eq!(s.stats.reclaimed, (n - 1) as u64, "{kind}");
        assert_eq!(s.len(), 1, "{kind}");
        assert_eq!(read(&mut s, &key(8)).unwrap().value(), b"new", "{kind}");
    }
}
