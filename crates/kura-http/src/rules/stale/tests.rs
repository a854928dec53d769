//! Tests of the serve/stale decision (RFC 9111 §4.2.4, §5.2; RFC 5861).

use super::*;
use crate::rules::freshness::{LifetimeSource, StaleRules};
use Backend::{Available, Failed};
use Decision::*;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// A response received at t=1000 with age 0 and a 100 s lifetime.
fn stored(rules: StaleRules) -> Freshness {
    Freshness {
        lifetime: secs(100),
        source: LifetimeSource::MaxAge,
        initial_age: Duration::ZERO,
        response_time: at(1_000),
        stale: rules,
    }
}

fn plain() -> Freshness {
    stored(StaleRules::default())
}

fn no_grace() -> CachePolicy {
    CachePolicy {
        grace: Duration::ZERO,
        stale_if_error: Duration::ZERO,
        ..CachePolicy::default()
    }
}

fn honour() -> CachePolicy {
    CachePolicy {
        client_directives: ClientDirectives::Honour,
        ..no_grace()
    }
}

fn req(line: &str) -> RequestDirectives {
    RequestDirectives::from_lines([line.as_bytes()])
}

fn decide_at(
    policy: &CachePolicy,
    f: &Freshness,
    request: &str,
    backend: Backend,
    t: u64,
) -> Decision {
    decide(policy, f, true, &req(request), backend, at(t))
}

// §4.2: fresh responses are served as they are.
#[test]
fn fresh_is_served() {
    let p = CachePolicy::default();
    assert_eq!(decide_at(&p, &plain(), "", Available, 1_000), Fresh);
    assert_eq!(decide_at(&p, &plain(), "", Available, 1_099), Fresh);
}

// §4.2.4: stale with no permission: revalidate (validators) or fetch (none).
#[test]
fn stale_without_permission() {
    let p = no_grace();
    assert_eq!(decide_at(&p, &plain(), "", Available, 1_100), Revalidate);
    assert_eq!(
        decide(&p, &plain(), false, &req(""), Available, at(1_100)),
        Fetch
    );
}

// Operator grace: stale within grace is served while refreshed in the background.
#[test]
fn operator_grace() {
    let p = CachePolicy::default(); // grace 10 s
    assert_eq!(
        decide_at(&p, &plain(), "", Available, 1_105),
        StaleWhileRevalidate
    );
    assert_eq!(
        decide_at(&p, &plain(), "", Available, 1_110),
        StaleWhileRevalidate
    );
    assert_eq!(decide_at(&p, &plain(), "", Available, 1_111), Revalidate);
    // No grace for responses that never had a lifetime.
    let zero = Freshness {
        lifetime: Duration::ZERO,
        ..plain()
    };
    assert_eq!(decide_at(&p, &zero, "", Available, 1_000), Revalidate);
}

// RFC 5861 §3: stale-while-revalidate.
#[test]
fn stale_while_revalidate() {
    let f = stored(StaleRules {
        while_revalidate: Some(secs(60)),
        ..StaleRules::default()
    });
    let p = no_grace();
    assert_eq!(
        decide_at(&p, &f, "", Available, 1_160),
        StaleWhileRevalidate
    );
    assert_eq!(decide_at(&p, &f, "", Available, 1_161), Revalidate);
    // It applies to max-age=0 responses too: the origin asked for it.
    let zero = Freshness {
        lifetime: Duration::ZERO,
        ..f
    };
    assert_eq!(
        decide_at(&p, &zero, "", Available, 1_030),
        StaleWhileRevalidate
    );
}

// RFC 5861 §4: stale-if-error, only when the backend fails.
#[test]
fn stale_if_error() {
    let f = stored(StaleRules {
        if_error: Some(secs(600)),
        ..StaleRules::default()
    });
    let p = no_grace();
    assert_eq!(decide_at(&p, &f, "", Available, 1_200), Revalidate);
    assert_eq!(decide_at(&p, &f, "", Failed, 1_200), StaleOnError);
    assert_eq!(decide_at(&p, &f, "", Failed, 1_700), StaleOnError);
    assert_eq!(decide_at(&p, &f, "", Failed, 1_701), GatewayTimeout);
    // A stale-while-revalidate window also covers a failure.
    let swr = stored(StaleRules {
        while_revalidate: Some(secs(60)),
        ..StaleRules::default()
    });
    assert_eq!(decide_at(&p, &swr, "", Failed, 1_150), StaleOnError);
}

// Operator stale-if-error (default 10 s).
#[test]
fn operator_stale_if_error() {
    let p = CachePolicy {
        stale_if_error: secs(3_600),
        ..no_grace()
    };
    assert_eq!(decide_at(&p, &plain(), "", Failed, 4_700), StaleOnError);
    assert_eq!(decide_at(&p, &plain(), "", Failed, 4_701), GatewayTimeout);
    // It covers responses with no lifetime too (serving them beats an error page).
    let zero = Freshness {
        lifetime: Duration::ZERO,
        ..plain()
    };
    assert_eq!(decide_at(&p, &zero, "", Failed, 1_500), StaleOnError);
}

// A fresh response is served even when the backend fails (e.g. after a client's no-cache).
#[test]
fn fresh_on_failure() {
    assert_eq!(
        decide_at(&honour(), &plain(), "no-cache", Failed, 1_050),
        Fresh
    );
}

// §5.2.2.2 / §5.2.2.8: must-revalidate and proxy-revalidate forbid every stale use.
#[test]
fn must_revalidate_forbids_stale() {
    let f = stored(StaleRules {
        must_revalidate: true,
        while_revalidate: Some(secs(60)),
        if_error: Some(secs(60)),
        ..StaleRules::default()
    });
    let p = CachePolicy {
        client_directives: ClientDirectives::Honour,
        ..CachePolicy::default()
    };
    assert_eq!(decide_at(&p, &f, "", Available, 1_050), Fresh);
    assert_eq!(decide_at(&p, &f, "max-stale", Available, 1_101), Revalidate);
    assert_eq!(decide_at(&p, &f, "", Available, 1_101), Revalidate);
    assert_eq!(decide_at(&p, &f, "", Failed, 1_101), GatewayTimeout);
    assert_eq!(
        decide_at(&p, &f, "only-if-cached, max-stale", Available, 1_101),
        GatewayTimeout
    );
}

// §5.2.2.4: unqualified no-cache: always validate, never serve without a successful one.
#[test]
fn no_cache_always_validates() {
    let f = stored(StaleRules {
        no_cache: true,
        if_error: Some(secs(60)),
        ..StaleRules::default()
    });
    let p = CachePolicy::default();
    assert_eq!(decide_at(&p, &f, "", Available, 1_000), Revalidate);
    assert_eq!(decide(&p, &f, false, &req(""), Available, at(1_000)), Fetch);
    assert_eq!(decide_at(&p, &f, "", Failed, 1_000), GatewayTimeout);
    assert_eq!(
        decide_at(&p, &f, "only-if-cached", Available, 1_000),
        GatewayTimeout
    );
}

// §5.2.2.10: s-maxage implies proxy-revalidate: no operator grace, no client max-stale; the
// response's own stale-while-revalidate / stale-if-error still count.
#[test]
fn s_maxage_limits_outside_permissions() {
    let f = stored(StaleRules {
        s_maxage: true,
        ..StaleRules::default()
    });
    let p = CachePolicy {
        client_directives: ClientDirectives::Honour,
        ..CachePolicy::default()
    };
    assert_eq!(decide_at(&p, &f, "", Available, 1_101), Revalidate);
    assert_eq!(decide_at(&p, &f, "max-stale", Available, 1_101), Revalidate);
    assert_eq!(decide_at(&p, &f, "", Failed, 1_101), GatewayTimeout);
    let own = stored(StaleRules {
        s_maxage: true,
        while_revalidate: Some(secs(30)),
        if_error: Some(secs(300)),
        ..StaleRules::default()
    });
    assert_eq!(
        decide_at(&p, &own, "", Available, 1_120),
        StaleWhileRevalidate
    );
    assert_eq!(decide_at(&p, &own, "", Failed, 1_350), StaleOnError);
}

// §5.2.1.4 / §5.2.1.1: client no-cache and max-age=0 are ignored by default (Varnish too)...
#[test]
fn client_reload_ignored_by_default() {
    let p = CachePolicy::default();
    for request in [
        "no-cache",
        "max-age=0",
        "min-fresh=1000",
        "no-cache, max-age=0",
    ] {
        assert_eq!(
            decide_at(&p, &plain(), request, Available, 1_050),
            Fresh,
            "{request}"
        );
    }
    // ...and so is max-stale: only the response and the operator permit staleness.
    assert_eq!(
        decide_at(&no_grace(), &plain(), "max-stale", Available, 1_200),
        Revalidate
    );
}

// ...and honoured when the operator says so.
#[test]
fn client_directives_honoured() {
    let p = honour();
    assert_eq!(
        decide_at(&p, &plain(), "no-cache", Available, 1_050),
        Revalidate
    );
    assert_eq!(
        decide_at(&p, &plain(), "max-age=0", Available, 1_050),
        Revalidate
    );
    assert_eq!(
        decide_at(&p, &plain(), "max-age=50", Available, 1_050),
        Fresh
    );
    assert_eq!(
        decide_at(&p, &plain(), "max-age=49", Available, 1_050),
        Revalidate
    );
    // min-fresh: at least that much freshness left.
    assert_eq!(
        decide_at(&p, &plain(), "min-fresh=50", Available, 1_050),
        Fresh
    );
    assert_eq!(
        decide_at(&p, &plain(), "min-fresh=51", Available, 1_050),
        Revalidate
    );
    // max-stale: stale within the limit is acceptable (served, refreshed in the background).
    assert_eq!(
        decide_at(&p, &plain(), "max-stale=30", Available, 1_130),
        StaleWhileRevalidate
    );
    assert_eq!(
        decide_at(&p, &plain(), "max-stale=30", Available, 1_131),
        Revalidate
    );
    assert_eq!(
        decide_at(&p, &plain(), "max-stale", Available, 99_999),
        StaleWhileRevalidate
    );
    // A client's no-cache beats the operator's grace for that client.
    let grace = CachePolicy {
        grace: secs(60),
        ..p.clone()
    };
    assert_eq!(
        decide_at(&grace, &plain(), "no-cache", Available, 1_110),
        Revalidate
    );
    // Request stale-if-error (RFC 5861 §4).
    assert_eq!(
        decide_at(&p, &plain(), "stale-if-error=60", Failed, 1_160),
        StaleOnError
    );
    assert_eq!(
        decide_at(&p, &plain(), "stale-if-error=60", Failed, 1_161),
        GatewayTimeout
    );
    // Invalid values are ignored.
    assert_eq!(
        decide_at(&p, &plain(), "max-age=x", Available, 1_050),
        Fresh
    );
}

// §5.2.1.7: only-if-cached is always honoured: a stored response or 504.
#[test]
fn only_if_cached() {
    let p = no_grace();
    assert_eq!(
        decide_at(&p, &plain(), "only-if-cached", Available, 1_050),
        Fresh
    );
    assert_eq!(
        decide_at(&p, &plain(), "only-if-cached", Available, 1_200),
        GatewayTimeout
    );
    let grace = CachePolicy::default();
    assert_eq!(
        decide_at(&grace, &plain(), "only-if-cached", Available, 1_105),
        StaleWhileRevalidate
    );
}

// The Age field of the stored response counts towards staleness (§4.2.3).
#[test]
fn initial_age_counts() {
    let f = Freshness {
        initial_age: secs(90),
        ..plain()
    };
    assert_eq!(decide_at(&no_grace(), &f, "", Available, 1_009), Fresh);
    assert_eq!(decide_at(&no_grace(), &f, "", Available, 1_010), Revalidate);
}

// Huge values do not overflow: max-stale=2^31 with a huge age.
#[test]
fn huge_values() {
    let f = Freshness {
        initial_age: secs(1 << 31),
        ..plain()
    };
    let p = honour();
    assert_eq!(
        decide_at(&p, &f, "max-stale=99999999999999", Available, u64::MAX >> 2),
        StaleWhileRevalidate
    );
    assert_eq!(decide_at(&p, &f, "", Failed, 1_000), GatewayTimeout);
}

proptest::proptest! {
    // Whatever the inputs: a failed backend is never asked again, an available one never
    // yields a stale-on-error, and a response that forbids staleness is never served stale.
    #[test]
    fn decision_invariants(
        lifetime in 0u64..1 << 32,
        initial in 0u64..1 << 32,
        now in 0u64..1 << 34,
        swr in proptest::option::of(0u64..1 << 32),
        sie in proptest::option::of(0u64..1 << 32),
        must_revalidate: bool,
        no_cache: bool,
        s_maxage: bool,
        has_validators: bool,
        honour_client: bool,
        request in "(no-cache|max-age=[0-9]{1,12}|max-stale(=[0-9]{1,12})?|min-fresh=[0-9]{1,3}|only-if-cached|stale-if-error=[0-9]{1,5})?",
    ) {
        let f = Freshness {
            lifetime: secs(lifetime),
            source: LifetimeSource::MaxAge,
            initial_age: secs(initial),
            response_time: at(1_000),
            stale: StaleRules {
                no_cache,
                must_revalidate,
                s_maxage,
                while_revalidate: swr.map(secs),
                if_error: sie.map(secs),
            },
        };
        let policy = CachePolicy {
            client_directives: if honour_client { ClientDirectives::Honour } else { ClientDirectives::Ignore },
            ..CachePolicy::default()
        };
        let fresh = f.is_fresh(at(now));
        for backend in [Available, Failed] {
            let d = decide(&policy, &f, has_validators, &req(&request), backend, at(now));
            if backend == Failed {
                proptest::prop_assert!(!matches!(d, Revalidate | Fetch | StaleWhileRevalidate));
            } else {
                proptest::prop_assert!(d != StaleOnError);
            }
            if must_revalidate || no_cache {
                proptest::prop_assert!(!matches!(d, StaleWhileRevalidate | StaleOnError));
            }
            if no_cache {
                proptest::prop_assert!(d != Fresh);
            }
            if d == Fresh {
                proptest::prop_assert!(fresh);
            }
            if d == Revalidate {
                proptest::prop_assert!(has_validators);
            }
        }
    }
}
