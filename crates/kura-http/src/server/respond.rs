//! Responses the proxy builds itself: a stored object served (with `Age`, HEAD without body,
//! the client's conditional request answered with a 304) and synthetic answers (errors).

use std::time::SystemTime;

use http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use crate::body::Body;
use crate::cache::object::Object;
use crate::compress::ClientCoding;
use crate::rules::range::{self, RangeAnswer};
use crate::rules::validation::client::{answer, not_modified_headers, ClientAnswer};
use crate::rules::{serve, RequestHead, ResponseHead};
use crate::stats::CacheOutcome;

/// A stored object as the response to `request`, or `None` when the request's preconditions
/// are for the origin (`If-Match`, `If-Unmodified-Since`): it must be forwarded.
pub fn object(
    request: RequestHead<'_>,
    object: &Object,
    coding: Option<ClientCoding>,
    now: SystemTime,
) -> Option<Response<Body>> {
    let age = object.freshness.current_age(now);
    let mut headers = serve::served_headers(&object.headers, age);
    // The fields of the representation this client gets (a gzip object decoded for a client
    // that does not accept gzip): preconditions and ranges are judged on them.
    let decode = ClientCoding::adapt(coding, &mut headers);
    let stored = ResponseHead {
        status: object.status,
        headers: &headers,
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
            if !serve::sends_body(request.method, object.status) {
                let mut response = Response::new(Body::Empty);
                *response.status_mut() = object.status;
                *response.headers_mut() = headers;
                return Some(response);
            }
            let length = object.body.len() as u64;
            // A decoded body is served whole: RFC 9110 §14.2 allows ignoring `Range`, and its
            // length is not known before it is decoded.
            let ranged = if decode.is_some() {
                RangeAnswer::Full
            } else {
                range::answer(
                    request.method,
                    request.headers,
                    object.status,
                    &headers,
                    length,
                )
            };
            Some(match ranged {
                RangeAnswer::Full => {
                    let body = Body::full(object.body.clone()).decoded(decode);
                    let mut response = Response::new(body);
                    *response.status_mut() = object.status;
                    *response.headers_mut() = headers;
                    response
                }
                RangeAnswer::Partial { start, end } => {
                    // start <= end < length = body.len(): both fit in usize.
                    let (from, to) = (start as usize, end as usize);
                    partial(
                        headers,
                        start,
                        end,
                        length,
                        Body::full(object.body.slice(from..=to)),
                    )
                }
                RangeAnswer::Unsatisfiable => unsatisfiable(length),
            })
        }
    }
}

/// A 206 with `fields` of the whole response, for bytes `start..=end` of `length`.
pub fn partial(
    mut fields: HeaderMap,
    start: u64,
    end: u64,
    length: u64,
    body: Body,
) -> Response<Body> {
    let range = format!("bytes {start}-{end}/{length}");
    if let Ok(value) = HeaderValue::try_from(range) {
        fields.insert(CONTENT_RANGE, value);
    }
    fields.insert(CONTENT_LENGTH, HeaderValue::from(end - start + 1));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    *response.headers_mut() = fields;
    response
}

/// A 416 for a representation of `length` bytes (RFC 9110 §15.5.17).
pub fn unsatisfiable(length: u64) -> Response<Body> {
    let mut response = synth(StatusCode::RANGE_NOT_SATISFIABLE, false);
    if let Ok(value) = HeaderValue::try_from(format!("bytes */{length}")) {
        response.headers_mut().insert(CONTENT_RANGE, value);
    }
    response
}

/// A rule's synthetic answer (`config/edits.rs`).
pub fn synthetic(synthetic: &crate::config::Synthetic) -> Response<Body> {
    let mut response = Response::new(Body::full(synthetic.body.clone()));
    *response.status_mut() = synthetic.status;
    *response.headers_mut() = synthetic.headers.clone();
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(synthetic.body.len()));
    response
}

/// `response` once its body can be sent ([`Body::primed`]): a body decoded for the client
/// whose first bytes cannot be decoded (the backend's bytes are not what its
/// `Content-Encoding` says) gets a `502` instead, while no head has been sent. A body that
/// breaks later ends the response as an error the client sees: the chunked stream (or the
/// HTTP/2 stream) is cut without its end, or fewer bytes than `Content-Length` arrive.
pub async fn primed(
    response: Response<Body>,
    outcome: CacheOutcome,
) -> (Response<Body>, CacheOutcome) {
    let (head, body) = response.into_parts();
    match body.primed().await {
        Ok(body) => (Response::from_parts(head, body), outcome),
        Err(error) => {
            tracing::warn!("backend body not decodable for the client: {error}");
            (synth(StatusCode::BAD_GATEWAY, false), CacheOutcome::Synth)
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
