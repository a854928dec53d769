//! Serving a stored response (RFC 9111 §4, §4.2.3, §5.1; RFC 9110 §9.3.2): which request
//! methods a stored response may answer, its header fields as sent (with `Age`), and whether
//! a body goes with them.

use std::time::Duration;

use http::header::AGE;
use http::{HeaderMap, HeaderValue, Method, StatusCode};

use super::delta;

/// Whether a response stored for a `stored` request may answer a `request` with another
/// method: a stored GET answers GET and HEAD (a HEAD response is a GET response without
/// content, RFC 9110 §9.3.2); nothing else is stored.
pub fn answers(stored: &Method, request: &Method) -> bool {
    *stored == Method::GET && (*request == Method::GET || *request == Method::HEAD)
}

/// The header fields to send for a stored response with fields `stored` whose current age is
/// `age`: the stored fields, with `Age` replaced by the current age in whole seconds (§4: a
/// cache MUST generate `Age` when it serves a stored response without validation; §5.1).
/// A HEAD request gets the same fields, `Content-Length` included (RFC 9110 §9.3.2).
pub fn served_headers(stored: &HeaderMap, age: Duration) -> HeaderMap {
    let mut headers = stored.clone();
    // Room for the fields delivery adds (`Age`, `X-Cache`, `Cache-Status`) in one step: a
    // clone is full, and growing it field by field costs more (bench/http-instructions.sh).
    headers.reserve(4);
    headers.insert(AGE, HeaderValue::from(delta::from_duration(age)));
    headers
}

/// Whether a response with `status` to a `request` method carries content: not for HEAD, and
/// never for 204 or 304 (RFC 9110 §6.4.1).
pub fn sends_body(request: &Method, status: StatusCode) -> bool {
    *request != Method::HEAD
        && status != StatusCode::NO_CONTENT
        && status != StatusCode::NOT_MODIFIED
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 9110 §9.3.2: HEAD is answered from a stored GET; RFC 9111 §4: methods must allow it.
    #[test]
    fn methods() {
        assert!(answers(&Method::GET, &Method::GET));
        assert!(answers(&Method::GET, &Method::HEAD));
        assert!(!answers(&Method::GET, &Method::POST));
        assert!(!answers(&Method::HEAD, &Method::GET));
        assert!(!answers(&Method::POST, &Method::POST));
    }

    // RFC 9111 §4, §5.1: Age replaced by the current age.
    #[test]
    fn age_is_replaced() {
        let mut stored = HeaderMap::new();
        stored.insert(AGE, HeaderValue::from_static("999"));
        stored.insert("content-length", HeaderValue::from_static("5"));
        let served = served_headers(&stored, Duration::from_millis(42_900));
        assert_eq!(served[AGE], "42");
        assert_eq!(served.get_all(AGE).iter().count(), 1);
        assert_eq!(served["content-length"], "5");
        assert_eq!(served_headers(&HeaderMap::new(), Duration::ZERO)[AGE], "0");
    }

    // RFC 9111 §1.2.2: an age past 2^31 is sent as 2^31.
    #[test]
    fn huge_age_is_capped() {
        let served = served_headers(&HeaderMap::new(), Duration::MAX);
        assert_eq!(served[AGE], "2147483648");
    }

    // RFC 9110 §9.3.2, §6.4.1: bodies.
    #[test]
    fn bodies() {
        assert!(sends_body(&Method::GET, StatusCode::OK));
        assert!(!sends_body(&Method::HEAD, StatusCode::OK));
        assert!(!sends_body(&Method::GET, StatusCode::NO_CONTENT));
        assert!(!sends_body(&Method::GET, StatusCode::NOT_MODIFIED));
        assert!(sends_body(&Method::GET, StatusCode::NOT_FOUND));
    }
}
