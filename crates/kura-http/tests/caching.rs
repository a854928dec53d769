//! The proxy's caching rules end to end: a hyper backend and the proxy on loopback, request and
//! response headers checked. Lifetimes are short (1 s) where expiry matters; nothing is timed.

mod common;

use std::time::Duration;

use common::*;

const NO_DELAY: Duration = Duration::ZERO;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn miss_then_hit_with_age() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(
            200,
            &[("cache-control", "max-age=100"), ("age", "7")],
            "hello",
        )
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let addr = server.http[0];
    let c = client();
    let first = get(&c, addr, "/a").await;
    assert_eq!(
        (first.status.as_u16(), first.cache(), &first.body[..]),
        (200, "miss", &b"hello"[..])
    );
    let second = get(&c, addr, "/a").await;
    assert_eq!((second.cache(), &second.body[..]), ("hit", &b"hello"[..]));
    assert!(
        second.age() >= 7,
        "Age counts the backend's Age: {}",
        second.age()
    );
    assert_eq!(second.header("content-length"), "5");
    assert_eq!(backend.count(), 1);
    // Another URL, another object; the query string is part of the key.
    assert_eq!(get(&c, addr, "/a?x=1").await.cache(), "miss");
    assert_eq!(backend.count(), 2);
    // The backend saw the client's Host and an X-Forwarded-For.
    let seen = backend.last();
    assert_eq!(seen.headers["host"], addr.to_string());
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
    // kura's entry names this instance (`via_name`, default random).
    let via = seen.headers["via"].to_str().unwrap();
    assert!(via.starts_with("1.1 kura-") && via.len() == 17, "{via}");
    let stats = stats(&server).await;
    assert_eq!(stats["requests"]["hit"], 1);
    assert_eq!(stats["requests"]["miss"], 2);
    assert_eq!(stats["objects"], 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_and_default_ttl() {
    let backend = Backend::start(NO_DELAY, |seen| match seen.uri.path() {
        // Three seconds: `Date` has whole seconds, so a response may arrive up to a second old.
        "/short" => reply(200, &[("cache-control", "max-age=3")], "s"),
        // No freshness information: the operator's default TTL.
        _ => reply(200, &[], "d"),
    })
    .await;
    let server = proxy(
        backend.addr,
        "grace = 0\nstale_if_error = 0\ndefault_ttl = 300",
    )
    .await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/short").await;
    get(&c, addr, "/default").await;
    assert_eq!(get(&c, addr, "/short").await.cache(), "hit");
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_eq!(
        get(&c, addr, "/short").await.cache(),
        "miss",
        "expired after max-age"
    );
    assert_eq!(
        get(&c, addr, "/default").await.cache(),
        "hit",
        "default TTL 300 s"
    );
    assert_eq!(backend.count(), 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_keeps_one_variant_per_request_value() {
    let backend = Backend::start(NO_DELAY, |seen| {
        let encoding = seen
            .headers
            .get("accept-encoding")
            .map_or("none", |v| v.to_str().unwrap())
            .to_owned();
        reply(
            200,
            &[
                ("cache-control", "max-age=100"),
                ("vary", "Accept-Encoding"),
            ],
            &encoding,
        )
    })
    .await;
    // Compressed storage replaces Accept-Encoding by gzip for lookups (one variant for all,
    // tests/compression.rs); without it, each value is its own variant.
    let server = proxy(backend.addr, "[compression]\nenabled = false").await;
    let (addr, c) = (server.http[0], client());
    let gzip = [("accept-encoding", "gzip")];
    let br = [("accept-encoding", "br")];
    assert_eq!(send(&c, addr, "GET", "/v", &gzip).await.body, "gzip");
    assert_eq!(send(&c, addr, "GET", "/v", &br).await.body, "br");
    assert_eq!(get(&c, addr, "/v").await.body, "none");
    let again = send(&c, addr, "GET", "/v", &[("accept-encoding", "GZIP ")]).await;
    assert_eq!(
        (again.cache(), &again.body[..]),
        ("hit", &b"gzip"[..]),
        "normalised value"
    );
    let again = send(&c, addr, "GET", "/v", &br).await;
    assert_eq!((again.cache(), &again.body[..]), ("hit", &b"br"[..]));
    assert_eq!(get(&c, addr, "/v").await.cache(), "hit");
    assert_eq!(backend.count(), 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revalidation_with_304_merges_headers() {
    let backend = Backend::start(NO_DELAY, |seen| {
        if seen
            .headers
            .get("if-none-match")
            .is_some_and(|v| v == "\"v1\"")
        {
            reply(
                304,
                &[
                    ("cache-control", "max-age=100"),
                    ("etag", "\"v1\""),
                    ("x-new", "2"),
                ],
                "",
            )
        } else {
            reply(
                200,
                &[
                    ("cache-control", "max-age=1"),
                    ("etag", "\"v1\""),
                    ("x-new", "1"),
                ],
                "body-v1",
            )
        }
    })
    .await;
    let server = proxy(backend.addr, "grace = 0\nstale_if_error = 0").await;
    let (addr, c) = (server.http[0], client());
    assert_eq!(get(&c, addr, "/r").await.header("x-new"), "1");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // The client's own conditional is not what the backend gets: the cache's is.
    let got = send(&c, addr, "GET", "/r", &[("if-none-match", "\"other\"")]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, "body-v1", "the stored body, validated");
    assert_eq!(got.header("x-new"), "2", "header fields updated by the 304");
    let seen = backend.last();
    assert_eq!(seen.headers["if-none-match"], "\"v1\"");
    // Now fresh for 100 s: a hit.
    assert_eq!(get(&c, addr, "/r").await.cache(), "hit");
    assert_eq!(backend.count(), 2);
    assert_eq!(stats(&server).await["revalidated"], 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_conditionals_answered_from_cache() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(
            200,
            &[
                ("cache-control", "max-age=100"),
                ("etag", "\"e1\""),
                ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ],
            "content",
        )
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/c").await;
    let not_modified = send(&c, addr, "GET", "/c", &[("if-none-match", "W/\"e1\"")]).await;
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("etag"), "\"e1\"");
    assert!(not_modified.body.is_empty());
    let modified = send(&c, addr, "GET", "/c", &[("if-none-match", "\"e0\"")]).await;
    assert_eq!(
        (modified.status.as_u16(), &modified.body[..]),
        (200, &b"content"[..])
    );
    let since = send(
        &c,
        addr,
        "GET",
        "/c",
        &[("if-modified-since", "Tue, 02 Jan 2024 00:00:00 GMT")],
    )
    .await;
    assert_eq!(since.status, 304);
    assert_eq!(backend.count(), 1);
    // If-Match is the origin's business: forwarded.
    let forwarded = send(&c, addr, "GET", "/c", &[("if-match", "\"e1\"")]).await;
    assert_eq!(forwarded.cache(), "pass");
    assert_eq!(backend.count(), 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_served_from_a_stored_get() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "0123456789")
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    // A HEAD miss fetches the GET, so the object is stored for both.
    let head = send(&c, addr, "HEAD", "/h", &[]).await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(backend.last().method, "GET");
    // The HEAD client's response ends at the head, before the GET's body is stored.
    let proxy = server.proxy();
    eventually("the GET stored", || {
        proxy
            .stats
            .stored
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    })
    .await;
    let head = send(&c, addr, "HEAD", "/h", &[]).await;
    assert_eq!((head.cache(), head.header("content-length")), ("hit", "10"));
    assert!(head.body.is_empty());
    let full = get(&c, addr, "/h").await;
    assert_eq!((full.cache(), &full.body[..]), ("hit", &b"0123456789"[..]));
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_methods_invalidate() {
    let backend = Backend::start(NO_DELAY, |seen| match seen.method.as_str() {
        "POST" => reply(201, &[("location", "/other")], "created"),
        "DELETE" => reply(500, &[], "failed"),
        _ => reply(200, &[("cache-control", "max-age=100")], "page"),
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for path in ["/p", "/other", "/kept"] {
        get(&c, addr, path).await;
        assert_eq!(get(&c, addr, path).await.cache(), "hit");
    }
    let posted = send(&c, addr, "POST", "/p", &[]).await;
    assert_eq!((posted.status.as_u16(), posted.cache()), (201, "pass"));
    assert_eq!(backend.last().method, "POST");
    assert_eq!(
        get(&c, addr, "/p").await.cache(),
        "miss",
        "target invalidated"
    );
    assert_eq!(
        get(&c, addr, "/other").await.cache(),
        "miss",
        "Location invalidated"
    );
    // A failed unsafe request invalidates nothing.
    send(&c, addr, "DELETE", "/kept", &[]).await;
    assert_eq!(get(&c, addr, "/kept").await.cache(), "hit");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uncacheable_responses_pass_without_cache_memory() {
    let backend = Backend::start(NO_DELAY, |seen| match seen.uri.path() {
        "/private" => reply(200, &[("cache-control", "private, max-age=100")], "mine"),
        "/no-store" => reply(200, &[("cache-control", "no-store")], "x"),
        "/cookie" => reply(
            200,
            &[("cache-control", "max-age=100"), ("set-cookie", "s=1")],
            "c",
        ),
        "/error" => reply(500, &[], "oops"),
        _ => reply(200, &[("cache-control", "max-age=100")], "shared"),
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for path in ["/private", "/no-store", "/cookie", "/error"] {
        let first = get(&c, addr, path).await;
        let second = get(&c, addr, path).await;
        assert_eq!(second.body, first.body);
        assert_eq!(second.cache(), "pass", "{path}");
    }
    assert_eq!(get(&c, addr, "/cookie").await.header("set-cookie"), "s=1");
    assert_eq!(backend.count(), 9);
    // Authorization: passed, never looked up or stored.
    send(
        &c,
        addr,
        "GET",
        "/shared",
        &[("authorization", "Basic eDp5")],
    )
    .await;
    assert_eq!(get(&c, addr, "/shared").await.cache(), "miss");
    let stats = stats(&server).await;
    assert_eq!(stats["stored"], 1, "only /shared was stored");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reload_does_not_bypass_the_cache() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "x")
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/reload").await;
    let reload = send(
        &c,
        addr,
        "GET",
        "/reload",
        &[("cache-control", "no-cache"), ("pragma", "no-cache")],
    )
    .await;
    assert_eq!(reload.cache(), "hit");
    let reload = send(
        &c,
        addr,
        "GET",
        "/reload",
        &[("cache-control", "max-age=0")],
    )
    .await;
    assert_eq!(reload.cache(), "hit");
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honoured_client_directives_revalidate() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "x")
    })
    .await;
    let server = proxy(backend.addr, "honour_client_directives = true").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/h").await;
    let reload = send(&c, addr, "GET", "/h", &[("cache-control", "no-cache")]).await;
    assert_eq!(reload.cache(), "miss");
    assert_eq!(backend.count(), 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_cache_control_targets_the_proxy() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(
            200,
            &[
                ("cache-control", "no-store"),
                ("cdn-cache-control", "max-age=100"),
            ],
            "x",
        )
    })
    .await;
    let server = proxy(backend.addr, "cdn_cache_control = true").await;
    let (addr, c) = (server.http[0], client());
    get(&c, addr, "/t").await;
    assert_eq!(get(&c, addr, "/t").await.cache(), "hit");
    server.shutdown().await;
    let plain = proxy(backend.addr, "").await;
    get(&c, plain.http[0], "/t").await;
    assert_eq!(get(&c, plain.http[0], "/t").await.cache(), "pass");
    plain.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expires_and_heuristics_only_where_allowed() {
    let ten_days_ago =
        httpdate::fmt_http_date(std::time::SystemTime::now() - Duration::from_secs(864_000));
    let in_an_hour =
        httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3600));
    let backend = Backend::start(NO_DELAY, move |seen| match seen.uri.path() {
        "/expires" => reply(200, &[("expires", &in_an_hour)], "e"),
        "/expired" => reply(200, &[("expires", "Thu, 01 Jan 1970 00:00:00 GMT")], "x"),
        // 10% of ten days: a heuristic lifetime of a day.
        "/modified" => reply(200, &[("last-modified", &ten_days_ago)], "m"),
        // 302 is not heuristically cacheable (RFC 9110 §15.4.3): not stored without freshness.
        "/redirect" => reply(302, &[("location", "/elsewhere")], ""),
        "/public-redirect" => reply(
            302,
            &[("location", "/elsewhere"), ("cache-control", "public")],
            "",
        ),
        _ => reply(404, &[], "missing"),
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for (path, second) in [
        ("/expires", "hit"),
        ("/expired", "pass"),
        ("/modified", "hit"),
        ("/redirect", "pass"),
        ("/public-redirect", "hit"),
        ("/not-found", "hit"),
    ] {
        get(&c, addr, path).await;
        assert_eq!(get(&c, addr, path).await.cache(), second, "{path}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cache_responses_are_revalidated_on_every_use() {
    let backend = Backend::start(NO_DELAY, |seen| {
        if seen.headers.contains_key("if-none-match") {
            reply(304, &[("etag", "\"n\"")], "")
        } else {
            reply(
                200,
                &[("cache-control", "no-cache"), ("etag", "\"n\"")],
                "validated",
            )
        }
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    assert_eq!(get(&c, addr, "/n").await.body, "validated");
    for round in 2..4 {
        let got = get(&c, addr, "/n").await;
        assert_eq!(
            (got.status.as_u16(), &got.body[..]),
            (200, &b"validated"[..])
        );
        assert_eq!(backend.count(), round);
        assert_eq!(backend.last().headers["if-none-match"], "\"n\"");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_if_cached_never_asks_the_backend() {
    let backend = Backend::start(NO_DELAY, |_| {
        reply(200, &[("cache-control", "max-age=100")], "x")
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let only = [("cache-control", "only-if-cached")];
    assert_eq!(send(&c, addr, "GET", "/o", &only).await.status, 504);
    assert_eq!(backend.count(), 0);
    get(&c, addr, "/o").await;
    let cached = send(&c, addr, "GET", "/o", &only).await;
    assert_eq!((cached.status.as_u16(), cached.cache()), (200, "hit"));
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
}
