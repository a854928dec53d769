use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::rules::freshness::{LifetimeSource, StaleRules};

fn fresh_for(seconds: u64) -> Freshness {
    Freshness {
        lifetime: Duration::from_secs(seconds),
        source: LifetimeSource::MaxAge,
        initial_age: Duration::ZERO,
        response_time: SystemTime::now(),
        stale: StaleRules::default(),
    }
}

fn fields(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, HeaderValue::from_static(value));
    }
    map
}

fn insert(
    cache: &Cache,
    key: &[u8],
    request: &HeaderMap,
    response: &HeaderMap,
    body: &[u8],
) -> bool {
    let policy = CachePolicy::default();
    cache.insert(
        &policy,
        Duration::ZERO,
        key,
        request,
        StatusCode::OK,
        &fresh_for(60),
        response,
        &[body],
    )
}

fn body_of(lookup: Lookup) -> Option<Vec<u8>> {
    match lookup {
        Lookup::Hit(object) => Some(object.body.to_vec()),
        _ => None,
    }
}

#[test]
fn variants_and_a_change_of_vary() {
    let cache = Cache::new(8 << 20, 1);
    let vary = fields(&[("vary", "accept-encoding")]);
    let gzip = fields(&[("accept-encoding", "gzip")]);
    let none = HeaderMap::new();
    assert!(insert(&cache, b"k", &gzip, &vary, b"g"));
    assert!(insert(&cache, b"k", &none, &vary, b"n"));
    assert_eq!(
        body_of(cache.lookup(b"k", &gzip)).as_deref(),
        Some(&b"g"[..])
    );
    assert_eq!(
        body_of(cache.lookup(b"k", &none)).as_deref(),
        Some(&b"n"[..])
    );
    assert!(body_of(cache.lookup(b"k", &fields(&[("accept-encoding", "br")]))).is_none());
    // A response with another Vary starts a new generation: the old variants are unreachable,
    // and requests are matched on the new field only.
    let by_language = fields(&[("vary", "accept-language")]);
    let japanese = fields(&[("accept-language", "ja")]);
    assert!(insert(&cache, b"k", &japanese, &by_language, b"ja"));
    assert!(body_of(cache.lookup(b"k", &none)).is_none());
    assert!(body_of(cache.lookup(b"k", &gzip)).is_none());
    let japanese_gzip = fields(&[("accept-language", "ja"), ("accept-encoding", "gzip")]);
    assert_eq!(
        body_of(cache.lookup(b"k", &japanese_gzip)).as_deref(),
        Some(&b"ja"[..])
    );
    // Vary: * is never stored.
    assert!(!insert(
        &cache,
        b"star",
        &none,
        &fields(&[("vary", "*")]),
        b"x"
    ));
}

#[test]
fn invalidation_reaches_every_variant() {
    let cache = Cache::new(8 << 20, 1);
    let vary = fields(&[("vary", "accept-encoding")]);
    let gzip = fields(&[("accept-encoding", "gzip")]);
    assert!(insert(&cache, b"k", &gzip, &vary, b"g"));
    assert!(cache.invalidate(b"k"));
    assert!(body_of(cache.lookup(b"k", &gzip)).is_none());
    // A later response with the same Vary does not bring the old variant back.
    assert!(insert(&cache, b"k", &HeaderMap::new(), &vary, b"n"));
    assert!(body_of(cache.lookup(b"k", &gzip)).is_none());
}

#[test]
fn hit_for_miss_and_limits() {
    let cache = Cache::new(8 << 20, 1);
    cache.hit_for_miss(b"h", Duration::from_secs(10));
    assert!(matches!(
        cache.lookup(b"h", &HeaderMap::new()),
        Lookup::HitForMiss
    ));
    assert!(insert(
        &cache,
        b"h",
        &HeaderMap::new(),
        &HeaderMap::new(),
        b"now cacheable"
    ));
    assert!(body_of(cache.lookup(b"h", &HeaderMap::new())).is_some());
    let long = vec![b'u'; PRIMARY_MAX + 1];
    assert!(!insert(
        &cache,
        &long,
        &HeaderMap::new(),
        &HeaderMap::new(),
        b"x"
    ));
    // Nothing to keep it for: stale at once, no validator, no stale permission.
    let policy = CachePolicy {
        grace: Duration::ZERO,
        stale_if_error: Duration::ZERO,
        ..CachePolicy::default()
    };
    let stale = fresh_for(0);
    assert!(!cache.insert(
        &policy,
        Duration::ZERO,
        b"z",
        &HeaderMap::new(),
        StatusCode::OK,
        &stale,
        &HeaderMap::new(),
        &[b"x"]
    ));
    // Larger than the store can hold.
    assert!(!insert(
        &cache,
        b"big",
        &HeaderMap::new(),
        &HeaderMap::new(),
        &vec![0; 16 << 20]
    ));
}
