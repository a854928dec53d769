//! `key_cookies`: cookies whose values are part of a route's cache key (a language or currency
//! cookie), Varnish's `hash_data(cookie value)` without VCL. Before the lookup each named
//! cookie's value is copied into a field of kura's own, `Kura-Key-Cookie-<name>` (any the
//! client sent itself removed first, so no client can choose its variant without the cookie),
//! and every response stored for the route varies on those fields. A request whose cookies are
//! all key cookies is looked up instead of passed (the backend still gets them); any other
//! cookie passes it as before. Clients see `Vary: Cookie` in place of kura's fields.

use http::header::{COOKIE, VARY};
use http::{HeaderMap, HeaderName, HeaderValue};

/// The prefix of kura's key fields.
pub const PREFIX: &str = "kura-key-cookie-";

/// Sets the key fields of `cookies` (name, field) from the request's `Cookie`; true when the
/// request has cookies and all of them are key cookies.
pub fn prepare(headers: &mut HeaderMap, cookies: &[(String, HeaderName)]) -> bool {
    for (_, field) in cookies {
        headers.remove(field);
    }
    let mut all_keyed = headers.contains_key(COOKIE);
    let mut found: Vec<(&HeaderName, String)> = Vec::new();
    for line in headers.get_all(COOKIE) {
        let Ok(text) = line.to_str() else {
            all_keyed = false;
            continue;
        };
        for pair in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match cookies.iter().find(|(n, _)| n == name.trim()) {
                Some((_, field)) => found.push((field, value.trim().to_owned())),
                None => all_keyed = false,
            }
        }
    }
    for (field, value) in found {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(field.clone(), value);
        }
    }
    all_keyed
}

/// In the `Vary` of a response to a client, kura's key fields become `Cookie`.
pub fn client_vary(headers: &mut HeaderMap) {
    let ours = |v: &HeaderValue| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|f| f.trim().to_ascii_lowercase().starts_with(PREFIX))
        })
    };
    if !headers.get_all(VARY).iter().any(ours) {
        return;
    }
    let mut members: Vec<String> = Vec::new();
    for line in headers.get_all(VARY) {
        for member in line.to_str().unwrap_or_default().split(',').map(str::trim) {
            let member = if member.to_ascii_lowercase().starts_with(PREFIX) {
                "Cookie"
            } else {
                member
            };
            if !member.is_empty() && !members.iter().any(|m| m.eq_ignore_ascii_case(member)) {
                members.push(member.to_owned());
            }
        }
    }
    headers.remove(VARY);
    if let Ok(value) = HeaderValue::from_str(&members.join(", ")) {
        headers.insert(VARY, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lang() -> Vec<(String, HeaderName)> {
        vec![(
            "lang".into(),
            HeaderName::from_static("kura-key-cookie-lang"),
        )]
    }

    #[test]
    fn key_fields_come_from_cookies_only() {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_static("lang=fr"));
        headers.insert("kura-key-cookie-lang", HeaderValue::from_static("de"));
        assert!(prepare(&mut headers, &lang()));
        assert_eq!(headers["kura-key-cookie-lang"], "fr");
        let mut forged = HeaderMap::new();
        forged.insert("kura-key-cookie-lang", HeaderValue::from_static("de"));
        assert!(!prepare(&mut forged, &lang()));
        assert!(forged.get("kura-key-cookie-lang").is_none());
        let mut more = HeaderMap::new();
        more.insert(COOKIE, HeaderValue::from_static("lang=fr; session=1"));
        assert!(!prepare(&mut more, &lang()));
        let mut vary = HeaderMap::new();
        vary.insert(
            VARY,
            HeaderValue::from_static("Accept-Encoding, kura-key-cookie-lang"),
        );
        client_vary(&mut vary);
        assert_eq!(vary[VARY], "Accept-Encoding, Cookie");
    }
}
