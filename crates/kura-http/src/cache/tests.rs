use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::rules::freshness::{LifetimeSource, StaleRules};

/// A freshly received response, fresh for `seconds` (also the ban tests' helper).
pub(crate) fn fresh_for(seconds: u64) -> Freshness {
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
    // A response with another Vary replaces the page: the old variants are gone, and requests
    // are matched on the new field only.
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

fn entries(cache: &Cache) -> usize {
    cache.store().stats().curr_items as usize
}

#[test]
fn a_urls_variants_are_one_entry_and_never_outlive_it() {
    // Two variants a URL in a cache far too small for them: whatever is evicted, every entry
    // left answers both variants (with one entry per variant, a variant whose Vary record was
    // evicted stayed in memory, unreachable).
    let cache = Cache::new(1 << 20, 1);
    let vary = fields(&[("vary", "x-device-class")]);
    let (pc, sp) = (
        fields(&[("x-device-class", "pc")]),
        fields(&[("x-device-class", "sp")]),
    );
    let body = vec![b'p'; 3000];
    let urls: Vec<String> = (0..2000).map(|i| format!("http://h/page/{i}")).collect();
    for (i, url) in urls.iter().enumerate() {
        assert!(insert(&cache, url.as_bytes(), &pc, &vary, &body));
        assert!(insert(&cache, url.as_bytes(), &sp, &vary, &body));
        // Some pages read again, so the policy has something to keep.
        if i % 3 == 0 {
            cache.lookup(urls[i / 2].as_bytes(), &pc);
        }
    }
    assert!(cache.store().stats().evictions > 0, "the cache was churned");
    let mut whole = 0;
    for url in &urls {
        let (a, b) = (
            cache.lookup(url.as_bytes(), &pc),
            cache.lookup(url.as_bytes(), &sp),
        );
        match (body_of(a), body_of(b)) {
            (Some(_), Some(_)) => whole += 1,
            (None, None) => {}
            other => panic!("{url}: one variant without the other: {other:?}"),
        }
    }
    assert!(whole > 50, "{whole} pages held");
    assert_eq!(
        entries(&cache),
        whole,
        "an entry per page held, nothing else"
    );
}

#[test]
fn a_page_keeps_a_bounded_number_of_variants_newest_first() {
    let cache = Cache::new(8 << 20, 1);
    let vary = fields(&[("vary", "accept-language")]);
    let languages: Vec<HeaderMap> = (0..page::MAX_VARIANTS + 4)
        .map(|i| {
            let mut map = HeaderMap::new();
            map.insert("accept-language", HeaderValue::from(i));
            map
        })
        .collect();
    for (i, language) in languages.iter().enumerate() {
        assert!(insert(
            &cache,
            b"k",
            language,
            &vary,
            format!("{i}").as_bytes()
        ));
    }
    // The same variant again replaces its copy.
    let last = languages.len() - 1;
    assert!(insert(&cache, b"k", &languages[last], &vary, b"again"));
    for (i, language) in languages.iter().enumerate() {
        let got = body_of(cache.lookup(b"k", language));
        if i == last {
            assert_eq!(got.as_deref(), Some(&b"again"[..]));
        } else if i + page::MAX_VARIANTS > last {
            assert_eq!(got, Some(format!("{i}").into_bytes()), "{i}");
        } else {
            assert!(got.is_none(), "{i} is among the oldest, dropped");
        }
    }
    assert_eq!(entries(&cache), 1);
}

#[test]
fn soften_makes_every_variant_stale() {
    let cache = Cache::new(8 << 20, 1);
    let vary = fields(&[("vary", "accept-encoding")]);
    let (gzip, none) = (fields(&[("accept-encoding", "gzip")]), HeaderMap::new());
    assert!(insert(&cache, b"k", &gzip, &vary, b"g"));
    assert!(insert(&cache, b"k", &none, &vary, b"n"));
    assert!(insert(&cache, b"plain", &none, &HeaderMap::new(), b"p"));
    let later = SystemTime::now() + Duration::from_secs(1);
    assert!(cache.soften(b"k", later));
    assert!(cache.soften(b"plain", later));
    assert!(!cache.soften(b"absent", later));
    for (key, request) in [(&b"k"[..], &gzip), (b"k", &none), (b"plain", &none)] {
        let Lookup::Hit(object) = cache.lookup(key, request) else {
            panic!("still stored for grace");
        };
        assert!(object.freshness.remaining(later).is_zero(), "stale");
    }
}
