//! The near cache: hits served in process, this client's writes drop the
//! key at once; in front of kura another client's writes and flushes drop
//! it too (the `mt` subscription), and a dropped connection empties it; in
//! front of memcached it is bounded by its TTL only.

mod support;

use std::time::{Duration, Instant};

use kura_client::{Client, NearConfig, Protocol};
use support::{addrs, kura, memcached, servers};

/// Polls `read` until it gives `want`; false after 5 s.
async fn becomes<F, Fut>(want: Option<&[u8]>, mut read: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kura_client::Result<Option<kura_client::Value>>>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(v) = read().await {
            if v.as_ref().map(|v| &v.data[..]) == want {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}

/// `flush_all` through the text protocol (the client has no flush).
async fn flush_all(addr: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"flush_all\r\n").await.unwrap();
    let mut ok = [0u8; 4];
    s.read_exact(&mut ok).await.unwrap();
    assert_eq!(&ok, b"OK\r\n");
}

#[tokio::test]
async fn another_clients_writes_drop_near_entries_in_front_of_kura() {
    let server = kura();
    for protocol in [Protocol::Meta, Protocol::Text] {
        let near = Client::builder([server.addr()])
            .protocol(protocol)
            // A long TTL: only invalidations can make a write seen here.
            .near_cache(NearConfig::new(8 << 20, Duration::from_secs(3600)))
            .build()
            .unwrap();
        let other = Client::builder([server.addr()]).build().unwrap();
        assert!(other.set("k", "v1", 0).await.unwrap());
        assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v1");
        assert!(other.set("k", "v2", 0).await.unwrap());
        assert!(becomes(Some(b"v2"), || near.get("k")).await, "{protocol:?}");
        assert!(near.near_invalidations() >= 1);
        // A delete, an incr, a flush.
        assert!(other.delete("k").await.unwrap());
        assert!(becomes(None, || near.get("k")).await);
        assert!(other.set("n", "1", 0).await.unwrap());
        assert_eq!(&near.get("n").await.unwrap().unwrap().data[..], b"1");
        other.incr("n", 5).await.unwrap();
        assert!(becomes(Some(b"6"), || near.get("n")).await);
        assert!(other.set("m", "w1", 0).await.unwrap());
        let got = near.get_multi(&["n", "m", "absent"]).await;
        assert_eq!(&got[1].as_ref().unwrap().as_ref().unwrap().data[..], b"w1");
        assert!(matches!(got[2], Ok(None)));
        let before = near.near_invalidations();
        flush_all(&server.addr()).await;
        assert!(becomes(None, || near.get("m")).await);
        assert!(near.near_invalidations() > before);
        // This client's own write drops the entry at once.
        assert!(near.set("k", "v3", 0).await.unwrap());
        assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v3");
    }
}

#[tokio::test]
async fn a_dropped_subscription_empties_the_near_cache() {
    let mut server = kura();
    let near = Client::builder([server.addr()])
        .near_cache(NearConfig::new(8 << 20, Duration::from_secs(3600)))
        .configure(|c| c.connections_per_server = 1)
        .build()
        .unwrap();
    assert!(near.set("k", "v", 0).await.unwrap());
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v");
    server.kill();
    // Invalidations can no longer arrive: the near copy goes with the
    // connection, and reads fail instead of serving what may be stale.
    let deadline = Instant::now() + Duration::from_secs(5);
    while near.get("k").await.is_ok() {
        assert!(Instant::now() < deadline, "the near cache still serves k");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn near_cache_over_memcached() {
    let Some(procs) = servers(true, 2) else {
        return;
    };
    let c = Client::builder(addrs(&procs))
        .near_cache(NearConfig::new(8 << 20, Duration::from_secs(30)))
        .build()
        .unwrap();
    let items: Vec<(String, String)> = (0..100)
        .map(|i| (format!("n{i}"), format!("v{i}")))
        .collect();
    assert!(c
        .set_multi(&items, 0)
        .await
        .iter()
        .all(|r| matches!(r, Ok(true))));
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    let first = c.get_multi(&keys).await;
    let second = c.get_multi(&keys).await;
    for ((_, v), (a, b)) in items.iter().zip(first.iter().zip(&second)) {
        assert_eq!(a.as_ref().unwrap().as_ref().unwrap().data, v.as_bytes());
        assert_eq!(b.as_ref().unwrap().as_ref().unwrap().data, v.as_bytes());
    }
    // the near copy keeps the server's CAS unique, so cas works from it
    let v = c.get("n1").await.unwrap().unwrap();
    assert_eq!(
        c.cas("n1", "new", v.cas, 0).await.unwrap(),
        kura_client::StoreStatus::Stored
    );
    assert_eq!(&c.get("n1").await.unwrap().unwrap().data[..], b"new");
}

/// memcached refuses `mt`: the near cache is bounded by its TTL only, and
/// a hit needs no server at all.
#[tokio::test]
async fn in_front_of_memcached_the_near_cache_is_ttl_bounded() {
    let Some(mut server) = memcached() else {
        return;
    };
    let near = Client::builder([server.addr()])
        .near_cache(NearConfig::new(8 << 20, Duration::from_secs(3)))
        .build()
        .unwrap();
    // (The store's clock counts whole seconds: a 3-s entry lives 2 to 3 s,
    // ample for the reads right after each fill below; a 1-s one could be
    // gone a millisecond after its fill.)
    let other = Client::builder([server.addr()]).build().unwrap();
    assert!(other.set("k", "v1", 0).await.unwrap());
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v1");
    // another client's write: still v1 here until the TTL passes
    assert!(other.set("k", "v2", 0).await.unwrap());
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v1");
    assert_eq!(near.near_invalidations(), 0);
    // after the TTL (whole seconds, so up to 4 s), the server's value
    tokio::time::sleep(Duration::from_millis(4100)).await;
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v2");
    server.kill();
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v2");
    near.delete("k").await.unwrap_err();
    assert!(
        near.get("k").await.is_err(),
        "a failed delete still drops the entry"
    );
}

/// Once `near_invalidations()` has risen, the entry is gone: a reader that
/// polls the count and then reads gets the new value, never the old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invalidation_count_rises_after_the_entry_is_dropped() {
    let server = kura();
    let near = Client::builder([server.addr()])
        .near_cache(NearConfig::new(8 << 20, Duration::from_secs(3600)))
        .build()
        .unwrap();
    let other = Client::builder([server.addr()]).build().unwrap();
    for round in 0..50u32 {
        let old = format!("old{round}");
        let new = format!("new{round}");
        assert!(other.set("k", &old, 0).await.unwrap());
        assert!(becomes(Some(old.as_bytes()), || near.get("k")).await);
        let seen = near.near_invalidations();
        assert!(other.set("k", &new, 0).await.unwrap());
        // Spin on the count alone (no sleep between it and the read).
        let mut spins = 0u64;
        while near.near_invalidations() == seen {
            spins += 1;
            assert!(spins < 2_000_000_000, "no invalidation heard");
            std::hint::spin_loop();
        }
        let got = near.get("k").await.unwrap().unwrap();
        assert_ne!(
            &got.data[..],
            old.as_bytes(),
            "round {round}: old value after the count rose"
        );
    }
}

/// A loop of near-cache hits on a current-thread runtime, which never
/// awaits the network: the connection task that applies invalidations
/// still runs (the hits spend tokio's cooperative budget), so another
/// client's write, made from another thread while the loop runs, is seen.
#[test]
fn a_hit_loop_on_a_current_thread_runtime_still_hears_invalidations() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = kura();
    let addr = server.addr();
    let looping = Arc::new(AtomicBool::new(false));
    let writer = {
        let looping = looping.clone();
        let addr = addr.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            while !looping.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            rt.block_on(async {
                let other = Client::builder([addr]).build().unwrap();
                assert!(other.set("k", "v2", 0).await.unwrap());
            });
        })
    };
    rt.block_on(async {
        let near = Client::builder([addr.clone()])
            .near_cache(NearConfig::new(8 << 20, Duration::from_secs(3600)))
            .build()
            .unwrap();
        let other = Client::builder([addr]).build().unwrap();
        assert!(other.set("k", "v1", 0).await.unwrap());
        assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v1");
        // Bounded by a count, not a clock: without the budget this loop
        // spins through all of it on v1.
        let mut hits = 0u64;
        loop {
            let v = near.get("k").await.unwrap().unwrap();
            if &v.data[..] == b"v2" {
                break;
            }
            hits += 1;
            if hits == 1000 {
                looping.store(true, Ordering::Release);
            }
            assert!(hits < 20_000_000, "the invalidation was never applied");
        }
        println!("v2 seen after {hits} near hits");
    });
    writer.join().unwrap();
}
