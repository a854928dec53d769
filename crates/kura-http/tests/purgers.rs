//! Invalidation as applications send it: each test sends the bytes a purger sends to Varnish
//! (FOSHttpCache for Symfony and Sulu, Drupal's varnish_purger, Magento's PurgeCache,
//! varnish-modules' xkey as FOSHttpCache and xkey's own example drive it) and checks which
//! stored pages are invalidated and which are not.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::wire::{Conn, RawResponse};
use common::*;

const TOKEN: &str = "0123456789abcdef-purge";

/// A backend numbering its answers, with the response fields `fields` gives for a path.
async fn site(fields: fn(&str) -> Vec<(&'static str, &'static str)>) -> Backend {
    let served = Arc::new(AtomicUsize::new(0));
    Backend::start(Duration::ZERO, move |seen| {
        let n = served.fetch_add(1, Ordering::SeqCst) + 1;
        let path = seen.uri.path();
        let mut pairs = vec![("cache-control", "max-age=600")];
        pairs.extend(fields(path));
        reply(200, &pairs, &format!("{path} v{n}"))
    })
    .await
}

/// Sends `bytes` on a connection of its own and reads the answer.
async fn raw(addr: SocketAddr, bytes: &str) -> RawResponse {
    let mut conn = Conn::open(addr).await;
    conn.send(bytes.as_bytes()).await;
    conn.response(false).await.expect("an answer")
}

/// `GET path` for `host`: the cache outcome.
async fn outcome(addr: SocketAddr, host: &str, path: &str) -> String {
    let got = raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
    )
    .await;
    assert_eq!(got.status, 200, "{path}: {}", got.head);
    got.field("x-cache").unwrap_or("").to_owned()
}

/// Stores every page of `pages` (host, path) and checks the next request of each is a hit.
async fn warm(addr: SocketAddr, pages: &[(&str, &str)]) {
    for (host, path) in pages {
        outcome(addr, host, path).await;
        assert_eq!(outcome(addr, host, path).await, "hit", "{host}{path}");
    }
}

/// The outcome of a GET of each page, in order.
async fn outcomes(addr: SocketAddr, pages: &[(&str, &str)]) -> Vec<String> {
    let mut all = Vec::new();
    for (host, path) in pages {
        all.push(outcome(addr, host, path).await);
    }
    all
}

fn purge_config() -> String {
    format!("[purge]\nallow = [\"127.0.0.1\"]\ntoken = \"{TOKEN}\"\n")
}

fn fos_tags(path: &str) -> Vec<(&'static str, &'static str)> {
    match path {
        "/blog/1" => vec![
            ("content-type", "text/html"),
            ("x-cache-tags", "post-1,home"),
        ],
        "/blog/12" => vec![("content-type", "text/html"), ("x-cache-tags", "post-12")],
        "/blog/2" => vec![
            ("content-type", "text/html"),
            ("x-cache-tags", "post-2,home"),
        ],
        "/api/1.json" => vec![
            ("content-type", "application/json"),
            ("x-cache-tags", "post-1"),
        ],
        _ => vec![("content-type", "text/html")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fos_http_cache_bans_by_tag_then_by_path_host_and_type() {
    let backend = site(fos_tags).await;
    let server = proxy(backend.addr, &purge_config()).await;
    let addr = server.http[0];
    let pages = [
        ("site.example", "/blog/1"),
        ("site.example", "/blog/12"),
        ("site.example", "/blog/2"),
        ("site.example", "/api/1.json"),
        ("other.example", "/blog/2"),
    ];
    warm(addr, &pages).await;
    // Varnish::invalidateTags(['post-1']) in ban mode: the default ban fields, the tags
    // preg_quote'd between FOSHttpCache's anchors, Connection: Close from the dispatcher.
    let banned = raw(
        addr,
        "BAN / HTTP/1.1\r\nHost: site.example\r\nX-Host: .*\r\nX-Url: .*\r\n\
         X-Content-Type: .*\r\nX-Cache-Tags: (^|,)(post\\-1)(,|$)\r\nConnection: Close\r\n\r\n",
    )
    .await;
    assert_eq!(banned.status, 200, "{}", banned.text());
    assert_eq!(
        outcomes(addr, &pages).await,
        ["miss", "hit", "hit", "miss", "hit"],
        "post-1's page and JSON go; post-12 is not post-1"
    );
    // Varnish::banPath('^/blog/', 'text/html', ['site.example']): the hosts unquoted in ^(...)$.
    let banned = raw(
        addr,
        "BAN / HTTP/1.1\r\nHost: site.example\r\nX-Host: ^(site.example)$\r\nX-Url: ^/blog/\r\n\
         X-Content-Type: text/html\r\nConnection: Close\r\n\r\n",
    )
    .await;
    assert_eq!(banned.status, 200, "{}", banned.text());
    assert_eq!(
        outcomes(addr, &pages).await,
        ["miss", "miss", "miss", "hit", "hit"],
        "site.example's HTML under /blog/ goes; its JSON and other.example's page stay"
    );
    assert_eq!(stats(&server).await["ban_requests"], 2);
    server.shutdown().await;
}

fn drupal_tags(path: &str) -> Vec<(&'static str, &'static str)> {
    // varnish_purge_tags sends the page's tags separated by spaces.
    match path {
        "/node/1" => vec![("cache-tags", "node:1 node_list config:system.site")],
        "/node/10" => vec![("cache-tags", "node:10 config:system.site")],
        "/node/2" => vec![("cache-tags", "node:2 config:system.site")],
        "/" => vec![("cache-tags", "node_list config:system.site")],
        _ => vec![("cache-tags", "config:system.site")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drupal_varnish_purger_bans_cache_tags() {
    let backend = site(drupal_tags).await;
    let server = proxy(backend.addr, &purge_config()).await;
    let addr = server.http[0];
    let pages = [
        ("d.example", "/node/1"),
        ("d.example", "/node/10"),
        ("d.example", "/node/2"),
        ("d.example", "/"),
        ("d.example", "/about"),
    ];
    warm(addr, &pages).await;
    // The bundled purger of varnish_purger: BAN to its configured path with the header
    // Cache-Tags: [invalidations:separated_pipe] (Guzzle's request).
    let banned = raw(
        addr,
        "BAN / HTTP/1.1\r\nHost: varnish:6081\r\nUser-Agent: GuzzleHttp/7\r\n\
         Cache-Tags: node:1|node_list\r\n\r\n",
    )
    .await;
    assert_eq!(banned.status, 200, "{}", banned.text());
    // As Varnish reads `obj.http.Cache-Tags ~ node:1|node_list`: node:10 contains node:1.
    assert_eq!(
        outcomes(addr, &pages).await,
        ["miss", "miss", "hit", "miss", "hit"]
    );
    server.shutdown().await;
}

fn magento_tags(path: &str) -> Vec<(&'static str, &'static str)> {
    match path {
        "/product-1.html" => vec![("x-magento-tags", "cat_p,cat_p_1,cat_c_2,store")],
        "/product-11.html" => vec![("x-magento-tags", "cat_p,cat_p_11,cat_c_2,store")],
        "/category-3.html" => vec![("x-magento-tags", "cat_c,cat_c_3,store")],
        _ => vec![("x-magento-tags", "cat_c,cat_c_2,store")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn magento_purges_by_tags_pattern_and_flushes_everything() {
    let backend = site(magento_tags).await;
    let server = proxy(backend.addr, &purge_config()).await;
    let addr = server.http[0];
    let pages = [
        ("shop.example", "/product-1.html"),
        ("shop.example", "/product-11.html"),
        ("shop.example", "/category-3.html"),
        ("shop.example", "/category-2.html"),
    ];
    warm(addr, &pages).await;
    // PurgeCache::sendPurgeRequest of two tags: the Laminas socket adapter's request line,
    // its tags pattern, Host set to the cache server's.
    let purged = raw(
        addr,
        "PURGE / HTTP/1.1\r\nX-Magento-Tags-Pattern: ((^|,)cat_p_1(,|$))|((^|,)cat_c_3(,|$))\r\n\
         Host: varnish\r\n\r\n",
    )
    .await;
    assert_eq!(purged.status, 200, "{}", purged.text());
    assert_eq!(
        outcomes(addr, &pages).await,
        ["miss", "hit", "miss", "hit"],
        "cat_p_1 is not cat_p_11"
    );
    // The full flush (Flush Magento Cache): the pattern .* .
    let flushed = raw(
        addr,
        "PURGE / HTTP/1.1\r\nX-Magento-Tags-Pattern: .*\r\nHost: varnish\r\n\r\n",
    )
    .await;
    assert_eq!(flushed.status, 200);
    assert_eq!(
        outcomes(addr, &pages).await,
        ["miss", "miss", "miss", "miss"]
    );
    // A PURGE without the pattern is still a URL purge.
    let plain = raw(
        addr,
        "PURGE /category-2.html HTTP/1.1\r\nHost: shop.example\r\n\r\n",
    )
    .await;
    assert_eq!(plain.status, 200, "{}", plain.text());
    assert_eq!(outcomes(addr, &pages).await, ["hit", "hit", "hit", "miss"]);
    server.shutdown().await;
}

fn xkeys(path: &str) -> Vec<(&'static str, &'static str)> {
    match path {
        "/p/1" => vec![("xkey", "product-1 category-2")],
        "/p/3" => vec![("xkey", "product-3"), ("xkey", "category-4")],
        _ => vec![("xkey", "category-4")],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xkey_purges_and_softpurges_keys() {
    let backend = site(xkeys).await;
    let server = proxy(backend.addr, &purge_config()).await;
    let addr = server.http[0];
    let pages = [
        ("x.example", "/p/1"),
        ("x.example", "/p/3"),
        ("x.example", "/c/4"),
    ];
    warm(addr, &pages).await;
    // FOSHttpCache's purgekeys mode (tags_header xkey-softpurge): the keys separated by spaces.
    let soft = raw(
        addr,
        "PURGEKEYS / HTTP/1.1\r\nHost: x.example\r\nxkey-softpurge: product-1 product-9\r\n\
         Connection: Close\r\n\r\n",
    )
    .await;
    assert_eq!(soft.status, 200, "{}", soft.text());
    // Soft: the stale page is served (grace) while one request refreshes it.
    assert_eq!(outcomes(addr, &pages).await, ["stale", "hit", "hit"]);
    eventually_fresh(addr, "/p/1").await;
    // xkey's own example: PURGE with the keys in `xkey`, hard.
    let hard = raw(
        addr,
        "PURGE / HTTP/1.1\r\nHost: x.example\r\nxkey: category-4\r\n\r\n",
    )
    .await;
    assert_eq!(hard.status, 200, "{}", hard.text());
    assert_eq!(outcomes(addr, &pages).await, ["hit", "miss", "miss"]);
    // FOSHttpCache with tags_header xkey-purge.
    let hard = raw(
        addr,
        "PURGEKEYS / HTTP/1.1\r\nHost: x.example\r\nxkey-purge: category-2\r\n\r\n",
    )
    .await;
    assert_eq!(hard.status, 200, "{}", hard.text());
    assert_eq!(outcomes(addr, &pages).await, ["miss", "hit", "hit"]);
    let none = raw(addr, "PURGEKEYS / HTTP/1.1\r\nHost: x.example\r\n\r\n").await;
    assert_eq!(none.status, 400, "{}", none.text());
    server.shutdown().await;
}

/// Waits (bounded) until `path`'s background refresh has stored a fresh copy.
async fn eventually_fresh(addr: SocketAddr, path: &str) {
    for _ in 0..200 {
        if outcome(addr, "x.example", path).await == "hit" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{path} was never refreshed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidations_from_outside_the_acl_or_malformed_invalidate_nothing() {
    let backend = site(fos_tags).await;
    let c = client();
    // Loopback is outside the allowed range: only the token lets a request through.
    let extra = format!("[purge]\nallow = [\"10.0.0.0/8\"]\ntoken = \"{TOKEN}\"\n");
    let server = proxy(backend.addr, &extra).await;
    let addr = server.http[0];
    let pages = [("site.example", "/blog/1"), ("site.example", "/blog/2")];
    warm(addr, &pages).await;
    let everything = [
        "BAN / HTTP/1.1\r\nHost: site.example\r\nX-Url: .*\r\n",
        "BAN / HTTP/1.1\r\nHost: site.example\r\nCache-Tags: .*\r\n",
        "PURGE / HTTP/1.1\r\nHost: site.example\r\nX-Magento-Tags-Pattern: .*\r\n",
        "PURGEKEYS / HTTP/1.1\r\nHost: site.example\r\nxkey-purge: home\r\n",
        "PURGE / HTTP/1.1\r\nHost: site.example\r\nxkey: home\r\n",
    ];
    for head in everything {
        let refused = raw(addr, &format!("{head}\r\n")).await;
        assert_eq!(refused.status, 403, "{head}: {}", refused.text());
        let wrong = raw(addr, &format!("{head}x-purge-token: {TOKEN}x\r\n\r\n")).await;
        assert_eq!(wrong.status, 403, "{head}");
    }
    // Patterns kura cannot evaluate, or nothing to ban, are refused with the reason.
    for (head, why) in [
        ("BAN / HTTP/1.1\r\nX-Url: (a{1000}){1000}\r\n", "size limit"),
        (
            "BAN / HTTP/1.1\r\nCache-Tags: (node)\\1\r\n",
            "backreferences",
        ),
        ("BAN / HTTP/1.1\r\nX-Url: (?=/blog)\r\n", "look-around"),
        ("BAN / HTTP/1.1\r\nX-Other: .*\r\n", "X-Host, X-Url"),
        ("BAN / HTTP/1.1\r\nX-Url: .*\r\nX-Url: .*\r\n", "x-url"),
    ] {
        let request = format!("{head}Host: site.example\r\nx-purge-token: {TOKEN}\r\n\r\n");
        let refused = raw(addr, &request).await;
        assert_eq!(refused.status, 400, "{head}: {}", refused.text());
        assert!(refused.text().contains(why), "{head}: {}", refused.text());
    }
    assert_eq!(outcomes(addr, &pages).await, ["hit", "hit"]);
    let counters = stats(&server).await;
    assert_eq!(
        (
            counters["bans_added"].as_u64(),
            counters["purges_refused"].as_u64()
        ),
        (Some(0), Some(15))
    );
    // With the token, the same request bans.
    let with_token = format!(
        "BAN / HTTP/1.1\r\nHost: site.example\r\nX-Cache-Tags: (^|,)home(,|$)\r\n\
         x-purge-token: {TOKEN}\r\n\r\n"
    );
    assert_eq!(raw(addr, &with_token).await.status, 200);
    assert_eq!(outcomes(addr, &pages).await, ["miss", "miss"]);
    server.shutdown().await;

    // Without [purge], BAN and PURGEKEYS are refused, never passed to the backend.
    let off = proxy(backend.addr, "").await;
    let before = backend.count();
    for method in ["BAN", "PURGEKEYS"] {
        let got = send(&c, off.http[0], method, "/", &[("x-cache-tags", ".*")]).await;
        assert_eq!(got.status, 405, "{method}");
    }
    assert_eq!(backend.count(), before);
    off.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_tag_list_bans_within_the_head_limit_and_is_refused_past_it() {
    let backend = site(fos_tags).await;
    let server = proxy(backend.addr, &purge_config()).await;
    let addr = server.http[0];
    let pages = [("site.example", "/blog/1"), ("site.example", "/blog/2")];
    warm(addr, &pages).await;
    // 2,500 tags in one header (FOSHttpCache splits at 7,500 bytes; this is 3.5 times that).
    let tags: Vec<String> = (0..2500).map(|i| format!("tag\\-{i}")).collect();
    let header = format!("(^|,)({}|post\\-2)(,|$)", tags.join("|"));
    assert!(header.len() > 20_000);
    let request = format!("BAN / HTTP/1.1\r\nHost: site.example\r\nX-Cache-Tags: {header}\r\n\r\n");
    let banned = raw(addr, &request).await;
    assert_eq!(
        banned.status,
        200,
        "{}",
        &banned.text()[..200.min(banned.text().len())]
    );
    assert_eq!(outcomes(addr, &pages).await, ["hit", "miss"]);
    // Past max_header_kb (32 KiB) the head is refused before anything reads it.
    let huge = format!("(^|,)({})(,|$)", "a|".repeat(20_000));
    let request = format!("BAN / HTTP/1.1\r\nHost: site.example\r\nX-Cache-Tags: {huge}\r\n\r\n");
    let mut conn = Conn::open(addr).await;
    conn.send(request.as_bytes()).await;
    let refused = conn.response(false).await.expect("an answer");
    assert_eq!(refused.status, 431);
    assert_eq!(stats(&server).await["bans_added"], 1);
    server.shutdown().await;
}
