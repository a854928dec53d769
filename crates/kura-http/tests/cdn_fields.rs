//! The fields of CDNs: `Cache-Status` (RFC 9211) beside `X-Cache`, and `Surrogate-Control`
//! read as Fastly and Akamai read it and removed before delivery.

mod common;

use std::time::Duration;

use common::*;

/// A backend whose answer for a path has these fields (and a body naming the path).
async fn backend(fields: fn(&str) -> Vec<(&'static str, &'static str)>) -> Backend {
    Backend::start(Duration::ZERO, move |seen| {
        let path = seen.uri.path();
        reply(200, &fields(path), path)
    })
    .await
}

fn members(got: &Got) -> Vec<String> {
    got.headers
        .get_all("cache-status")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

fn origin_fields(path: &str) -> Vec<(&'static str, &'static str)> {
    match path {
        "/chained" => vec![
            ("cache-control", "max-age=60"),
            ("cache-status", "origin-nginx; fwd=uri-miss"),
        ],
        _ => vec![("cache-control", "max-age=60")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_status_says_what_happened_after_the_backends_member() {
    let origin = backend(origin_fields).await;
    let extra = "cache_status = \"edge-1\"\n[purge]\nallow = [\"127.0.0.1\"]\n";
    let server = proxy(origin.addr, extra).await;
    let (addr, c) = (server.http[0], client());
    let miss = get(&c, addr, "/chained").await;
    assert_eq!(
        members(&miss),
        [
            "origin-nginx; fwd=uri-miss",
            "edge-1; fwd=miss; fwd-status=200; stored"
        ]
    );
    let hit = get(&c, addr, "/chained").await;
    assert_eq!(hit.cache(), "hit");
    assert_eq!(members(&hit), ["origin-nginx; fwd=uri-miss", "edge-1; hit"]);
    // Stale (a soft purge): a hit, and the refresh it starts.
    let soft = send(&c, addr, "PURGE", "/chained", &[("x-purge-soft", "1")]).await;
    assert_eq!(soft.status, 200);
    let stale = get(&c, addr, "/chained").await;
    assert_eq!(stale.cache(), "stale");
    assert_eq!(
        members(&stale),
        ["origin-nginx; fwd=uri-miss", "edge-1; hit; fwd=stale"]
    );
    // Passed: by method, or by the request (a cookie).
    let post = send(&c, addr, "POST", "/form", &[]).await;
    assert_eq!(members(&post), ["edge-1; fwd=method; fwd-status=200"]);
    let cookie = send(&c, addr, "GET", "/me", &[("cookie", "session=1")]).await;
    assert_eq!(members(&cookie), ["edge-1; fwd=bypass; fwd-status=200"]);
    // Answered by kura itself.
    let purged = send(&c, addr, "PURGE", "/nothing", &[]).await;
    assert_eq!(members(&purged), ["edge-1; detail=synth"]);
    server.shutdown().await;

    // The default name, and "" for no field at all.
    let named = proxy(origin.addr, "").await;
    let got = get(&c, named.http[0], "/a").await;
    assert_eq!(members(&got), ["kura; fwd=miss; fwd-status=200; stored"]);
    named.shutdown().await;
    let off = proxy(origin.addr, "cache_status = \"\"").await;
    let got = get(&c, off.http[0], "/a").await;
    assert_eq!((got.cache(), members(&got).len()), ("miss", 0));
    off.shutdown().await;
    let error = kura_http::Config::from_toml(&format!(
        "backend = \"http://{}\"\ncache_status = \"edge 1\"\n",
        origin.addr
    ))
    .unwrap_err()
    .to_string();
    assert!(error.contains("line 2: cache_status"), "{error}");
}

fn surrogate_fields(path: &str) -> Vec<(&'static str, &'static str)> {
    match path {
        // Browsers revalidate every time; kura keeps it ten minutes.
        "/long" => vec![
            ("cache-control", "max-age=0"),
            ("surrogate-control", "max-age=600"),
        ],
        "/no-store" => vec![
            ("cache-control", "max-age=600"),
            ("surrogate-control", "no-store"),
        ],
        // The origin marked it personal: no surrogate lifetime shares it.
        "/private" => vec![
            ("cache-control", "private"),
            ("surrogate-control", "max-age=600"),
        ],
        "/esi" => vec![("surrogate-control", "content=\"ESI/1.0\", max-age=60")],
        _ => vec![("surrogate-control", "max-age=60")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn surrogate_control_governs_this_cache_and_never_reaches_clients() {
    let origin = backend(surrogate_fields).await;
    let server = proxy(origin.addr, "").await;
    let (addr, c) = (server.http[0], client());
    for (path, second) in [
        ("/long", "hit"),
        ("/no-store", "miss"),
        ("/private", "miss"),
        ("/esi", "hit"),
    ] {
        let first = get(&c, addr, path).await;
        let again = get(&c, addr, path).await;
        let seen = [
            first.header("surrogate-control"),
            again.header("surrogate-control"),
        ];
        assert_eq!(
            seen,
            ["", ""],
            "{path}: Surrogate-Control reached the client"
        );
        let outcome = if again.cache() == "hit" {
            "hit"
        } else {
            "miss"
        };
        assert_eq!(outcome, second, "{path}: {}", again.cache());
    }
    assert_eq!(
        get(&c, addr, "/long").await.header("cache-control"),
        "max-age=0"
    );
    let post = send(&c, addr, "POST", "/form", &[]).await;
    assert_eq!(post.header("surrogate-control"), "");
    assert_eq!(stats(&server).await["esi_requested"], 1);
    server.shutdown().await;

    // Off: the field is Cache-Control's business no more, and passes through.
    let off = proxy(origin.addr, "surrogate_control = false").await;
    let addr = off.http[0];
    get(&c, addr, "/long").await;
    let again = get(&c, addr, "/long").await;
    // Not stored: Cache-Control's max-age=0 without a validator governs.
    assert_ne!(again.cache(), "hit");
    assert_eq!(again.header("surrogate-control"), "max-age=600");
    off.shutdown().await;
}
