//! `flush_all` drops every entry at once without touching them: flushed
//! entries are dead to every operation from that moment, entries stored
//! after it live, and the flushed entries' memory comes back (to the reaper,
//! or to stores making room) before any live entry is evicted for room.
//! Each test runs on many shards and under every eviction policy.

use kura_store::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, EvictionKind, Expiry, GetOptions,
    SetMode, SetOutcome, SetRequest, Store, StoreConfig,
};

fn store(eviction: EvictionKind, capacity: usize, evict: bool) -> Store {
    Store::new(StoreConfig {
        shards: 16,
        eviction,
        evict,
        ..StoreConfig::with_capacity(capacity)
    })
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}:{i:06}").into_bytes()
}

fn set(s: &Store, k: &[u8], value: &[u8]) -> SetOutcome {
    s.set(&SetRequest::new(k, value))
}

/// Every way an operation could see `k` finds nothing (without changing
/// anything a later check depends on: a miss creates nothing).
fn gone(s: &Store, k: &[u8]) -> Result<(), String> {
    let says = |what: &str| Err(format!("{}: {what}", String::from_utf8_lossy(k)));
    if s.get(k).is_some() || s.contains(k) {
        return says("read");
    }
    let peek = GetOptions {
        no_bump: true,
        stale_token: true,
        recache: Some(Expiry::In(1000)),
        ..Default::default()
    };
    if s.get_with(k, &peek).is_some() || s.touch(k, Expiry::In(100)) {
        return says("meta read or touch");
    }
    if s.arith(k, &ArithRequest::new(true, 1)) != ArithOutcome::NotFound {
        return says("incr");
    }
    for mode in [SetMode::Append, SetMode::Prepend, SetMode::Replace] {
        let req = SetRequest {
            mode,
            ..SetRequest::new(k, b"x")
        };
        if s.set(&req) != SetOutcome::NotStored {
            return says("append, prepend or replace");
        }
    }
    let cas = SetRequest {
        cas: Some(1),
        ..SetRequest::new(k, b"x")
    };
    if s.set(&cas) != SetOutcome::NotFound {
        return says("cas");
    }
    if s.delete_with(k, &DeleteRequest::default()) != DeleteOutcome::NotFound {
        return says("delete");
    }
    Ok(())
}

#[test]
fn entries_stored_before_a_flush_are_never_returned_after_it() {
    for eviction in EvictionKind::ALL {
        let s = store(eviction, 64 << 20, true);
        let n = 4000;
        let mut before_cas = Vec::new();
        for i in 0..n {
            let SetOutcome::Stored { cas } = set(&s, &key("k", i), b"old") else {
                panic!("{eviction}: not stored");
            };
            before_cas.push(cas);
        }
        // Entries in every state memcached has: fetched, invalidated
        // (stale, its token out), touched, counters, held by a reader.
        let held = s.get(&key("k", 0)).expect("stored");
        let invalidate = DeleteRequest {
            invalidate: true,
            ..Default::default()
        };
        assert_eq!(
            s.delete_with(&key("k", 1), &invalidate),
            DeleteOutcome::Deleted
        );
        let meta = GetOptions {
            stale_token: true,
            ..Default::default()
        };
        assert!(s.get_with(&key("k", 1), &meta).expect("stale").won);
        assert!(s.touch(&key("k", 2), Expiry::In(1000)));
        set(&s, &key("k", 3), b"41");
        s.flush(None);
        // As in memcached, flushed entries count until they are reclaimed.
        assert_eq!(s.stats().curr_items, n as u64, "{eviction}");
        // Half of the keys are stored again after the flush.
        let mut after_cas = Vec::new();
        for i in (0..n).step_by(2) {
            let SetOutcome::Stored { cas } = set(&s, &key("k", i), b"new") else {
                panic!("{eviction}: not stored after the flush");
            };
            after_cas.push(cas);
        }
        // Checked with the flushed entries there, then reclaimed.
        for reclaimed in [false, true] {
            if reclaimed {
                s.reap(64);
            }
            for i in 0..n {
                let k = key("k", i);
                if i % 2 == 0 {
                    let hit = s.get(&k).unwrap_or_else(|| panic!("{eviction}: lost {i}"));
                    assert_eq!(hit.value(), b"new", "{eviction}: {i}");
                } else if let Err(e) = gone(&s, &k) {
                    panic!("{eviction} (reclaimed: {reclaimed}): a flushed entry was seen by {e}");
                }
            }
        }
        assert_eq!(
            s.len(),
            n / 2,
            "{eviction}: the flushed entries were reclaimed"
        );
        assert_eq!(s.stats().curr_items, (n / 2) as u64);
        assert_eq!(
            held.value(),
            b"old",
            "{eviction}: a reader's handle outlives the flush"
        );
        // CAS uniques stay unique across the flush.
        let mut all = before_cas;
        all.extend(after_cas);
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "{eviction}: a CAS unique came back");
        // The vivified entry after a flush is new and wins its token.
        let vivify = GetOptions {
            vivify: Some(Expiry::In(30)),
            stale_token: true,
            ..Default::default()
        };
        let hit = s.get_with(&key("k", 1), &vivify).expect("vivified");
        assert!(hit.created && hit.won && !hit.stale, "{eviction}: {hit:?}");
        // An add of a flushed key stores.
        let k3 = key("k", 3);
        let add = SetRequest {
            mode: SetMode::Add,
            ..SetRequest::new(&k3, b"added")
        };
        assert!(
            matches!(s.set(&add), SetOutcome::Stored { .. }),
            "{eviction}"
        );
    }
}

#[test]
fn flushes_in_a_row_and_the_reaper_between_them_lose_nothing_stored_after() {
    for eviction in EvictionKind::ALL {
        let s = store(eviction, 64 << 20, true);
        for round in 0..6 {
            for i in 0..1500 {
                set(&s, &key(&format!("r{round}"), i), b"v");
            }
            s.flush(None);
            // Some rounds leave the flushed entries unreclaimed, some not.
            if round % 3 == 1 {
                s.reap(32);
            }
            for i in 0..100 {
                set(&s, &key("live", i), &[round as u8]);
            }
        }
        s.reap(usize::MAX);
        assert_eq!(s.len(), 100, "{eviction}");
        for i in 0..100 {
            assert_eq!(
                s.get(&key("live", i)).expect("live").value(),
                [5],
                "{eviction}"
            );
        }
    }
}

/// Fills `s` with `prefix` keys of `value_len` bytes until the first
/// eviction; returns how many went in before it.
fn fill_until_an_eviction(s: &Store, prefix: &str, value_len: usize) -> usize {
    let value = vec![b'v'; value_len];
    for i in 0..1_000_000 {
        set(s, &key(prefix, i), &value);
        if s.stats().evictions > 0 {
            return i;
        }
    }
    panic!("never full");
}

#[test]
fn a_flushed_store_fills_again_without_evicting_a_live_entry() {
    for eviction in EvictionKind::ALL {
        // The same keys and sizes fit as before the flush, with no reaper:
        // the stores reclaim the flushed entries, not the new ones.
        let s = store(eviction, 4 << 20, true);
        let fit = fill_until_an_eviction(&s, "old", 200);
        s.flush(None);
        let value = vec![b'n'; 200];
        for i in 0..fit {
            set(&s, &key("old", i), &value);
        }
        let st = s.stats();
        assert_eq!(st.evictions, 1, "{eviction}: a live entry was evicted");
        assert!(st.reclaimed >= fit as u64 / 2, "{eviction}: {st:?}");
        for i in 0..fit {
            assert_eq!(s.get(&key("old", i)).expect("stored").value(), &value[..]);
        }

        // Other keys, half as many: the flushed entries, some of them
        // reclaimed, stay out of sight.
        let s = store(eviction, 4 << 20, true);
        let fit = fill_until_an_eviction(&s, "old", 200);
        s.flush(None);
        for i in 0..fit / 2 {
            set(&s, &key("new", i), &value);
        }
        let st = s.stats();
        assert_eq!(st.evictions, 1, "{eviction}: a live entry was evicted");
        assert!(st.reclaimed > 0 && s.len() > fit / 2, "{eviction}: {st:?}");
        for i in 0..fit {
            if let Err(e) = gone(&s, &key("old", i)) {
                panic!("{eviction}: a flushed entry was seen by {e}");
            }
        }
        for i in 0..fit / 2 {
            assert!(s.get(&key("new", i)).is_some(), "{eviction}: {i} gone");
        }
    }
}

#[test]
fn a_flushed_store_without_eviction_takes_new_entries_of_any_size() {
    // `-M`: a store that does not fit fails instead of evicting, so room
    // can only come from the flushed entries. Large values after small
    // ones: room made of the small blocks the flush left scattered.
    for eviction in EvictionKind::ALL {
        // One shard: the hash seed is random, and across 16 shards of
        // 256 KiB the large values would not land evenly enough to fit.
        let s = Store::new(StoreConfig {
            shards: 1,
            eviction,
            evict: false,
            ..StoreConfig::with_capacity(4 << 20)
        });
        let small = vec![b's'; 100];
        let mut stored = 0;
        while set(&s, &key("small", stored), &small) != SetOutcome::NoMemory {
            stored += 1;
            assert!(stored < 1_000_000, "never full");
        }
        s.flush(None);
        let large = vec![b'L'; 50_000];
        let fit = stored * 100 / 50_000 / 2;
        for i in 0..fit {
            let got = set(&s, &key("large", i), &large);
            assert!(
                matches!(got, SetOutcome::Stored { .. }),
                "{eviction}: large {i} of {fit}: {got:?}"
            );
        }
        for i in 0..fit {
            assert_eq!(s.get(&key("large", i)).expect("stored").value(), &large[..]);
        }
        s.reap(usize::MAX);
        assert_eq!(s.len(), fit, "{eviction}");
    }
}
