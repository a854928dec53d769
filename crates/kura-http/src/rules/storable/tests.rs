//! Tests of storability (RFC 9111 §3, §3.5, §5.2).

use super::*;
use http::{HeaderMap, HeaderValue, Request, Response};

struct Case {
    policy: CachePolicy,
    method: Method,
    request: Vec<(&'static str, &'static str)>,
    status: u16,
    response: Vec<(&'static str, &'static str)>,
}

fn case(status: u16, response: &[(&'static str, &'static str)]) -> Case {
    Case {
        policy: CachePolicy::default(),
        method: Method::GET,
        request: Vec::new(),
        status,
        response: response.to_vec(),
    }
}

impl Case {
    fn request(mut self, pairs: &[(&'static str, &'static str)]) -> Self {
        self.request = pairs.to_vec();
        self
    }
    fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }
    fn policy(mut self, policy: CachePolicy) -> Self {
        self.policy = policy;
        self
    }
    fn run(&self) -> Result<Storable, NotStorable> {
        let mut request = Request::builder().method(self.method.clone()).uri("/x");
        for (name, value) in &self.request {
            request = request.header(*name, *value);
        }
        let request = request.body(()).unwrap();
        let mut response = Response::builder().status(self.status);
        for (name, value) in &self.response {
            response = response.header(*name, *value);
        }
        let response = response.body(()).unwrap();
        let control =
            ResponseControl::from_headers(&self.policy.targeted_fields, response.headers());
        storable(
            &self.policy,
            (&request).into(),
            (&response).into(),
            &control,
        )
    }
}

const FRESH: (&str, &str) = ("cache-control", "max-age=60");

#[test]
fn plain_cacheable_response() {
    assert_eq!(case(200, &[FRESH]).run(), Ok(Storable::default()));
    assert_eq!(case(200, &[]).run(), Ok(Storable::default()));
}

// RFC 9111 §3: the request method must be understood and cacheable; kura stores GET only.
#[test]
fn only_get_is_stored() {
    for method in [Method::HEAD, Method::POST, Method::PUT, Method::OPTIONS] {
        let result = case(200, &[FRESH]).method(method.clone()).run();
        assert_eq!(result, Err(NotStorable::Method), "{method}");
    }
    let custom = Method::from_bytes(b"PURGE").unwrap();
    assert_eq!(
        case(200, &[FRESH]).method(custom).run(),
        Err(NotStorable::Method)
    );
}

// RFC 9111 §3: final status; 206 and 304 only if understood (they are not here).
#[test]
fn status_rules() {
    assert_eq!(case(103, &[FRESH]).run(), Err(NotStorable::NotFinal));
    assert_eq!(case(206, &[FRESH]).run(), Err(NotStorable::PartialContent));
    assert_eq!(case(304, &[FRESH]).run(), Err(NotStorable::NotModified));
}

// RFC 9111 §5.2.2.3: must-understand stores only understood statuses, and overrides no-store.
#[test]
fn must_understand() {
    let mu = ("cache-control", "max-age=60, must-understand, no-store");
    assert_eq!(case(200, &[mu]).run(), Ok(Storable::default()));
    assert_eq!(case(299, &[mu]).run(), Err(NotStorable::NotUnderstood));
    let bad_arg = ("cache-control", "max-age=60, must-understand=1, no-store");
    assert_eq!(case(200, &[bad_arg]).run(), Err(NotStorable::NoStore));
}

// RFC 9111 §3, §5.2.1.5, §5.2.2.5: no-store in request or response.
#[test]
fn no_store() {
    assert_eq!(
        case(200, &[("cache-control", "no-store, max-age=60")]).run(),
        Err(NotStorable::NoStore)
    );
    assert_eq!(
        case(200, &[FRESH])
            .request(&[("cache-control", "no-store")])
            .run(),
        Err(NotStorable::RequestNoStore)
    );
    assert_eq!(
        case(200, &[("cache-control", "NO-STORE=\"x\"")]).run(),
        Err(NotStorable::NoStore)
    );
}

// RFC 9111 §5.2.2.7: a shared cache does not store private responses, qualified or not.
#[test]
fn private() {
    for value in [
        "private",
        "private, max-age=60",
        "private=\"set-cookie\", public",
    ] {
        assert_eq!(
            case(200, &[("cache-control", value)]).run(),
            Err(NotStorable::Private),
            "{value}"
        );
    }
}

// RFC 9111 §3.5: Authorization only with public, s-maxage or must-revalidate.
#[test]
fn authorization() {
    let auth = [("authorization", "Bearer x")];
    assert_eq!(
        case(200, &[FRESH]).request(&auth).run(),
        Err(NotStorable::Authorization)
    );
    assert_eq!(
        case(200, &[]).request(&auth).run(),
        Err(NotStorable::Authorization)
    );
    for allowed in [
        "public",
        "s-maxage=10",
        "must-revalidate, max-age=5",
        "s-maxage=x",
    ] {
        assert!(
            case(200, &[("cache-control", allowed)])
                .request(&auth)
                .run()
                .is_ok(),
            "{allowed}"
        );
    }
    assert_eq!(
        case(200, &[("cache-control", "proxy-revalidate, max-age=5")])
            .request(&auth)
            .run(),
        Err(NotStorable::Authorization)
    );
}

// RFC 9111 §3: without explicit freshness only heuristically cacheable statuses (or public).
#[test]
fn explicit_freshness_or_heuristic_status() {
    for status in [302, 303, 307, 403, 500, 503] {
        assert_eq!(
            case(status, &[]).run(),
            Err(NotStorable::NoFreshness),
            "{status}"
        );
        assert!(case(status, &[FRESH]).run().is_ok(), "{status}");
        assert!(case(status, &[("cache-control", "s-maxage=5")])
            .run()
            .is_ok());
        assert!(case(status, &[("cache-control", "public")]).run().is_ok());
        assert!(case(status, &[("expires", "0")]).run().is_ok());
    }
    for status in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501] {
        assert!(case(status, &[]).run().is_ok(), "{status}");
    }
    // Invalid max-age is still explicit (the response is stale, not unstorable).
    assert!(case(302, &[("cache-control", "max-age=x")]).run().is_ok());
    // stale-while-revalidate alone gives no freshness.
    let swr = ("cache-control", "stale-while-revalidate=60");
    assert_eq!(case(302, &[swr]).run(), Err(NotStorable::NoFreshness));
}

// RFC 9213 §2.2: under a targeted field, Expires does not count.
#[test]
fn targeted_field_ignores_expires() {
    let policy = CachePolicy::default().with_cdn_cache_control();
    let response = [
        ("expires", "Sun, 06 Nov 2094 08:49:37 GMT"),
        ("cdn-cache-control", "none"),
    ];
    assert_eq!(
        case(302, &response).policy(policy.clone()).run(),
        Err(NotStorable::NoFreshness)
    );
    let response = [
        ("cache-control", "private"),
        ("cdn-cache-control", "max-age=5"),
    ];
    assert!(case(200, &response).policy(policy).run().is_ok());
}

// RFC 9111 §4.1: Vary: * never matches, so it is not stored.
#[test]
fn vary_star() {
    assert_eq!(
        case(200, &[FRESH, ("vary", "*")]).run(),
        Err(NotStorable::VaryStar)
    );
    assert!(case(200, &[FRESH, ("vary", "accept")]).run().is_ok());
}

// RFC 9111 §5.2.2.4: qualified no-cache strips the listed fields from the stored copy.
#[test]
fn qualified_no_cache_strips() {
    let result = case(
        200,
        &[
            ("cache-control", "max-age=5, no-cache=\"x-a, Set-Cookie\""),
            ("set-cookie", "s=1"),
        ],
    )
    .run();
    assert_eq!(
        result,
        Ok(Storable {
            strip: vec![HeaderName::from_static("x-a"), SET_COOKIE]
        })
    );
}

// Set-Cookie: passed by default, stripped or stored by choice (docs/http.md).
#[test]
fn set_cookie_policy() {
    let response = [FRESH, ("set-cookie", "s=1")];
    assert_eq!(case(200, &response).run(), Err(NotStorable::SetCookie));
    let strip = CachePolicy {
        set_cookie: SetCookie::Strip,
        ..CachePolicy::default()
    };
    assert_eq!(
        case(200, &response).policy(strip).run(),
        Ok(Storable {
            strip: vec![SET_COOKIE]
        })
    );
    let store = CachePolicy {
        set_cookie: SetCookie::Store,
        ..CachePolicy::default()
    };
    assert_eq!(
        case(200, &response).policy(store).run(),
        Ok(Storable::default())
    );
}

// Pragma is deprecated (RFC 9111 §5.4): it neither prevents nor allows storing.
#[test]
fn pragma_is_ignored() {
    assert!(case(200, &[FRESH, ("pragma", "no-cache")])
        .request(&[("pragma", "no-cache")])
        .run()
        .is_ok());
}

#[test]
fn non_utf8_cache_control_is_read_bytewise() {
    // A HeaderMap with invalid UTF-8 in Cache-Control is read byte-wise, not rejected.
    let mut headers = HeaderMap::new();
    headers.insert(
        "cache-control",
        HeaderValue::from_bytes(b"max-age=5, \xff").unwrap(),
    );
    let control = ResponseControl::from_headers(&[], &headers);
    assert!(control.directives.max_age.is_present());
}

// kura's rule (issue 37, finding 3): credentials and no explicit freshness, not stored.
#[test]
fn credentials_need_explicit_freshness() {
    let check = |policy: &CachePolicy, request: &[(&str, &str)], response: &[(&str, &str)]| {
        let mut builder = Request::builder().uri("/account/profile.css");
        for (name, value) in request {
            builder = builder.header(*name, *value);
        }
        let request = builder.body(()).unwrap();
        let mut fields = HeaderMap::new();
        for (name, value) in response {
            fields.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let head = ResponseHead {
            status: StatusCode::OK,
            headers: &fields,
        };
        let control = ResponseControl::from_headers(&policy.targeted_fields, &fields);
        credentials(policy, RequestHead::from(&request), head, &control)
    };
    let default = CachePolicy::default();
    let cookie = [("cookie", "session=1")];
    let auth = [("authorization", "Bearer x")];
    for request in [&cookie[..], &auth[..]] {
        for heuristic in [
            &[][..],
            &[("cache-control", "public")],
            &[("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT")],
        ] {
            assert_eq!(
                check(&default, request, heuristic),
                Err(NotStorable::Credentials),
                "{request:?} {heuristic:?}"
            );
        }
        for explicit in [
            ("cache-control", "max-age=60"),
            ("cache-control", "public, s-maxage=60"),
            ("expires", "Mon, 01 Jan 2035 00:00:00 GMT"),
        ] {
            assert_eq!(
                check(&default, request, &[explicit]),
                Ok(()),
                "{explicit:?}"
            );
        }
    }
    assert_eq!(check(&default, &[], &[]), Ok(()));
    let lenient = CachePolicy {
        heuristic_with_credentials: true,
        ..CachePolicy::default()
    };
    assert_eq!(check(&lenient, &cookie, &[]), Ok(()));
}
