//! The ban list with the cache: lookups, inserts, soft bans, keys.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::cache::{Cache, Lookup};
use crate::rules::freshness::Freshness;
use crate::rules::CachePolicy;

pub(super) use crate::cache::tests::fresh_for;

pub(super) fn store(cache: &Cache, url: &str, fields: &[(&'static str, &'static str)]) -> bool {
    let mut headers = HeaderMap::new();
    for (name, value) in fields {
        headers.append(*name, HeaderValue::from_static(value));
    }
    cache.insert(
        &CachePolicy::default(),
        Duration::ZERO,
        url.as_bytes(),
        &HeaderMap::new(),
        StatusCode::OK,
        &fresh_for(60),
        &headers,
        &[b"body".as_slice()],
    )
}

pub(super) fn hit(cache: &Cache, url: &str) -> Option<Freshness> {
    match cache.lookup(url.as_bytes(), &HeaderMap::new()) {
        Lookup::Hit(object) => Some(object.freshness),
        _ => None,
    }
}

#[test]
fn keys_split_into_host_and_url() {
    assert_eq!(
        split_key(b"http://example.com/a?b=1"),
        Some(("example.com", "/a?b=1"))
    );
    assert_eq!(split_key(b"http://h:8080/"), Some(("h", "/")));
    assert_eq!(split_key(b"https://h"), Some(("h", "/")));
    assert_eq!(split_key(b"http://[::1]:80/x"), Some(("[::1]", "/x")));
    assert_eq!(split_key(b"http://[::1]/x"), Some(("[::1]", "/x")));
    assert_eq!(split_key(b"no scheme"), None);
}

#[test]
fn a_ban_drops_older_objects_at_lookup_and_spares_newer_ones() {
    let cache = Cache::new(8 << 20, 1);
    assert!(store(&cache, "http://h/blog/1", &[]));
    assert!(store(&cache, "http://h/news/1", &[]));
    let seq = cache
        .bans()
        .add(Expr::parse("obj.url ~ ^/blog/").unwrap(), false);
    assert_eq!(seq, 1);
    assert!(hit(&cache, "http://h/blog/1").is_none());
    assert!(hit(&cache, "http://h/news/1").is_some());
    // Stored after the ban: not banned, however often it is looked up.
    assert!(store(&cache, "http://h/blog/1", &[]));
    for _ in 0..3 {
        assert!(hit(&cache, "http://h/blog/1").is_some());
    }
    let counters = &cache.bans().counters;
    assert_eq!(counters.banned_lookup.load(Ordering::Relaxed), 1);
}

#[test]
fn a_fetch_that_began_before_a_ban_is_checked_when_stored() {
    let cache = Cache::new(8 << 20, 1);
    let before = cache.bans().hold();
    cache
        .bans()
        .add(Expr::parse("obj.url == /late").unwrap(), false);
    // The fetch holds the ban: neither lookups nor the lurker can complete it meanwhile.
    assert_eq!(cache.bans().complete_unreferenced(), 0);
    let policy = CachePolicy::default();
    let stored = cache.insert_since(
        &before,
        &policy,
        Duration::ZERO,
        b"http://h/late",
        &HeaderMap::new(),
        StatusCode::OK,
        &fresh_for(60),
        &HeaderMap::new(),
        &[b"x".as_slice()],
    );
    assert!(!stored);
    assert!(hit(&cache, "http://h/late").is_none());
}

#[test]
fn a_soft_ban_makes_objects_stale_from_the_ban_on() {
    let cache = Cache::new(8 << 20, 1);
    assert!(store(&cache, "http://h/a", &[("x-id", "7")]));
    assert!(store(&cache, "http://h/b", &[("x-id", "8")]));
    cache
        .bans()
        .add(Expr::parse("obj.http.x-id == 7").unwrap(), true);
    let now = SystemTime::now();
    let soft = hit(&cache, "http://h/a").expect("a soft ban keeps the object");
    assert!(soft.remaining(now).is_zero(), "still fresh: {soft:?}");
    let other = hit(&cache, "http://h/b").expect("not matched");
    assert!(!other.remaining(now).is_zero());
}

#[test]
fn a_hard_ban_wins_over_a_soft_one() {
    let cache = Cache::new(8 << 20, 1);
    assert!(store(&cache, "http://h/a", &[]));
    let bans = cache.bans();
    bans.add(Expr::parse("obj.url == /a").unwrap(), true);
    bans.add(Expr::parse("obj.host == h").unwrap(), false);
    bans.add(Expr::parse("obj.url == /zzz").unwrap(), true);
    assert!(hit(&cache, "http://h/a").is_none());
}

#[test]
fn tags_ban_every_tagged_variant() {
    let cache = Cache::new(8 << 20, 1);
    assert!(store(
        &cache,
        "http://h/1",
        &[("surrogate-key", "post-1 home")]
    ));
    assert!(store(&cache, "http://h/2", &[("xkey", "post-2, home")]));
    assert!(store(&cache, "http://h/3", &[("surrogate-key", "post-3")]));
    cache.bans().add(Expr::tag("home"), false);
    assert!(hit(&cache, "http://h/1").is_none());
    assert!(hit(&cache, "http://h/2").is_none());
    assert!(hit(&cache, "http://h/3").is_some());
}

#[test]
fn a_newer_ban_with_the_same_expression_completes_the_older() {
    let cache = Cache::new(8 << 20, 1);
    assert!(store(&cache, "http://h/blog/1", &[]));
    let bans = cache.bans();
    let blog = || Expr::parse("obj.url ~ ^/blog/").unwrap();
    bans.add(blog(), true);
    bans.add(blog(), true);
    assert_eq!(bans.len(), 1, "soft after soft");
    bans.add(blog(), false);
    assert_eq!(bans.len(), 1, "hard after soft");
    bans.add(blog(), true);
    assert_eq!(bans.len(), 2, "a soft ban does not cover a hard one");
    bans.add(Expr::parse("obj.url ~ ^/news/").unwrap(), false);
    assert_eq!(bans.len(), 3);
    let counters = &bans.counters;
    assert_eq!(counters.completed_superseded.load(Ordering::Relaxed), 2);
    // The object older than every ban is still dropped: the surviving hard ban covers it.
    assert!(hit(&cache, "http://h/blog/1").is_none());
}
