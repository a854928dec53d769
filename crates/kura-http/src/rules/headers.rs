//! Which header fields of a response are stored (RFC 9111 §3.1) and which a 304 may replace
//! in a stored response (§3.2).
//!
//! Never stored: the connection's own fields (`Connection` and every field it names,
//! `Keep-Alive`, `Proxy-Connection`, `TE`, `Transfer-Encoding`, `Upgrade`; RFC 9110 §7.6.1) and
//! the proxy's (`Proxy-Authenticate`, `Proxy-Authentication-Info`, `Proxy-Authorization`;
//! MUST NOT, §3.1), plus the fields the storage decision strips (`no-cache="..."`, or
//! `Set-Cookie` under [`crate::rules::SetCookie::Strip`]). A response without a valid `Date` is
//! stored with one giving its receipt time (RFC 9110 §6.6.1), so its age is computed from the
//! moment this cache received it.

use std::time::SystemTime;

use http::header::{
    CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, DATE, PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION, TE, TRANSFER_ENCODING, UPGRADE, VARY,
};
use http::{HeaderMap, HeaderName, HeaderValue};

use super::dates::{self, FieldDate};

const HOP_BY_HOP: [&str; 3] = [
    "keep-alive",
    "proxy-connection",
    "proxy-authentication-info",
];

/// The field names listed in `Connection` (RFC 9110 §7.6.1), lowercase.
pub fn connection_listed(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(CONNECTION)
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b','))
        .filter_map(|name| HeaderName::from_bytes(name.trim_ascii()).ok())
        .collect()
}

/// Whether `name` is one of the fields a cache never stores, whatever the response.
pub fn is_never_stored(name: &HeaderName) -> bool {
    *name == CONNECTION
        || *name == TE
        || *name == TRANSFER_ENCODING
        || *name == UPGRADE
        || *name == PROXY_AUTHENTICATE
        || *name == PROXY_AUTHORIZATION
        || HOP_BY_HOP.contains(&name.as_str())
}

/// The header fields to store for a response with `headers`, received at `response_time`,
/// leaving out the fields in `strip` (from [`crate::rules::storable::Storable::strip`]).
pub fn for_storage(
    headers: &HeaderMap,
    strip: &[HeaderName],
    response_time: SystemTime,
) -> HeaderMap {
    let options = connection_listed(headers);
    let mut stored = HeaderMap::with_capacity(headers.len() + 1);
    for (name, value) in headers {
        if is_never_stored(name) || options.contains(name) || strip.contains(name) {
            continue;
        }
        stored.append(name.clone(), value.clone());
    }
    ensure_date(&mut stored, response_time);
    stored
}

/// Gives `headers` a `Date` of `received` when it has no valid one (RFC 9110 §6.6.1).
pub fn ensure_date(headers: &mut HeaderMap, received: SystemTime) {
    if !matches!(dates::read(headers, &DATE), FieldDate::Valid(_)) {
        // An IMF-fixdate is always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&dates::format(received)) {
            headers.insert(DATE, value);
        }
    }
}

/// Whether a 304's field `name` must not replace the stored response's (§3.2): fields never
/// stored, fields named in the 304's `Connection`, `Content-Length` (the RFC's own exception),
/// and the fields the stored bytes and their place in the cache depend on: `Content-Encoding`
/// and `Content-Range` (they describe the stored content) and `Vary` (it chose the variant the
/// response is stored as).
pub fn is_kept_on_update(name: &HeaderName, connection_options: &[HeaderName]) -> bool {
    is_never_stored(name)
        || connection_options.contains(name)
        || *name == CONTENT_LENGTH
        || *name == CONTENT_ENCODING
        || *name == CONTENT_RANGE
        || *name == VARY
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::rules::test_support::map;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    // RFC 9111 §3.1 / RFC 9110 §7.6.1: connection-specific and proxy fields are not stored.
    #[test]
    fn hop_by_hop_and_proxy_fields_are_not_stored() {
        let headers = map(&[
            ("connection", "close, X-Conn-Only"),
            ("x-conn-only", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("proxy-authenticate", "Basic"),
            ("proxy-authentication-info", "x"),
            ("proxy-authorization", "Basic x"),
            ("content-type", "text/plain"),
            ("date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ]);
        let stored = for_storage(&headers, &[], at(0));
        let names: Vec<_> = stored.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "date"]);
    }

    // RFC 9111 §5.2.2.4: fields named by a qualified no-cache are left out.
    #[test]
    fn stripped_fields() {
        let headers = map(&[
            ("set-cookie", "a=1"),
            ("set-cookie", "b=2"),
            ("etag", "\"x\""),
        ]);
        let stored = for_storage(&headers, &[HeaderName::from_static("set-cookie")], at(0));
        assert!(!stored.contains_key("set-cookie"));
        assert_eq!(stored["etag"], "\"x\"");
    }

    // RFC 9110 §6.6.1: a response without a valid Date gets the receipt time.
    #[test]
    fn date_added_when_missing_or_invalid() {
        let stored = for_storage(&HeaderMap::new(), &[], at(784_111_777));
        assert_eq!(stored[DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
        let stored = for_storage(&map(&[("date", "yesterday")]), &[], at(784_111_777));
        assert_eq!(stored[DATE], "Sun, 06 Nov 1994 08:49:37 GMT");
        let kept = map(&[("date", "Mon, 07 Nov 1994 08:49:37 GMT")]);
        assert_eq!(
            for_storage(&kept, &[], at(0))[DATE],
            "Mon, 07 Nov 1994 08:49:37 GMT"
        );
    }

    // Repeated fields stay repeated and in order.
    #[test]
    fn repeated_fields_are_kept() {
        let headers = map(&[("link", "<a>"), ("link", "<b>")]);
        let stored = for_storage(&headers, &[], at(0));
        let links: Vec<_> = stored.get_all("link").iter().collect();
        assert_eq!(links, ["<a>", "<b>"]);
    }

    // RFC 9111 §3.2: Content-Length is never updated, nor what the stored bytes depend on.
    #[test]
    fn fields_kept_on_update() {
        let none: &[HeaderName] = &[];
        for name in [
            "content-length",
            "content-encoding",
            "content-range",
            "vary",
            "te",
        ] {
            assert!(
                is_kept_on_update(&HeaderName::from_static(name), none),
                "{name}"
            );
        }
        for name in [
            "cache-control",
            "expires",
            "etag",
            "content-type",
            "x-custom",
        ] {
            assert!(
                !is_kept_on_update(&HeaderName::from_static(name), none),
                "{name}"
            );
        }
        let listed = [HeaderName::from_static("x-custom")];
        assert!(is_kept_on_update(
            &HeaderName::from_static("x-custom"),
            &listed
        ));
    }
}
