//! Answering a client's own conditional request from a stored response (RFC 9111 §4.3.2,
//! RFC 9110 §13.1 and §13.2).
//!
//! - Only GET and HEAD, and only for a stored 2xx response: other statuses have no selected
//!   representation to validate (RFC 9110 §13.2.1).
//! - `If-Match` and `If-Unmodified-Since` are not for a cache (§4.3.2): a request carrying one
//!   is forwarded to the backend rather than answered.
//! - `If-None-Match` (weak comparison; `*` matches any stored response) decides when present;
//!   an invalid one never matches, so the full response is sent.
//! - Otherwise `If-Modified-Since`: the stored `Last-Modified`, else its `Date`, else its receipt
//!   time, is compared with it; an invalid date (or two different ones) is ignored.
//!
//! The 304 carries the fields RFC 9110 §15.4.5 lists from the response that would have been
//! sent (`Cache-Control`, `Content-Location`, `Date`, `ETag`, `Expires`, `Vary`), its `Age`, and
//! `Last-Modified` when there is no `ETag`.

use std::time::SystemTime;

use http::header::{
    AGE, CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES, IF_MATCH, IF_MODIFIED_SINCE,
    IF_UNMODIFIED_SINCE, LAST_MODIFIED, VARY,
};
use http::{HeaderMap, Method};

use super::etag;
use crate::rules::dates::{self, FieldDate};
use crate::rules::head::{RequestHead, ResponseHead};

/// How to answer a client's request from a stored response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAnswer {
    /// The full stored response (no precondition, or the client's copy is outdated).
    Full,
    /// 304 Not Modified, with [`not_modified_headers`].
    NotModified,
    /// Preconditions meant for the origin (`If-Match`, `If-Unmodified-Since`): forward the
    /// request instead of answering it from the cache.
    Forward,
}

/// Evaluates the preconditions of `request` against stored response `stored`, received at
/// `received`.
pub fn answer(
    request: RequestHead<'_>,
    stored: ResponseHead<'_>,
    received: SystemTime,
) -> ClientAnswer {
    let headers = request.headers;
    if headers.contains_key(IF_MATCH) || headers.contains_key(IF_UNMODIFIED_SINCE) {
        return ClientAnswer::Forward;
    }
    let applicable = (*request.method == Method::GET || *request.method == Method::HEAD)
        && stored.status.is_success();
    if !applicable {
        return ClientAnswer::Full;
    }
    if let Some(if_none_match) = etag::if_none_match(headers) {
        let stored_tag = etag::of_response(stored.headers);
        return if if_none_match.matches(stored_tag.as_ref()) {
            ClientAnswer::NotModified
        } else {
            ClientAnswer::Full
        };
    }
    let FieldDate::Valid(since) = dates::read(headers, &IF_MODIFIED_SINCE) else {
        return ClientAnswer::Full;
    };
    let modified = dates::read(stored.headers, &LAST_MODIFIED)
        .valid()
        .or_else(|| dates::read(stored.headers, &DATE).valid())
        .unwrap_or(received);
    if modified <= since {
        ClientAnswer::NotModified
    } else {
        ClientAnswer::Full
    }
}

/// The header fields of a 304 built from `served`, the fields the full response would have
/// had (stored fields plus `Age`, see [`crate::rules::serve::served_headers`]).
pub fn not_modified_headers(served: &HeaderMap) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut copy = |name: http::HeaderName| {
        for value in served.get_all(&name) {
            headers.append(name.clone(), value.clone());
        }
    };
    for name in [
        CACHE_CONTROL,
        CONTENT_LOCATION,
        DATE,
        ETAG,
        EXPIRES,
        VARY,
        AGE,
    ] {
        copy(name);
    }
    if !served.contains_key(ETAG) {
        copy(LAST_MODIFIED);
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, StatusCode};
    use std::time::Duration;

    use crate::rules::test_support::map;

    const D1: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
    const D2: &str = "Sun, 06 Nov 1994 08:49:38 GMT";
    const D0: &str = "Sun, 06 Nov 1994 08:49:36 GMT";

    fn check(
        method: Method,
        request: &[(&'static str, &'static str)],
        status: u16,
        stored: &[(&'static str, &'static str)],
    ) -> ClientAnswer {
        let mut builder = Request::builder().method(method).uri("/");
        for (name, value) in request {
            builder = builder.header(*name, *value);
        }
        let request = builder.body(()).unwrap();
        let stored = map(stored);
        let head = ResponseHead {
            status: StatusCode::from_u16(status).unwrap(),
            headers: &stored,
        };
        answer(
            (&request).into(),
            head,
            SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777),
        )
    }

    use ClientAnswer::*;

    // RFC 9110 §13.1.2: If-None-Match, weak comparison, * for any.
    #[test]
    fn if_none_match() {
        let stored = [("etag", "\"v1\"")];
        assert_eq!(
            check(Method::GET, &[("if-none-match", "\"v1\"")], 200, &stored),
            NotModified
        );
        assert_eq!(
            check(Method::GET, &[("if-none-match", "W/\"v1\"")], 200, &stored),
            NotModified
        );
        assert_eq!(
            check(
                Method::HEAD,
                &[("if-none-match", "\"x\", \"v1\"")],
                200,
                &stored
            ),
            NotModified
        );
        assert_eq!(
            check(Method::GET, &[("if-none-match", "\"v2\"")], 200, &stored),
            Full
        );
        assert_eq!(
            check(Method::GET, &[("if-none-match", "*")], 200, &[]),
            NotModified
        );
        assert_eq!(
            check(Method::GET, &[("if-none-match", "\"v1\"")], 200, &[]),
            Full
        );
        assert_eq!(
            check(Method::GET, &[("if-none-match", "garbage")], 200, &stored),
            Full
        );
    }

    // RFC 9111 §4.3.2: If-Modified-Since only when there is no If-None-Match.
    #[test]
    fn if_none_match_takes_precedence() {
        let stored = [("etag", "\"v1\""), ("last-modified", D1)];
        let request = [("if-none-match", "\"v2\""), ("if-modified-since", D2)];
        assert_eq!(check(Method::GET, &request, 200, &stored), Full);
    }

    // RFC 9110 §13.1.3 / RFC 9111 §4.3.2: Last-Modified, else Date, else receipt time.
    #[test]
    fn if_modified_since() {
        let stored = [("last-modified", D1), ("date", D2)];
        assert_eq!(
            check(Method::GET, &[("if-modified-since", D1)], 200, &stored),
            NotModified
        );
        assert_eq!(
            check(Method::GET, &[("if-modified-since", D2)], 200, &stored),
            NotModified
        );
        assert_eq!(
            check(Method::GET, &[("if-modified-since", D0)], 200, &stored),
            Full
        );
        // No Last-Modified: the stored Date.
        assert_eq!(
            check(
                Method::GET,
                &[("if-modified-since", D1)],
                200,
                &[("date", D2)]
            ),
            Full
        );
        assert_eq!(
            check(
                Method::GET,
                &[("if-modified-since", D2)],
                200,
                &[("date", D2)]
            ),
            NotModified
        );
        // No Date either: the receipt time (D1 here).
        assert_eq!(
            check(Method::GET, &[("if-modified-since", D1)], 200, &[]),
            NotModified
        );
        assert_eq!(
            check(Method::GET, &[("if-modified-since", D0)], 200, &[]),
            Full
        );
    }

    // RFC 9110 §13.1.3: an invalid If-Modified-Since is ignored.
    #[test]
    fn invalid_if_modified_since() {
        let stored = [("last-modified", D1)];
        for bad in ["yesterday", "0", ""] {
            assert_eq!(
                check(Method::GET, &[("if-modified-since", bad)], 200, &stored),
                Full
            );
        }
        let two = [("if-modified-since", D1), ("if-modified-since", D2)];
        assert_eq!(check(Method::GET, &two, 200, &stored), Full);
    }

    // RFC 9110 §13.2.1: preconditions only for 2xx; only GET and HEAD here.
    #[test]
    fn only_success_and_safe_retrievals() {
        let request = [("if-none-match", "*")];
        assert_eq!(check(Method::GET, &request, 404, &[]), Full);
        assert_eq!(check(Method::GET, &request, 301, &[]), Full);
        assert_eq!(check(Method::POST, &request, 200, &[]), Full);
        assert_eq!(check(Method::GET, &[], 200, &[("etag", "\"v\"")]), Full);
    }

    // RFC 9111 §4.3.2: If-Match and If-Unmodified-Since are not for a cache.
    #[test]
    fn origin_preconditions_are_forwarded() {
        assert_eq!(
            check(Method::GET, &[("if-match", "\"v1\"")], 200, &[]),
            Forward
        );
        assert_eq!(
            check(Method::GET, &[("if-unmodified-since", D1)], 200, &[]),
            Forward
        );
    }

    // RFC 9110 §15.4.5: the fields a 304 carries.
    #[test]
    fn not_modified_fields() {
        let served = map(&[
            ("cache-control", "max-age=5"),
            ("content-location", "/a"),
            ("date", D1),
            ("etag", "\"v1\""),
            ("expires", D2),
            ("vary", "accept"),
            ("age", "3"),
            ("last-modified", D0),
            ("content-type", "text/html"),
            ("content-length", "10"),
            ("set-cookie", "a=1"),
        ]);
        let headers = not_modified_headers(&served);
        let names: Vec<_> = headers.keys().map(|n| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "cache-control",
                "content-location",
                "date",
                "etag",
                "expires",
                "vary",
                "age"
            ]
        );
        let untagged = map(&[("last-modified", D0), ("date", D1)]);
        assert_eq!(not_modified_headers(&untagged)["last-modified"], D0);
    }
}
