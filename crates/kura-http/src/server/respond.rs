//! Responses the proxy builds itself: a stored object served (with `Age`, HEAD without body,
//! the client's conditional request answered with a 304) and synthetic answers (errors).

use std::time::SystemTime;

use http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Response, StatusCode};

use crate::body::Body;
use crate::cache::object::Object;
use crate::rules::validation::client::{answer, not_modified_headers, ClientAnswer};
use crate::rules::{serve, RequestHead, ResponseHead};

/// A stored object as the response to `request`, or `None` when the request's preconditions
/// are for the origin (`If-Match`, `If-Unmodified-Since`): it must be forwarded.
pub fn object(
    request: RequestHead<'_>,
    object: &Object,
    now: SystemTime,
) -> Option<Response<Body>> {
    let age = object.freshness.current_age(now);
    let headers = serve::served_headers(&object.headers, age);
    let stored = ResponseHead {
        status: object.status,
        headers: &object.headers,
    };
    match answer(request, stored, object.freshness.response_time) {
        ClientAnswer::Forward => None,
        ClientAnswer::NotModified => {
            let mut response = Response::new(Body::Empty);
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            *response.headers_mut() = not_modified_headers(&headers);
            Some(response)
        }
        ClientAnswer::Full => {
            let body = if serve::sends_body(request.method, object.status) {
                Body::full(object.body.clone())
            } else {
                Body::Empty
            };
            let mut response = Response::new(body);
            *response.status_mut() = object.status;
            *response.headers_mut() = headers;
            Some(response)
        }
    }
}

/// A short text response of the proxy's own.
pub fn synth(status: StatusCode, close: bool) -> Response<Body> {
    let text = format!(
        "{} {}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let mut response = Response::new(Body::full(text.clone()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(CONTENT_LENGTH, HeaderValue::from(text.len()));
    if close {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}
