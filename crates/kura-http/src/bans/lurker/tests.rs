use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::Lurker;
use crate::bans::tests::{hit, store};
use crate::bans::Expr;
use crate::cache::Cache;

/// Steps until the lurker is idle; returns the steps taken.
fn until_idle(lurker: &mut Lurker, cache: &Cache, batch: usize) -> usize {
    for steps in 1..100_000 {
        if lurker.step(cache, batch).idle {
            return steps;
        }
    }
    panic!("the lurker never finished");
}

#[test]
fn the_lurker_drops_banned_objects_and_empties_the_list_without_lookups() {
    let cache = Cache::new(32 << 20, 4);
    for i in 0..500 {
        let url = format!("http://h/{}/{i}", if i % 2 == 0 { "even" } else { "odd" });
        assert!(store(&cache, &url, &[]));
    }
    cache
        .bans()
        .add(Expr::parse("obj.url ~ ^/even/").unwrap(), false);
    cache
        .bans()
        .add(Expr::parse("obj.url == /odd/1").unwrap(), false);
    assert_eq!(cache.bans().len(), 2);
    let mut lurker = Lurker::default();
    let steps = until_idle(&mut lurker, &cache, 16);
    // Small batches: the walk took many steps.
    assert!(steps > 10, "{steps}");
    assert_eq!(cache.bans().len(), 0);
    let counters = &cache.bans().counters;
    assert_eq!(counters.banned_lurker.load(Ordering::Relaxed), 251);
    assert_eq!(counters.completed_lurker.load(Ordering::Relaxed), 2);
    assert_eq!(counters.banned_lookup.load(Ordering::Relaxed), 0);
    assert_eq!(cache.store().len(), 249);
    assert!(hit(&cache, "http://h/odd/3").is_some());
}

#[test]
fn a_ban_added_during_a_walk_waits_for_the_next_walk() {
    let cache = Cache::new(32 << 20, 2);
    for i in 0..200 {
        assert!(store(&cache, &format!("http://h/{i}"), &[]));
    }
    cache
        .bans()
        .add(Expr::parse("obj.url == /1").unwrap(), false);
    let mut lurker = Lurker::default();
    assert!(!lurker.step(&cache, 8).idle);
    let late = cache
        .bans()
        .add(Expr::parse("obj.url ~ ^/2").unwrap(), false);
    // The first walk completes only the first ban.
    let mut completed = 0;
    while completed == 0 {
        completed = lurker.step(&cache, 8).completed;
    }
    assert_eq!(completed, 1);
    let left = cache.bans().snapshot();
    assert_eq!(left.iter().map(|b| b.seq).collect::<Vec<_>>(), [late]);
    until_idle(&mut lurker, &cache, 8);
    assert!(cache.bans().is_empty());
    for i in [2, 20, 29, 200 - 1] {
        let url = format!("http://h/{i}");
        assert_eq!(
            hit(&cache, &url).is_some(),
            !url.starts_with("http://h/2"),
            "{url}"
        );
    }
}

#[test]
fn the_lurker_rewrites_soft_banned_objects_stale() {
    let cache = Cache::new(32 << 20, 1);
    assert!(store(&cache, "http://h/a", &[("surrogate-key", "t")]));
    assert!(store(&cache, "http://h/b", &[]));
    cache.bans().add(Expr::tag("t"), true);
    let mut lurker = Lurker::default();
    until_idle(&mut lurker, &cache, 1_000);
    assert!(cache.bans().is_empty());
    assert_eq!(cache.bans().counters.softened.load(Ordering::Relaxed), 1);
    // The ban is gone; the object stays stale on its own.
    let now = SystemTime::now();
    let a = hit(&cache, "http://h/a").expect("soft: kept");
    assert!(a.remaining(now).is_zero());
    let b = hit(&cache, "http://h/b").expect("not tagged");
    assert!(!b.remaining(now).is_zero());
}

#[test]
fn an_idle_lurker_walks_nothing() {
    let cache = Cache::new(8 << 20, 1);
    assert!(store(&cache, "http://h/a", &[]));
    let step = Lurker::default().step(&cache, 1_000);
    assert!(step.idle);
    assert_eq!(step.checked, 0);
}

/// Stores a variant of `url` for device class `class`, with response field `x-class`.
fn store_variant(cache: &Cache, url: &str, class: &'static str) -> bool {
    use crate::rules::CachePolicy;
    use http::{HeaderMap, HeaderValue, StatusCode};
    let mut request = HeaderMap::new();
    request.insert("x-device-class", HeaderValue::from_static(class));
    let mut response = HeaderMap::new();
    response.insert("vary", HeaderValue::from_static("x-device-class"));
    response.insert("x-class", HeaderValue::from_static(class));
    cache.insert(
        &CachePolicy::default(),
        std::time::Duration::ZERO,
        url.as_bytes(),
        &request,
        StatusCode::OK,
        &crate::bans::tests::fresh_for(60),
        &response,
        &[class.as_bytes()],
    )
}

fn variant_hit(cache: &Cache, url: &str, class: &'static str) -> bool {
    let mut request = http::HeaderMap::new();
    request.insert("x-device-class", http::HeaderValue::from_static(class));
    matches!(
        cache.lookup(url.as_bytes(), &request),
        crate::cache::Lookup::Hit(_)
    )
}

#[test]
fn the_lurker_checks_each_variant_of_a_page() {
    let cache = Cache::new(32 << 20, 2);
    for i in 0..50 {
        let url = format!("http://h/{i}");
        assert!(store_variant(&cache, &url, "pc"));
        assert!(store_variant(&cache, &url, "sp"));
    }
    assert!(store_variant(&cache, "http://h/only-sp", "sp"));
    // A ban on a response field matches one variant of each page; the page stays with the
    // other. A page whose only variant is banned goes.
    cache
        .bans()
        .add(Expr::parse("obj.http.x-class == sp").unwrap(), false);
    let mut lurker = Lurker::default();
    until_idle(&mut lurker, &cache, 8);
    assert_eq!(cache.bans().len(), 0);
    let counters = &cache.bans().counters;
    assert_eq!(counters.banned_lurker.load(Ordering::Relaxed), 51);
    assert!(
        counters.lurker_checked.load(Ordering::Relaxed) >= 101,
        "each variant checked"
    );
    assert_eq!(cache.store().len(), 50);
    assert!(variant_hit(&cache, "http://h/7", "pc"));
    assert!(!variant_hit(&cache, "http://h/7", "sp"));
    assert!(!variant_hit(&cache, "http://h/only-sp", "sp"));
}
