//! Tests of freshness lifetimes (RFC 9111 §4.2.1, §4.2.2) and their summary.

use super::*;
use http::{HeaderMap, HeaderValue, StatusCode};

pub(crate) fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// 1_000_000_000 s after the epoch: Sun, 09 Sep 2001 01:46:40 GMT.
const NOW: u64 = 1_000_000_000;
const DATE_NOW: &str = "Sun, 09 Sep 2001 01:46:40 GMT";
const PLUS_100: &str = "Sun, 09 Sep 2001 01:48:20 GMT";
const MINUS_1000: &str = "Sun, 09 Sep 2001 01:30:00 GMT";
const MINUS_10_DAYS: &str = "Thu, 30 Aug 2001 01:46:40 GMT";

fn fresh_with(
    policy: &CachePolicy,
    status: u16,
    pairs: &[(&'static str, &'static str)],
) -> Freshness {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    let control = ResponseControl::from_headers(&policy.targeted_fields, &headers);
    let head = ResponseHead {
        status: StatusCode::from_u16(status).unwrap(),
        headers: &headers,
    };
    Freshness::new(policy, head, &control, at(NOW), at(NOW))
}

fn fresh(status: u16, pairs: &[(&'static str, &'static str)]) -> Freshness {
    fresh_with(&CachePolicy::default(), status, pairs)
}

fn lifetime(pairs: &[(&'static str, &'static str)]) -> (Duration, LifetimeSource) {
    let f = fresh(200, pairs);
    (f.lifetime, f.source)
}

// §4.2.1: a shared cache uses s-maxage first.
#[test]
fn s_maxage_first() {
    let pairs = [
        ("cache-control", "max-age=10, s-maxage=20"),
        ("expires", PLUS_100),
    ];
    assert_eq!(lifetime(&pairs), (secs(20), LifetimeSource::SMaxAge));
}

// §4.2.1: then max-age; §5.3: max-age makes Expires ignored.
#[test]
fn max_age_over_expires() {
    let pairs = [
        ("cache-control", "max-age=10"),
        ("expires", PLUS_100),
        ("date", DATE_NOW),
    ];
    assert_eq!(lifetime(&pairs), (secs(10), LifetimeSource::MaxAge));
    let pairs = [("cache-control", "max-age=10"), ("expires", "0")];
    assert_eq!(lifetime(&pairs), (secs(10), LifetimeSource::MaxAge));
}

// §4.2.1: then Expires minus Date.
#[test]
fn expires_minus_date() {
    let pairs = [("expires", PLUS_100), ("date", DATE_NOW)];
    assert_eq!(lifetime(&pairs), (secs(100), LifetimeSource::Expires));
    // Without Date, the receipt time (RFC 9110 §6.6.1) stands in.
    assert_eq!(
        lifetime(&[("expires", PLUS_100)]),
        (secs(100), LifetimeSource::Expires)
    );
    // Expires before Date: zero, not negative.
    let pairs = [("expires", MINUS_1000), ("date", DATE_NOW)];
    assert_eq!(lifetime(&pairs), (Duration::ZERO, LifetimeSource::Expires));
    // Date far in the past with Expires after it: only the difference counts (clock skew).
    let pairs = [("expires", MINUS_1000), ("date", MINUS_10_DAYS)];
    assert_eq!(lifetime(&pairs).0, secs(10 * 86_400 - 1_000));
}

// §5.3: an invalid Expires ("0") means already expired; two that disagree are invalid.
#[test]
fn invalid_expires_is_stale() {
    for value in ["0", "-1", "never", ""] {
        assert_eq!(
            lifetime(&[("expires", value)]),
            (Duration::ZERO, LifetimeSource::Invalid),
            "{value}"
        );
    }
    let pairs = [("expires", PLUS_100), ("expires", MINUS_1000)];
    assert_eq!(lifetime(&pairs), (Duration::ZERO, LifetimeSource::Invalid));
}

// §4.2.1: invalid freshness information is stale; it does not fall back to Expires.
#[test]
fn invalid_max_age_is_stale() {
    for value in [
        "max-age=abc",
        "max-age=1, max-age=2",
        "max-age=-5",
        "s-maxage=1.5",
    ] {
        let pairs = [("cache-control", value), ("expires", PLUS_100)];
        assert_eq!(
            lifetime(&pairs),
            (Duration::ZERO, LifetimeSource::Invalid),
            "{value}"
        );
    }
}

// §1.2.2: a huge max-age is 2^31 seconds, and Expires far ahead is capped alike.
#[test]
fn huge_lifetimes() {
    let pairs = [("cache-control", "max-age=999999999999999999999")];
    assert_eq!(lifetime(&pairs).0, secs(1 << 31));
    let pairs = [
        ("expires", "Fri, 31 Dec 9999 23:59:59 GMT"),
        ("date", DATE_NOW),
    ];
    assert_eq!(lifetime(&pairs).0, secs(1 << 31));
    let f = fresh(200, &[("cache-control", "max-age=999999999999999999999")]);
    assert!(f.is_fresh(at(NOW + (1 << 30))));
}

// §4.2.2: heuristic from Last-Modified: 10% of the age, capped.
#[test]
fn heuristic_from_last_modified() {
    let pairs = [("date", DATE_NOW), ("last-modified", MINUS_1000)];
    assert_eq!(lifetime(&pairs), (secs(100), LifetimeSource::LastModified));
    let pairs = [
        ("date", DATE_NOW),
        ("last-modified", "Thu, 01 Jan 1970 00:00:01 GMT"),
    ];
    assert_eq!(
        lifetime(&pairs),
        (secs(86_400), LifetimeSource::LastModified)
    );
    let policy = CachePolicy {
        heuristic_percent: 50,
        heuristic_max: secs(300),
        ..CachePolicy::default()
    };
    let f = fresh_with(
        &policy,
        200,
        &[("date", DATE_NOW), ("last-modified", MINUS_1000)],
    );
    assert_eq!(f.lifetime, secs(300));
    assert!(f.source.is_heuristic());
}

// §4.2.2: with no Last-Modified (or one after Date, or invalid): the default TTL.
#[test]
fn heuristic_default_ttl() {
    assert_eq!(lifetime(&[]), (secs(120), LifetimeSource::DefaultTtl));
    let pairs = [("date", DATE_NOW), ("last-modified", PLUS_100)];
    assert_eq!(lifetime(&pairs), (secs(120), LifetimeSource::DefaultTtl));
    assert_eq!(
        lifetime(&[("last-modified", "junk")]).1,
        LifetimeSource::DefaultTtl
    );
    let policy = CachePolicy {
        default_ttl: secs(7),
        ..CachePolicy::default()
    };
    assert_eq!(fresh_with(&policy, 404, &[]).lifetime, secs(7));
}

// §4.2.2: heuristics only for heuristically cacheable statuses, or with public.
#[test]
fn heuristic_only_where_allowed() {
    let f = fresh(302, &[("last-modified", MINUS_1000)]);
    assert_eq!(
        (f.lifetime, f.source),
        (Duration::ZERO, LifetimeSource::None)
    );
    let f = fresh(302, &[("cache-control", "public")]);
    assert_eq!(
        (f.lifetime, f.source),
        (secs(120), LifetimeSource::DefaultTtl)
    );
    // §4.2.2: no heuristic when an explicit expiration is present, even if zero.
    assert_eq!(
        lifetime(&[("cache-control", "max-age=0")]),
        (Duration::ZERO, LifetimeSource::MaxAge)
    );
}

// RFC 9213 §2.2: under a targeted field, Cache-Control and Expires are ignored.
#[test]
fn targeted_field_lifetime() {
    let policy = CachePolicy::default().with_cdn_cache_control();
    let pairs = [
        ("cache-control", "max-age=5"),
        ("expires", PLUS_100),
        ("cdn-cache-control", "max-age=600"),
    ];
    assert_eq!(fresh_with(&policy, 200, &pairs).lifetime, secs(600));
    let pairs = [("expires", "0"), ("cdn-cache-control", "none")];
    let f = fresh_with(&policy, 200, &pairs);
    assert_eq!(
        (f.lifetime, f.source),
        (secs(120), LifetimeSource::DefaultTtl)
    );
}

// §4.2: fresh while lifetime > current_age; the age includes the Age field.
#[test]
fn fresh_until_lifetime() {
    let f = fresh(200, &[("cache-control", "max-age=100"), ("age", "30")]);
    assert_eq!(f.initial_age, secs(30));
    assert!(f.is_fresh(at(NOW + 69)));
    assert_eq!(f.remaining(at(NOW + 69)), secs(1));
    assert!(!f.is_fresh(at(NOW + 70)));
    assert_eq!(f.staleness(at(NOW + 75)), secs(5));
    assert_eq!(f.staleness(at(NOW)), Duration::ZERO);
    assert_eq!(f.current_age(at(NOW + 10)), secs(40));
}

// The stale rules each directive sets.
#[test]
fn stale_rules() {
    let f = fresh(
        200,
        &[(
            "cache-control",
            "max-age=1, stale-while-revalidate=30, stale-if-error=600",
        )],
    );
    assert_eq!(
        f.stale,
        StaleRules {
            while_revalidate: Some(secs(30)),
            if_error: Some(secs(600)),
            ..StaleRules::default()
        }
    );
    assert!(fresh(200, &[("cache-control", "no-cache")]).stale.no_cache);
    assert!(
        !fresh(200, &[("cache-control", "no-cache=\"x\"")])
            .stale
            .no_cache
    );
    assert!(
        fresh(200, &[("cache-control", "must-revalidate")])
            .stale
            .must_revalidate
    );
    assert!(
        fresh(200, &[("cache-control", "proxy-revalidate")])
            .stale
            .must_revalidate
    );
    assert!(
        fresh(200, &[("cache-control", "s-maxage=5")])
            .stale
            .s_maxage
    );
    let bad = fresh(200, &[("cache-control", "stale-if-error=x")]);
    assert_eq!(bad.stale.if_error, None);
}

// Responses that can never save a fetch are not worth storing.
#[test]
fn worth_storing() {
    assert!(fresh(200, &[("cache-control", "max-age=5")]).worth_storing(false));
    assert!(!fresh(200, &[("cache-control", "max-age=0")]).worth_storing(false));
    assert!(fresh(200, &[("cache-control", "max-age=0")]).worth_storing(true));
    assert!(fresh(200, &[("cache-control", "max-age=0, stale-if-error=60")]).worth_storing(false));
    let forbidden = fresh(
        200,
        &[(
            "cache-control",
            "max-age=0, must-revalidate, stale-if-error=60",
        )],
    );
    assert!(!forbidden.worth_storing(false));
    assert!(!fresh(200, &[("cache-control", "no-cache, max-age=60")]).worth_storing(false));
    assert!(fresh(200, &[("cache-control", "no-cache, max-age=60")]).worth_storing(true));
}
