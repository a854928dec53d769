//! The near cache in front of Redis: reads are served in process after the
//! first, another client's write drops the entry through Redis's
//! invalidation push, a flush empties it, and a dropped connection empties
//! it and stops its use. Against Debian's redis-server on loopback
//! (skipped when absent, a failure under CI).
#![cfg(feature = "redis")]

mod support;

use std::time::Duration;

use kura_client::{NearConfig, RedisNear};
use support::redis_server;

fn near() -> NearConfig {
    NearConfig::new(8 << 20, Duration::from_secs(3600))
}

async fn plain(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).expect("url");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// Waits (bounded) until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not within 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_write_invalidates_the_near_entry() {
    let Some(server) = redis_server() else { return };
    let url = format!("redis://{}", server.addr());
    let c = RedisNear::connect(&url, near()).await.expect("connect");
    let mut other = plain(&url).await;

    c.set("k", "v1", None).await.unwrap();
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(c.near_hits(), 1, "the second read is served in process");

    let before = c.invalidations();
    redis::cmd("SET")
        .arg("k")
        .arg("v2")
        .query_async::<()>(&mut other)
        .await
        .unwrap();
    eventually("the invalidation", || c.invalidations() > before).await;
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v2"[..]));
    assert_eq!(c.near_hits(), 1, "the stale entry was not served");

    // a delete by another client, and a flush
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v2"[..]));
    redis::cmd("DEL")
        .arg("k")
        .query_async::<()>(&mut other)
        .await
        .unwrap();
    eventually("the delete's invalidation", || {
        c.invalidations() > before + 1
    })
    .await;
    assert_eq!(c.get("k").await.unwrap(), None);
    c.set("f", "x", Some(60)).await.unwrap();
    assert!(c.get("f").await.unwrap().is_some());
    let n = c.invalidations();
    redis::cmd("FLUSHALL")
        .query_async::<()>(&mut other)
        .await
        .unwrap();
    eventually("the flush's invalidation", || c.invalidations() > n).await;
    assert_eq!(c.get("f").await.unwrap(), None);
    assert!(!c.delete("f").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_empties_the_near_cache() {
    let Some(server) = redis_server() else { return };
    let url = format!("redis://{}", server.addr());
    let c = RedisNear::connect(&url, near()).await.expect("connect");
    c.set("k", "v", None).await.unwrap();
    assert!(c.get("k").await.unwrap().is_some());
    assert!(c.get("k").await.unwrap().is_some());
    assert_eq!(c.near_hits(), 1);
    let id = c.client_id().await.unwrap();
    let mut other = plain(&url).await;
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async::<()>(&mut other)
        .await
        .unwrap();
    eventually("the disconnection", || !c.is_coherent()).await;
    // no stale answer from the near cache: an error instead
    assert!(c.get("k").await.is_err());
    assert_eq!(c.near_hits(), 1);
}
