//! Values are handed out without copying, and a value a reader holds stays
//! valid and unchanged whatever happens to its key afterwards: overwrite,
//! delete, eviction, expiry, flush, or the store going away.

use kura_store::{EvictionKind, Expiry, Item, SetRequest, Store, StoreConfig};

fn store() -> Store {
    Store::new(StoreConfig {
        shards: 1,
        ..StoreConfig::with_capacity(1 << 20)
    })
}

/// A value whose bytes are easy to recognise.
fn pattern(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag ^ (i % 251) as u8).collect()
}

fn held(store: &Store, key: &[u8], value: &[u8]) -> Item {
    store.insert(key, value, Expiry::Never);
    store.get(key).expect("just stored")
}

#[test]
fn reads_share_one_allocation() {
    let store = store();
    store.insert(b"k", &pattern(1, 4096), Expiry::Never);
    let a = store.get(b"k").unwrap();
    let b = store.get(b"k").unwrap();
    assert_eq!(a.value().as_ptr(), b.value().as_ptr());
    let bytes = a.value_bytes();
    assert_eq!(bytes.as_ptr(), a.value().as_ptr());
}

/// A block counts its handles in 16 bits (as memcached); past that they
/// are counted aside, still without copies, and the block is rewritten in
/// place again once they are gone.
#[test]
fn a_value_held_by_more_readers_than_sixteen_bits_count_is_still_shared() {
    let store = store();
    let value = pattern(3, 100);
    store.insert(b"hot", &value, Expiry::Never);
    let shared = store.get(b"hot").unwrap().value().as_ptr();
    let readers: Vec<Item> = (0..70_000).map(|_| store.get(b"hot").unwrap()).collect();
    assert!(readers
        .iter()
        .all(|r| r.value().as_ptr() == shared && r.key() == b"hot"));
    // While the block is held a set of the same size goes to a new block.
    store.insert(b"hot", &pattern(4, 100), Expiry::Never);
    let now = store.get(b"hot").unwrap().value().as_ptr();
    assert_ne!(now, shared);
    assert!(readers.iter().all(|r| r.value() == &value[..]));
    drop(readers);
    // With no reader left, the current block is rewritten in place.
    store.insert(b"hot", &pattern(5, 100), Expiry::Never);
    let after = store.get(b"hot").unwrap();
    assert_eq!(
        (after.value().as_ptr(), after.value()),
        (now, &pattern(5, 100)[..])
    );
}

#[test]
fn survives_an_overwrite() {
    let store = store();
    let old = pattern(1, 1000);
    let item = held(&store, b"k", &old);
    store.insert(b"k", &pattern(2, 1000), Expiry::Never);
    store.set(&SetRequest {
        mode: kura_store::SetMode::Append,
        ..SetRequest::new(b"k", b"tail")
    });
    assert_eq!(item.value(), &old[..]);
    assert_eq!(item.key(), b"k");
    let now = store.get(b"k").unwrap();
    assert_ne!(now.value().as_ptr(), item.value().as_ptr());
    assert!(now.value().ends_with(b"tail"));
}

#[test]
fn survives_a_counter_update() {
    let store = store();
    let item = held(&store, b"n", b"41");
    store.arith(b"n", &kura_store::ArithRequest::new(true, 1));
    assert_eq!(item.value(), b"41");
    assert_eq!(store.get(b"n").unwrap().value(), b"42");
}

#[test]
fn survives_a_delete() {
    let store = store();
    let old = pattern(3, 5000);
    let item = held(&store, b"k", &old);
    let bytes = item.value_bytes();
    assert!(store.delete(b"k"));
    assert!(store.get(b"k").is_none());
    assert_eq!(item.value(), &old[..]);
    assert_eq!(&bytes[..], &old[..]);
}

#[test]
fn survives_eviction() {
    for eviction in EvictionKind::ALL {
        let store = Store::new(StoreConfig {
            shards: 1,
            eviction,
            ..StoreConfig::with_capacity(16 * 1024)
        });
        let old = pattern(4, 2000);
        let item = held(&store, b"first", &old);
        let mut n = 0;
        while store.contains(b"first") {
            let filler = format!("filler:{n}");
            store.insert(filler.as_bytes(), &pattern(5, 2000), Expiry::Never);
            // Popular fillers, so that a frequency-based policy lets them in.
            store.get(filler.as_bytes());
            store.get(filler.as_bytes());
            n += 1;
            assert!(n < 1000, "{eviction}: the first item is never evicted");
        }
        assert!(store.stats().evictions > 0);
        assert_eq!(item.value(), &old[..]);
    }
}

#[test]
fn survives_expiry() {
    let store = store();
    let old = pattern(6, 300);
    store.insert(b"k", &old, Expiry::In(10));
    let item = store.get(b"k").unwrap();
    store.clock().advance(10);
    assert!(store.get(b"k").is_none());
    store.reap(1);
    assert_eq!(store.len(), 0);
    assert_eq!(item.value(), &old[..]);
}

#[test]
fn survives_a_flush() {
    let store = store();
    let old = pattern(7, 300);
    let item = held(&store, b"k", &old);
    store.flush(None);
    assert!(store.get(b"k").is_none());
    assert_eq!(item.value(), &old[..]);
    // The flushed entry's block is reclaimed later; the handle keeps it.
    store.reap(usize::MAX);
    assert!(store.is_empty());
    assert_eq!(item.value(), &old[..]);
}

#[test]
fn value_bytes_outlive_the_store() {
    let store = store();
    let old = pattern(8, 10_000);
    store.insert(b"k", &old, Expiry::Never);
    let bytes = store.get(b"k").unwrap().value_bytes();
    let item = store.get(b"k").unwrap();
    drop(store);
    assert_eq!(&bytes[..], &old[..]);
    assert_eq!(item.value(), &old[..]);
    drop(item);
    assert_eq!(&bytes[..], &old[..]);
}

#[test]
fn items_move_between_threads_after_the_store_is_gone() {
    let store = std::sync::Arc::new(store());
    store.insert(b"k", b"shared", Expiry::Never);
    let item = store.get(b"k").unwrap();
    drop(store);
    let seen = std::thread::spawn(move || item.value().to_vec())
        .join()
        .unwrap();
    assert_eq!(seen, b"shared");
}
