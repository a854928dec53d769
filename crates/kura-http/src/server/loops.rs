//! Loop detection: a request is refused with `508 Loop Detected`, before it joins a fetch or
//! is sent anywhere, when its `Via` names this instance (it was forwarded by this kura and has
//! come back: a backend address that is kura's own listener, two kuras that are each other's
//! backend, a backend that routes the `Host` back) or carries more than `max_via_hops`
//! entries. Without it such a request is forwarded again and again, each hop holding a
//! connection and a fetch, until timeouts or `max_connections` end it.
//!
//! The check reads `Via` only on the way to the backend (a miss, a pass, a pipe): a hit pays
//! nothing. A client that sends a `Via` naming this kura makes only its own request fail: the
//! `508` is never stored, and it is answered before the request joins a fetch other clients
//! wait on.

use std::sync::atomic::Ordering;

use http::header::VIA;
use http::{HeaderMap, HeaderValue, Response, StatusCode};

use super::proxy::Proxy;
use crate::body::Body;
use crate::config::Via;
use crate::stats::CacheOutcome;

/// Why a request is taken as a loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// Its `Via` names this instance.
    Returned,
    /// Its `Via` has more than `max_via_hops` entries.
    TooManyHops,
}

/// Whether a request with `headers` has come back to the instance `via` (or passed too many).
pub fn looped(headers: &HeaderMap, via: &Via) -> Option<Loop> {
    let mut hops = 0;
    for value in headers.get_all(VIA) {
        // `Via = #( received-protocol RWS received-by [ RWS comment ] )` (RFC 9110 §7.6.3).
        for entry in value.as_bytes().split(|&b| b == b',') {
            let mut words = entry
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty());
            let Some(_protocol) = words.next() else {
                continue;
            };
            hops += 1;
            let by = words.next().unwrap_or_default();
            if by.eq_ignore_ascii_case(via.name.as_bytes()) {
                return Some(Loop::Returned);
            }
        }
    }
    (hops > via.max_hops).then_some(Loop::TooManyHops)
}

/// The `508` for a request of `proxy` that is a loop, counted (`loops`); `None` for any other.
pub fn refused(proxy: &Proxy, headers: &HeaderMap) -> Option<(Response<Body>, CacheOutcome)> {
    if !headers.contains_key(VIA) {
        return None;
    }
    let why = looped(headers, &proxy.config.via)?;
    proxy.stats.loops.fetch_add(1, Ordering::Relaxed);
    let via = &proxy.config.via;
    let text = match why {
        Loop::Returned => format!(
            "508 Loop Detected: this request already passed through {} (its Via names it): the backend leads back to this kura\n",
            via.name
        ),
        Loop::TooManyHops => format!(
            "508 Loop Detected: this request's Via has more than {} entries (max_via_hops)\n",
            via.max_hops
        ),
    };
    tracing::warn!("{}", text.trim_end());
    let mut response = Response::new(Body::full(text.clone()));
    *response.status_mut() = StatusCode::LOOP_DETECTED;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    Some((response, CacheOutcome::Synth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn via(name: &str, max_hops: usize) -> Via {
        Config::from_toml(&format!(
            "backend = \"http://127.0.0.1:1\"\nvia_name = \"{name}\"\nmax_via_hops = {max_hops}\n"
        ))
        .unwrap()
        .via
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(VIA, HeaderValue::from_bytes(value.as_bytes()).unwrap());
        }
        headers
    }

    #[test]
    fn its_own_name_anywhere_in_via_is_a_loop_and_others_are_not() {
        let me = via("edge-1", 4);
        assert_eq!(looped(&headers(&[]), &me), None);
        assert_eq!(looped(&headers(&["1.1 shield, 1.1 edge-2"]), &me), None);
        // A name that only begins or ends like it is another instance.
        assert_eq!(looped(&headers(&["1.1 edge-10, 1.1 xedge-1"]), &me), None);
        for back in [
            "1.1 edge-1",
            "1.0 fred, 1.1 EDGE-1 (kura)",
            "HTTP/1.1 a,1.1\tedge-1",
        ] {
            assert_eq!(
                looped(&headers(&[back]), &me),
                Some(Loop::Returned),
                "{back}"
            );
        }
        // In a second field, after empty entries.
        let split = headers(&["1.1 a, ,", "1.1 edge-1"]);
        assert_eq!(looped(&split, &me), Some(Loop::Returned));
        // Bytes that are not UTF-8 are compared as bytes.
        let mut odd = HeaderMap::new();
        odd.append(
            VIA,
            HeaderValue::from_bytes(b"1.1 \xffname, 1.1 edge-1").unwrap(),
        );
        assert_eq!(looped(&odd, &me), Some(Loop::Returned));
    }

    #[test]
    fn more_entries_than_max_via_hops_is_a_loop() {
        let me = via("edge-1", 4);
        assert_eq!(
            looped(&headers(&["1.1 a, 1.1 b", "1.1 c, 1.1 d"]), &me),
            None
        );
        assert_eq!(
            looped(&headers(&["1.1 a, 1.1 b", "1.1 c, 1.1 d, 1.1 e"]), &me),
            Some(Loop::TooManyHops)
        );
    }
}
