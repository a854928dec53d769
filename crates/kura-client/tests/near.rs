//! The near cache: hits served in process (even with the server gone),
//! this client's writes drop the key at once, another client's writes are
//! seen once the near TTL has passed (TTL-bounded coherence only).

mod support;

use std::time::Duration;

use kura_client::{Client, NearConfig};
use support::{addrs, kura, servers};

#[tokio::test]
async fn near_cache_serves_hits_and_drops_written_keys() {
    let mut server = kura();
    let near = Client::builder([server.addr()])
        .near_cache(NearConfig::new(8 << 20, Duration::from_secs(1)))
        .build()
        .unwrap();
    let other = Client::builder([server.addr()]).build().unwrap();

    assert!(other.set("k", "v1", 0).await.unwrap());
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v1");
    // another client's write: still v1 here until the TTL passes
    assert!(other.set("k", "v2", 0).await.unwrap());
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v1");
    // this client's write drops the entry at once
    assert!(near.set("k", "v3", 0).await.unwrap());
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v3");
    // get_multi fills and reads it too
    assert!(other.set("m", "w1", 0).await.unwrap());
    let got = near.get_multi(&["k", "m", "absent"]).await;
    assert_eq!(&got[1].as_ref().unwrap().as_ref().unwrap().data[..], b"w1");
    assert!(matches!(got[2], Ok(None)));
    // after the TTL (whole seconds, so up to 2 s), the server's value
    assert!(other.set("k", "v4", 0).await.unwrap());
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v4");
    // a hit needs no server at all
    server.kill();
    assert_eq!(&near.get("k").await.unwrap().unwrap().data[..], b"v4");
    near.delete("k").await.unwrap_err();
    assert!(
        near.get("k").await.is_err(),
        "a failed delete still drops the entry"
    );
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
