//! Grace, stale-while-revalidate, stale-if-error, a stopped backend, health probes.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;

const NO_DELAY: Duration = Duration::ZERO;

/// A backend numbering its responses: version N in the body.
async fn versioned(cache_control: &'static str) -> (Backend, Arc<AtomicUsize>) {
    let version = Arc::new(AtomicUsize::new(0));
    let v = version.clone();
    let backend = Backend::start(NO_DELAY, move |_| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        reply(200, &[("cache-control", cache_control)], &format!("v{n}"))
    })
    .await;
    (backend, version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grace_serves_stale_and_refreshes_in_the_background() {
    // Four seconds: the refreshed copy must still be fresh when it is asked for (`Date` has
    // whole seconds, so a response may arrive up to a second old: three are left).
    let (backend, _) = versioned("max-age=4").await;
    let server = proxy(backend.addr, "grace = 60").await;
    let (addr, c) = (server.http[0], client());
    assert_eq!(get(&c, addr, "/g").await.body, "v1");
    tokio::time::sleep(Duration::from_millis(5100)).await;
    let stale = get(&c, addr, "/g").await;
    assert_eq!((stale.cache(), &stale.body[..]), ("stale", &b"v1"[..]));
    assert!(stale.age() >= 5);
    eventually("the background refresh", || backend.count() == 2).await;
    let server_ref = &server;
    let mut fresh = None;
    for _ in 0..200 {
        let got = get(&c, addr, "/g").await;
        if got.body == "v2" {
            fresh = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fresh.expect("the refreshed object").cache(), "hit");
    assert_eq!(stats(server_ref).await["background_refreshes"], 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_while_revalidate_from_the_response() {
    let (backend, _) = versioned("max-age=1, stale-while-revalidate=60").await;
    let server = proxy(backend.addr, "grace = 0\nstale_if_error = 0").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/swr").await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(get(&c, addr, "/swr").await.cache(), "stale");
    eventually("the background refresh", || backend.count() == 2).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_backend_leaves_fresh_and_graced_objects_readable() {
    // Three seconds of freshness: `Date` has whole seconds, so a response may arrive up to a
    // second old.
    let (backend, _) = versioned("max-age=3").await;
    let server = proxy(backend.addr, "grace = 0\nstale_if_error = 60").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/article").await;
    backend.stop();
    let fresh = get(&c, addr, "/article").await;
    assert_eq!((fresh.cache(), &fresh.body[..]), ("hit", &b"v1"[..]));
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let stale = get(&c, addr, "/article").await;
    assert_eq!(
        (stale.status.as_u16(), stale.cache(), &stale.body[..]),
        (200, "stale", &b"v1"[..])
    );
    assert!(stale.age() >= 3, "Age {}", stale.age());
    // Nothing stored: the error shows.
    let missing = get(&c, addr, "/never-fetched").await;
    assert_eq!((missing.status.as_u16(), missing.cache()), (503, "synth"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_errors_are_replaced_by_stale_objects() {
    let failing = Arc::new(AtomicUsize::new(0));
    let f = failing.clone();
    let backend = Backend::start(NO_DELAY, move |seen| {
        if f.load(Ordering::SeqCst) == 1 {
            // Even a cacheable error page does not replace the stored object.
            return reply(503, &[("cache-control", "max-age=60")], "down");
        }
        match seen.uri.path() {
            "/strict" => reply(
                200,
                &[
                    ("cache-control", "max-age=1, must-revalidate"),
                    ("etag", "\"s\""),
                ],
                "strict",
            ),
            _ => reply(
                200,
                &[("cache-control", "max-age=1, stale-if-error=60")],
                "page",
            ),
        }
    })
    .await;
    let server = proxy(backend.addr, "grace = 0\nstale_if_error = 0").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/page").await;
    get(&c, addr, "/strict").await;
    failing.store(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let page = get(&c, addr, "/page").await;
    assert_eq!(
        (page.status.as_u16(), page.cache(), &page.body[..]),
        (200, "stale", &b"page"[..])
    );
    // must-revalidate: never stale, even on error (RFC 9111 §5.2.2.2); the object is still
    // stored (kept for revalidation) and the failed revalidation is a 504.
    let strict = get(&c, addr, "/strict").await;
    assert_eq!(strict.status, 504);
    // The error page itself was not stored over the object.
    failing.store(0, Ordering::SeqCst);
    let recovered = get(&c, addr, "/page").await;
    assert_eq!(
        (recovered.status.as_u16(), &recovered.body[..]),
        (200, &b"page"[..])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_mark_the_backend_sick_and_healthy() {
    let (backend, _) = versioned("max-age=1").await;
    let addr_backend = backend.addr;
    let server = proxy(
        backend.addr,
        "grace = 0\nstale_if_error = 3600\n[probe]\npath = \"/health\"\ninterval = 0.05\ntimeout = 1.0\nthreshold = 2",
    )
    .await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/a").await;
    assert_eq!(stats(&server).await["backend_healthy"], 1);
    backend.stop();
    let mut sick = false;
    for _ in 0..400 {
        if stats(&server).await["backend_healthy"] == 0 {
            sick = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(sick, "probes noticed the backend stopped");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let stale = get(&c, addr, "/a").await;
    assert_eq!(stale.cache(), "stale");
    // The backend comes back on the same port.
    let (again, _) = {
        let version = Arc::new(AtomicUsize::new(0));
        let b = Backend::start_on(addr_backend, NO_DELAY, |_| {
            reply(200, &[("cache-control", "max-age=100")], "back")
        })
        .await;
        (b, version)
    };
    let mut healthy = false;
    for _ in 0..400 {
        if stats(&server).await["backend_healthy"] == 1 {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(healthy, "one good probe makes it healthy");
    assert_eq!(get(&c, addr, "/a").await.body, "back");
    assert!(again.seen.lock().iter().any(|s| s.uri.path() == "/health"));
    server.shutdown().await;
}
