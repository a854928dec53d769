//! The conditional request a cache sends to validate its stored responses (RFC 9111 §4.3.1).
//!
//! The client's own conditional fields (and `Range`: the cache fetches whole representations)
//! are removed: they are answered from the cache afterwards ([`super::client`]), and a 304 meant
//! for the client's copy could not update the cache's (§4.3.1 allows merging the lists, kura
//! does not). Then:
//! - `If-None-Match` lists the entity tags of every stored response being validated (MUST when
//!   they have one);
//! - `If-Modified-Since` carries the `Last-Modified` of the stored response when exactly one is
//!   being validated and it has a valid one (SHOULD).

use http::header::{
    IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, RANGE,
};
use http::{HeaderMap, HeaderName, HeaderValue};

use super::etag;
use crate::rules::dates::{self, FieldDate};

/// Request fields removed from a request before the cache adds its own validators.
pub const CLIENT_CONDITIONALS: [HeaderName; 6] = [
    IF_MATCH,
    IF_NONE_MATCH,
    IF_MODIFIED_SINCE,
    IF_UNMODIFIED_SINCE,
    IF_RANGE,
    RANGE,
];

/// Turns `request` (the header fields of the request to forward) into a validation request for
/// the stored responses with header fields `stored`. Returns whether a validator was added
/// (when not, the request is a plain fetch).
pub fn make_conditional(request: &mut HeaderMap, stored: &[&HeaderMap]) -> bool {
    for name in &CLIENT_CONDITIONALS {
        request.remove(name);
    }
    let mut tags: Vec<&[u8]> = Vec::new();
    for headers in stored {
        if let Some(value) = headers.get(http::header::ETAG) {
            if etag::of_response(headers).is_some() {
                let tag = value.as_bytes().trim_ascii();
                if !tags.contains(&tag) {
                    tags.push(tag);
                }
            }
        }
    }
    let mut added = false;
    if !tags.is_empty() {
        let list = tags.join(&b", "[..]);
        if let Ok(value) = HeaderValue::from_bytes(&list) {
            request.insert(IF_NONE_MATCH, value);
            added = true;
        }
    }
    if let [only] = stored {
        if let FieldDate::Valid(modified) = dates::read(only, &LAST_MODIFIED) {
            if let Ok(value) = HeaderValue::from_str(&dates::format(modified)) {
                request.insert(IF_MODIFIED_SINCE, value);
                added = true;
            }
        }
    }
    added
}

/// Whether a stored response has a validator (a valid `ETag` or `Last-Modified`).
pub fn has_validators(stored: &HeaderMap) -> bool {
    etag::of_response(stored).is_some() || dates::read(stored, &LAST_MODIFIED).valid().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::rules::test_support::map;

    const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

    // RFC 9111 §4.3.1: send the entity tag (MUST) and Last-Modified (SHOULD).
    #[test]
    fn validators_from_one_stored_response() {
        let stored = map(&[("etag", "\"v1\""), ("last-modified", LM)]);
        let mut request = map(&[("accept", "*/*")]);
        assert!(make_conditional(&mut request, &[&stored]));
        assert_eq!(request[IF_NONE_MATCH], "\"v1\"");
        assert_eq!(request[IF_MODIFIED_SINCE], LM);
        assert_eq!(request["accept"], "*/*");
    }

    // RFC 9111 §4.3.1: several stored responses: all their tags; no If-Modified-Since.
    #[test]
    fn several_stored_responses() {
        let a = map(&[("etag", "\"a\""), ("last-modified", LM)]);
        let b = map(&[("etag", "W/\"b\"")]);
        let c = map(&[("etag", "\"a\"")]);
        let mut request = HeaderMap::new();
        assert!(make_conditional(&mut request, &[&a, &b, &c]));
        assert_eq!(request[IF_NONE_MATCH], "\"a\", W/\"b\"");
        assert!(!request.contains_key(IF_MODIFIED_SINCE));
    }

    // The client's own conditionals and Range are replaced.
    #[test]
    fn client_conditionals_removed() {
        let mut request = map(&[
            ("if-none-match", "\"client\""),
            ("if-modified-since", LM),
            ("if-match", "\"m\""),
            ("if-unmodified-since", LM),
            ("if-range", "\"r\""),
            ("range", "bytes=0-1"),
        ]);
        assert!(!make_conditional(&mut request, &[&HeaderMap::new()]));
        assert!(request.is_empty());
    }

    // Invalid validators are not sent.
    #[test]
    fn invalid_validators_are_skipped() {
        let stored = map(&[("etag", "no-quotes"), ("last-modified", "yesterday")]);
        let mut request = HeaderMap::new();
        assert!(!make_conditional(&mut request, &[&stored]));
        assert!(request.is_empty());
        assert!(!has_validators(&stored));
        assert!(has_validators(&map(&[("etag", "\"x\"")])));
        assert!(has_validators(&map(&[("last-modified", LM)])));
    }

    // A Last-Modified in another accepted format is sent as an IMF-fixdate.
    #[test]
    fn last_modified_is_sent_as_imf_fixdate() {
        let stored = map(&[("last-modified", "Sunday, 06-Nov-94 08:49:37 GMT")]);
        let mut request = HeaderMap::new();
        assert!(make_conditional(&mut request, &[&stored]));
        assert_eq!(request[IF_MODIFIED_SINCE], LM);
    }
}
