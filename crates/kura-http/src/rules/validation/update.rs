//! A 304 from the backend: which stored responses it freshens (RFC 9111 §4.3.4) and how their
//! header fields are updated (§3.2).
//!
//! Selection, by the validators in the 304:
//! - a strong `ETag`: every stored response with the same strong tag; none matching, none
//!   updated;
//! - otherwise a weak `ETag` and/or `Last-Modified` (kura treats `Last-Modified` as weak, RFC
//!   9110 §8.8.2.2): the most recent (by `Date`) stored response they all match;
//! - no validator: the only stored response, if it has no validator either.
//!
//! Update: every field of the 304 replaces the stored field of that name, except the fields
//! [`is_kept_on_update`] names, fields the 304's own `no-cache="..."` names, and `Set-Cookie`
//! unless the operator stores cookies. A 304 without `Age` clears the stored `Age` (the age
//! now dates from this validation), and one without a valid `Date` gives the stored response
//! the 304's receipt time. Afterwards the caller recomputes [`crate::rules::freshness::Freshness`]
//! from the merged fields with the times of the validation exchange, and checks
//! [`crate::rules::storable::storable`] again (a 304 may now say `no-store`).

use std::time::SystemTime;

use http::header::{AGE, DATE, LAST_MODIFIED, SET_COOKIE};
use http::{HeaderMap, HeaderValue};

use super::etag::{self, EntityTag};
use crate::rules::cache_control::FieldScope;
use crate::rules::dates;
use crate::rules::headers::{connection_listed, is_kept_on_update};
use crate::rules::policy::{CachePolicy, SetCookie};
use crate::rules::targeted::ResponseControl;

/// The indices of the stored responses (`stored`: their header fields) that the 304 with
/// header fields `not_modified` updates.
pub fn select_for_update(not_modified: &HeaderMap, stored: &[&HeaderMap]) -> Vec<usize> {
    let new_tag = etag::of_response(not_modified);
    if let Some(tag) = new_tag.filter(|tag| !tag.weak) {
        return (0..stored.len())
            .filter(|&i| etag::of_response(stored[i]).is_some_and(|t| t.strong_eq(&tag)))
            .collect();
    }
    let new_modified = dates::read(not_modified, &LAST_MODIFIED).valid();
    if new_tag.is_some() || new_modified.is_some() {
        let matches = |headers: &HeaderMap| {
            let tag_ok = new_tag.as_ref().is_none_or(|tag: &EntityTag<'_>| {
                etag::of_response(headers).is_some_and(|t| t.weak_eq(tag))
            });
            let modified_ok = new_modified
                .is_none_or(|m| dates::read(headers, &LAST_MODIFIED).valid() == Some(m));
            tag_ok && modified_ok
        };
        let mut best: Option<(usize, Option<SystemTime>)> = None;
        for (index, headers) in stored.iter().enumerate() {
            if !matches(headers) {
                continue;
            }
            let date = dates::read(headers, &DATE).valid();
            if best.is_none_or(|(_, best_date)| date >= best_date) {
                best = Some((index, date));
            }
        }
        return best.map(|(index, _)| vec![index]).unwrap_or_default();
    }
    match stored {
        [only] if !super::conditional::has_validators(only) => vec![0],
        _ => Vec::new(),
    }
}

/// Updates the stored header fields `stored` with those of the 304 `not_modified`, received at
/// `received` (§3.2).
pub fn update_headers(
    policy: &CachePolicy,
    stored: &mut HeaderMap,
    not_modified: &HeaderMap,
    received: SystemTime,
) {
    let listed = connection_listed(not_modified);
    let control = ResponseControl::of(policy, not_modified);
    let unserved = match &control.directives.no_cache {
        FieldScope::Fields(fields) => fields.clone(),
        FieldScope::Absent | FieldScope::All => Vec::new(),
    };
    for name in not_modified.keys() {
        if is_kept_on_update(name, &listed)
            || unserved.contains(name)
            || (*name == SET_COOKIE && policy.set_cookie != SetCookie::Store)
        {
            continue;
        }
        stored.remove(name);
        for value in not_modified.get_all(name) {
            stored.append(name.clone(), value.clone());
        }
    }
    if !not_modified.contains_key(AGE) {
        stored.remove(AGE);
    }
    if dates::read(not_modified, &DATE).valid().is_none() {
        if let Ok(value) = HeaderValue::from_str(&dates::format(received)) {
            stored.insert(DATE, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::rules::test_support::map;

    const D1: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
    const D2: &str = "Sun, 06 Nov 1994 08:49:38 GMT";

    // §4.3.4: a strong validator updates every stored response with that strong validator.
    #[test]
    fn strong_etag_selects_all_matching() {
        let a = map(&[("etag", "\"v1\"")]);
        let b = map(&[("etag", "\"v2\"")]);
        let c = map(&[("etag", "\"v1\""), ("vary", "accept")]);
        let weak = map(&[("etag", "W/\"v1\"")]);
        let r304 = map(&[("etag", "\"v1\"")]);
        assert_eq!(select_for_update(&r304, &[&a, &b, &c, &weak]), vec![0, 2]);
        // None matching: none updated (MUST NOT).
        let r304 = map(&[("etag", "\"v9\"")]);
        assert!(select_for_update(&r304, &[&a, &b]).is_empty());
    }

    // §4.3.4: weak validators select the most recent matching stored response.
    #[test]
    fn weak_validators_select_most_recent() {
        let old = map(&[("etag", "W/\"v1\""), ("date", D1)]);
        let new = map(&[("etag", "\"v1\""), ("date", D2)]);
        let other = map(&[("etag", "W/\"v2\""), ("date", D2)]);
        let r304 = map(&[("etag", "W/\"v1\"")]);
        assert_eq!(select_for_update(&r304, &[&old, &new, &other]), vec![1]);
        assert_eq!(select_for_update(&r304, &[&other]), Vec::<usize>::new());
    }

    // §4.3.4: Last-Modified (treated as weak) selects the most recent match.
    #[test]
    fn last_modified_selects() {
        let a = map(&[("last-modified", D1), ("date", D1)]);
        let b = map(&[("last-modified", D1), ("date", D2)]);
        let c = map(&[("last-modified", D2), ("date", D2)]);
        let r304 = map(&[("last-modified", D1)]);
        assert_eq!(select_for_update(&r304, &[&a, &b, &c]), vec![1]);
        // Weak ETag and Last-Modified in the 304: both must match.
        let tagged = map(&[("etag", "W/\"x\""), ("last-modified", D2)]);
        let r304 = map(&[("etag", "W/\"x\""), ("last-modified", D1)]);
        assert!(select_for_update(&r304, &[&tagged]).is_empty());
    }

    // §4.3.4: no validator in the 304: only a single, validator-less stored response.
    #[test]
    fn no_validators() {
        let bare = map(&[("date", D1)]);
        let tagged = map(&[("etag", "\"x\"")]);
        let r304 = map(&[("date", D2)]);
        assert_eq!(select_for_update(&r304, &[&bare]), vec![0]);
        assert!(select_for_update(&r304, &[&tagged]).is_empty());
        assert!(select_for_update(&r304, &[&bare, &bare]).is_empty());
        assert!(select_for_update(&r304, &[]).is_empty());
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    // §3.2: fields of the 304 replace stored ones; Content-Length and friends do not.
    #[test]
    fn header_update_rules() {
        let mut stored = map(&[
            ("cache-control", "max-age=10"),
            ("content-length", "100"),
            ("content-encoding", "gzip"),
            ("content-type", "text/html"),
            ("vary", "accept-encoding"),
            ("x-old", "1"),
            ("link", "<a>"),
            ("link", "<b>"),
            ("date", D1),
            ("age", "50"),
        ]);
        let r304 = map(&[
            ("cache-control", "max-age=60"),
            ("content-length", "0"),
            ("content-encoding", "br"),
            ("vary", "*"),
            ("link", "<c>"),
            ("date", D2),
            ("connection", "x-hop"),
            ("x-hop", "1"),
            ("transfer-encoding", "chunked"),
        ]);
        update_headers(&CachePolicy::default(), &mut stored, &r304, at(0));
        assert_eq!(stored["cache-control"], "max-age=60");
        assert_eq!(stored["content-length"], "100");
        assert_eq!(stored["content-encoding"], "gzip");
        assert_eq!(stored["vary"], "accept-encoding");
        assert_eq!(stored["content-type"], "text/html");
        assert_eq!(stored["x-old"], "1");
        assert_eq!(stored.get_all("link").iter().collect::<Vec<_>>(), ["<c>"]);
        assert_eq!(stored["date"], D2);
        assert!(!stored.contains_key("age"));
        assert!(!stored.contains_key("x-hop"));
        assert!(!stored.contains_key("connection"));
        assert!(!stored.contains_key("transfer-encoding"));
    }

    // A 304 without Date: the stored Date becomes the 304's receipt time (RFC 9110 §6.6.1).
    #[test]
    fn date_from_receipt() {
        let mut stored = map(&[("date", D1), ("age", "5")]);
        update_headers(
            &CachePolicy::default(),
            &mut stored,
            &map(&[("age", "3")]),
            at(784_111_778),
        );
        assert_eq!(stored["date"], D2);
        assert_eq!(stored["age"], "3");
    }

    // The 304's no-cache fields and (by default) Set-Cookie are not stored.
    #[test]
    fn unserved_fields_not_stored() {
        let mut stored = map(&[("date", D1)]);
        let r304 = map(&[
            ("cache-control", "max-age=5, no-cache=\"x-secret\""),
            ("x-secret", "1"),
            ("set-cookie", "a=1"),
            ("date", D2),
        ]);
        update_headers(&CachePolicy::default(), &mut stored, &r304, at(0));
        assert!(!stored.contains_key("x-secret"));
        assert!(!stored.contains_key("set-cookie"));
        let store = CachePolicy {
            set_cookie: SetCookie::Store,
            ..CachePolicy::default()
        };
        update_headers(&store, &mut stored, &r304, at(0));
        assert_eq!(stored["set-cookie"], "a=1");
    }
}
