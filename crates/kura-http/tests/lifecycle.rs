//! One stored response's life through the rules, as the proxy will drive them: stored on a
//! miss, served fresh (GET and HEAD, with Age), answering a client's conditional request,
//! revalidated with a conditional request when stale, updated by the 304, served stale on a
//! backend error only while allowed, and invalidated by a POST. No sockets: times are passed in.

use std::time::{Duration, SystemTime};

use http::header::{AGE, IF_NONE_MATCH};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use kura_http::rules::cache_control::RequestDirectives;
use kura_http::rules::freshness::Freshness;
use kura_http::rules::stale::{decide, Backend, Decision};
use kura_http::rules::targeted::ResponseControl;
use kura_http::rules::validation::client::{answer, not_modified_headers, ClientAnswer};
use kura_http::rules::validation::conditional::{has_validators, make_conditional};
use kura_http::rules::validation::update::{select_for_update, update_headers};
use kura_http::rules::vary::{select, Variant, Vary};
use kura_http::rules::{headers, invalidation, serve, storable, CachePolicy, ResponseHead};

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn date(seconds: u64) -> String {
    httpdate::fmt_http_date(at(seconds))
}

/// What the proxy would keep for one stored response.
struct Entry {
    status: StatusCode,
    headers: HeaderMap,
    freshness: Freshness,
    vary: Vary,
    key: kura_http::rules::vary::SecondaryKey,
}

fn store(
    policy: &CachePolicy,
    request: &Request<()>,
    response: &Response<()>,
    sent: SystemTime,
    received: SystemTime,
) -> Option<Entry> {
    let control = ResponseControl::from_headers(&policy.targeted_fields, response.headers());
    let plan = storable::storable(policy, request.into(), response.into(), &control).ok()?;
    let stored = headers::for_storage(response.headers(), &plan.strip, received);
    let head = ResponseHead {
        status: response.status(),
        headers: &stored,
    };
    let freshness = Freshness::new(policy, head, &control, sent, received);
    if !freshness.worth_storing(has_validators(&stored)) {
        return None;
    }
    let vary = Vary::from_headers(&stored);
    let key = vary.secondary_key(request.headers())?;
    Some(Entry {
        status: response.status(),
        headers: stored,
        freshness,
        vary,
        key,
    })
}

fn get(uri: &str, pairs: &[(&str, &str)]) -> Request<()> {
    let mut builder = Request::get(uri).header("host", "example.com");
    for (name, value) in pairs {
        builder = builder.header(*name, *value);
    }
    builder.body(()).unwrap()
}

#[test]
fn a_stored_response_from_miss_to_invalidation() {
    let policy = CachePolicy::default();

    // Miss at t=1000: the backend answers with a minute of freshness and a validator.
    let request = get("/a", &[("accept-encoding", "gzip")]);
    let response = Response::builder()
        .header("cache-control", "max-age=60")
        .header("etag", "\"v1\"")
        .header("vary", "Accept-Encoding")
        .header("date", date(1_000))
        .header("content-length", "5")
        .header("connection", "keep-alive")
        .body(())
        .unwrap();
    let mut entry = store(&policy, &request, &response, at(999), at(1_000)).expect("stored");
    assert!(!entry.headers.contains_key("connection"));

    // t=1030: a HEAD with the same Accept-Encoding is served from the stored GET.
    let head = Request::head("/a")
        .header("accept-encoding", "GZIP")
        .body(())
        .unwrap();
    let variants = [Variant {
        vary: &entry.vary,
        key: &entry.key,
        date: at(1_000),
    }];
    assert_eq!(select(head.headers(), variants), Some(0));
    assert!(serve::answers(&Method::GET, head.method()));
    let none = RequestDirectives::from_headers(head.headers());
    let decision = decide(
        &policy,
        &entry.freshness,
        true,
        &none,
        Backend::Available,
        at(1_030),
    );
    assert_eq!(decision, Decision::Fresh);
    let served = serve::served_headers(&entry.headers, entry.freshness.current_age(at(1_030)));
    assert_eq!(served[AGE], "31"); // 1 s of response delay + 30 s in the cache
    assert!(!serve::sends_body(head.method(), entry.status));
    // Another encoding is another variant: no match.
    assert_eq!(
        select(get("/a", &[("accept-encoding", "br")]).headers(), variants),
        None
    );

    // The client revalidates its own copy: 304 from the cache.
    let conditional = get(
        "/a",
        &[("accept-encoding", "gzip"), ("if-none-match", "\"v1\"")],
    );
    let stored_head = ResponseHead {
        status: entry.status,
        headers: &entry.headers,
    };
    assert_eq!(
        answer((&conditional).into(), stored_head, at(1_000)),
        ClientAnswer::NotModified
    );
    let not_modified = not_modified_headers(&served);
    assert_eq!(not_modified["etag"], "\"v1\"");
    assert!(!not_modified.contains_key("content-length"));

    // t=1100: stale beyond grace: revalidate with the stored ETag.
    let decision = decide(
        &policy,
        &entry.freshness,
        true,
        &none,
        Backend::Available,
        at(1_100),
    );
    assert_eq!(decision, Decision::Revalidate);
    let mut backend_request = conditional.headers().clone();
    assert!(make_conditional(&mut backend_request, &[&entry.headers]));
    assert_eq!(backend_request[IF_NONE_MATCH], "\"v1\"");

    // The backend says 304 with a new lifetime: the entry is updated and fresh again.
    let r304 = Response::builder()
        .status(304)
        .header("cache-control", "max-age=120, stale-if-error=300")
        .header("etag", "\"v1\"")
        .header("date", date(1_100))
        .body(())
        .unwrap();
    assert_eq!(
        select_for_update(r304.headers(), &[&entry.headers]),
        vec![0]
    );
    update_headers(&policy, &mut entry.headers, r304.headers(), at(1_100));
    assert_eq!(entry.headers["content-length"], "5");
    let control = ResponseControl::from_headers(&policy.targeted_fields, &entry.headers);
    let head = ResponseHead {
        status: entry.status,
        headers: &entry.headers,
    };
    assert!(storable::storable(&policy, (&request).into(), head, &control).is_ok());
    entry.freshness = Freshness::new(&policy, head, &control, at(1_100), at(1_100));
    assert_eq!(
        decide(
            &policy,
            &entry.freshness,
            true,
            &none,
            Backend::Available,
            at(1_200)
        ),
        Decision::Fresh
    );

    // t=1400: stale; the backend fails; stale-if-error=300 covers up to t=1520.
    let decision = decide(
        &policy,
        &entry.freshness,
        true,
        &none,
        Backend::Available,
        at(1_400),
    );
    assert_eq!(decision, Decision::Revalidate);
    let decision = decide(
        &policy,
        &entry.freshness,
        true,
        &none,
        Backend::Failed,
        at(1_400),
    );
    assert_eq!(decision, Decision::StaleOnError);
    let served = serve::served_headers(&entry.headers, entry.freshness.current_age(at(1_400)));
    assert_eq!(served[AGE], "300");
    let decision = decide(
        &policy,
        &entry.freshness,
        true,
        &none,
        Backend::Failed,
        at(1_521),
    );
    assert_eq!(decision, Decision::GatewayTimeout);

    // A POST to the URL invalidates it.
    let post = Request::post("/a")
        .header("host", "example.com")
        .body(())
        .unwrap();
    let target = invalidation::target_uri((&post).into(), "http").unwrap();
    let gone = invalidation::invalidated(post.method(), &target, StatusCode::OK, &HeaderMap::new());
    assert_eq!(gone, [target]);
}

#[test]
fn uncacheable_responses_are_not_stored() {
    let policy = CachePolicy::default();
    let request = get("/b", &[]);
    for cache_control in ["no-store", "private", "max-age=0", "no-cache"] {
        let response = Response::builder()
            .header("cache-control", cache_control)
            .body(())
            .unwrap();
        assert!(
            store(&policy, &request, &response, at(0), at(0)).is_none(),
            "{cache_control}"
        );
    }
    // With a validator, max-age=0 and no-cache responses are kept for cheap revalidation.
    for cache_control in ["max-age=0", "no-cache"] {
        let response = Response::builder()
            .header("cache-control", cache_control)
            .header("etag", "\"x\"")
            .body(())
            .unwrap();
        assert!(store(&policy, &request, &response, at(0), at(0)).is_some());
    }
}
