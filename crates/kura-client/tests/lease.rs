//! Stampede protection against kura and memcached: of many concurrent
//! callers of `get_or_fill` on a missing key only one computes; after
//! `invalidate`, one caller recomputes while another is served the stale
//! value; an item about to expire is recomputed early by one reader
//! (recache); text and binary modes refuse leases.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kura_client::{Client, Error, FillOptions, Origin, Protocol};
use support::{addrs, servers};

async fn one_fill_for_many_callers(c: &Client) {
    let fills = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (c, fills) = (c.clone(), fills.clone());
        tasks.push(tokio::spawn(async move {
            c.get_or_fill("hot", 60, || async {
                fills.fetch_add(1, Ordering::SeqCst);
                // the expensive query
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<_, Error>(Bytes::from_static(b"computed"))
            })
            .await
        }));
    }
    let mut origins = Vec::new();
    for t in tasks {
        let f = t.await.expect("task").expect("get_or_fill");
        assert_eq!(&f.value.data[..], b"computed");
        origins.push(f.origin);
    }
    assert_eq!(fills.load(Ordering::SeqCst), 1, "{origins:?}");
    assert_eq!(origins.iter().filter(|o| **o == Origin::Filled).count(), 1);
    // stored for everyone afterwards
    assert_eq!(&c.get("hot").await.unwrap().unwrap().data[..], b"computed");
    let again = c.get_or_fill("hot", 60, || async { Err::<Bytes, _>("not called") });
    assert_eq!(again.await.unwrap().origin, Origin::Hit);
}

async fn stale_while_recomputing(c: &Client) {
    c.set("page", "old", 0).await.unwrap();
    assert!(c.invalidate("page", 30).await.unwrap());
    assert!(!c.invalidate("absent", 30).await.unwrap());
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let (filling, started) = tokio::sync::oneshot::channel::<()>();
    let winner = {
        let c = c.clone();
        tokio::spawn(async move {
            c.get_or_fill("page", 60, || async {
                let _ = filling.send(());
                let _ = wait.await;
                Ok::<_, Error>(Bytes::from_static(b"new"))
            })
            .await
        })
    };
    started
        .await
        .expect("the first caller wins the recache lease");
    let stale = c
        .get_or_fill("page", 60, || async {
            Err::<Bytes, _>("the loser must not fill")
        })
        .await
        .unwrap();
    assert_eq!(stale.origin, Origin::Stale);
    assert_eq!(&stale.value.data[..], b"old");
    let _ = release.send(());
    let w = winner.await.unwrap().unwrap();
    assert_eq!(w.origin, Origin::Filled);
    assert_eq!(&c.get("page").await.unwrap().unwrap().data[..], b"new");
}

/// An item about to expire hands one reader the win token early (meta
/// `R`): it recomputes while the others are served the current value.
async fn recache_before_expiry(c: &Client) {
    c.set("soon", "current", 5).await.unwrap();
    let opts = FillOptions {
        set: 600.into(),
        recache: 30,
    };
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let (filling, started) = tokio::sync::oneshot::channel::<()>();
    let winner = {
        let c = c.clone();
        tokio::spawn(async move {
            c.get_or_fill("soon", opts, || async {
                let _ = filling.send(());
                let _ = wait.await;
                Ok::<_, Error>(Bytes::from_static(b"renewed"))
            })
            .await
        })
    };
    started
        .await
        .expect("the first reader wins the recache token");
    let other = c
        .get_or_fill("soon", opts, || async {
            Err::<Bytes, _>("only one recomputes")
        })
        .await
        .unwrap();
    assert_eq!(other.origin, Origin::Hit);
    assert_eq!(&other.value.data[..], b"current");
    let _ = release.send(());
    assert_eq!(winner.await.unwrap().unwrap().origin, Origin::Filled);
    assert_eq!(&c.get("soon").await.unwrap().unwrap().data[..], b"renewed");
}

async fn fill_errors_are_returned(c: &Client) {
    let r = c
        .get_or_fill("broken", 60, || async { Err::<Bytes, _>("database down") })
        .await;
    assert!(
        matches!(&r, Err(Error::Server(m)) if m.contains("database down")),
        "{r:?}"
    );
}

async fn suite(memcached: bool) {
    let Some(procs) = servers(memcached, 2) else {
        return;
    };
    let c = Client::builder(addrs(&procs))
        .configure(|c| c.lease_wait = Duration::from_secs(10))
        .build()
        .unwrap();
    one_fill_for_many_callers(&c).await;
    stale_while_recomputing(&c).await;
    recache_before_expiry(&c).await;
    fill_errors_are_returned(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_kura() {
    suite(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_memcached() {
    suite(true).await;
}

#[tokio::test]
async fn text_and_binary_have_no_leases() {
    let procs = servers(false, 1).unwrap();
    for protocol in [Protocol::Text, Protocol::Binary] {
        let c = Client::builder(addrs(&procs))
            .protocol(protocol)
            .build()
            .unwrap();
        let r = c
            .get_or_fill("k", 60, || async { Ok::<_, Error>(Bytes::new()) })
            .await;
        assert!(matches!(r, Err(Error::NeedsMeta(_))), "{protocol:?}");
        assert!(matches!(
            c.invalidate("k", 5).await,
            Err(Error::NeedsMeta(_))
        ));
    }
}
