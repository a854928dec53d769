//! Secondary cache keys (RFC 9111 §4.1): a stored response whose `Vary` names request fields
//! may only serve requests whose values for those fields match the request that fetched it.
//!
//! The values are normalised as §4.1 allows, so that equivalent requests share a variant:
//! several field lines are one list; white space around list members and at the ends is
//! dropped; empty list members are dropped; the values of fields defined as case-insensitive
//! (`Accept-Encoding`, `Accept-Language`, `Accept-Charset`) are lowercased. A field absent from
//! the request matches only a request where it is absent too (an empty field is not absent:
//! `Accept-Encoding:` asks for identity only). Members are not reordered: in these fields order
//! rarely matters, but two orders cost only a second variant, never a wrong one. `Vary: *`, or
//! a member that is not a field name, never matches.

use std::time::SystemTime;

use http::header::VARY;
use http::{HeaderMap, HeaderName};

/// List-valued request fields commonly named in `Vary`: their lines are split into members.
const LIST_FIELDS: [&str; 5] = [
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "cache-control",
];
/// Fields whose values compare without case (RFC 9110 §12.5.2-§12.5.4 codings, charsets, tags).
const CASELESS_FIELDS: [&str; 3] = ["accept-charset", "accept-encoding", "accept-language"];

/// Adds `name` to `response`'s `Vary` unless it is listed there already (or `Vary: *`).
pub fn add(response: &mut HeaderMap, name: &HeaderName) {
    let listed = response.get_all(VARY).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|f| f.trim() == "*" || f.trim().eq_ignore_ascii_case(name.as_str()))
        })
    });
    if !listed {
        response.append(VARY, http::HeaderValue::from(name.clone()));
    }
}

/// A stored response's `Vary`: the request fields that select it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Vary {
    /// No `Vary` (or an empty one): every request matches.
    #[default]
    None,
    /// The listed fields, lowercase, sorted, without duplicates.
    Fields(Vec<HeaderName>),
    /// `*` (or something that is not a field name): never matches another request.
    Star,
}

impl Vary {
    /// Reads every `Vary` line of a response.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut fields = Vec::new();
        for line in headers.get_all(VARY) {
            for member in line.as_bytes().split(|&b| b == b',') {
                let member = member.trim_ascii();
                if member.is_empty() {
                    continue;
                }
                if member == b"*" {
                    return Vary::Star;
                }
                match HeaderName::from_bytes(member) {
                    Ok(name) => fields.push(name),
                    Err(_) => return Vary::Star,
                }
            }
        }
        if fields.is_empty() {
            return Vary::None;
        }
        fields.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        fields.dedup();
        Vary::Fields(fields)
    }

    /// Whether the response can never match a request (`Vary: *`).
    pub fn is_star(&self) -> bool {
        *self == Vary::Star
    }

    /// The secondary key of `request` for this `Vary`, or `None` for `*`. Two requests select
    /// the same stored response exactly when their keys are equal.
    pub fn secondary_key(&self, request: &HeaderMap) -> Option<SecondaryKey> {
        let fields = match self {
            Vary::None => return Some(SecondaryKey(Vec::new())),
            Vary::Fields(fields) => fields,
            Vary::Star => return None,
        };
        let mut key = Vec::new();
        for name in fields {
            key.extend_from_slice(name.as_str().as_bytes());
            key.push(b':');
            normalise(name, request, &mut key);
            key.push(b'\n');
        }
        Some(SecondaryKey(key))
    }

    /// Whether `request` selects a response stored with this `Vary` and `stored` key.
    pub fn matches(&self, stored: &SecondaryKey, request: &HeaderMap) -> bool {
        self.secondary_key(request).as_ref() == Some(stored)
    }
}

/// A request's normalised values for a `Vary`'s fields: a byte string to store beside the
/// response and compare, or hash into a storage key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SecondaryKey(Vec<u8>);

impl SecondaryKey {
    /// The key's bytes (field values cannot hold the separators used, so it is unambiguous).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Appends to `key` the normalised value of field `name` of `request`: `0x00` when absent,
/// `0x01` and the value when present.
fn normalise(name: &HeaderName, request: &HeaderMap, key: &mut Vec<u8>) {
    let mut lines = request.get_all(name).iter().peekable();
    if lines.peek().is_none() {
        key.push(0);
        return;
    }
    key.push(1);
    let list = LIST_FIELDS.contains(&name.as_str());
    let caseless = CASELESS_FIELDS.contains(&name.as_str());
    let start = key.len();
    let mut first = true;
    for line in lines {
        let members: Vec<&[u8]> = if list {
            split_members(line.as_bytes())
        } else {
            vec![line.as_bytes().trim_ascii()]
        };
        for member in members {
            if list && member.is_empty() {
                continue;
            }
            if !first {
                key.extend_from_slice(if list { b"," } else { b", " });
            }
            first = false;
            key.extend_from_slice(member);
        }
    }
    if caseless {
        key[start..].make_ascii_lowercase();
    }
}

/// The members of a list field line, trimmed, split at commas outside quoted strings.
fn split_members(line: &[u8]) -> Vec<&[u8]> {
    let mut members = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (at, &byte) in line.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match byte {
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                members.push(line[start..at].trim_ascii());
                start = at + 1;
            }
            _ => {}
        }
    }
    members.push(line[start..].trim_ascii());
    members
}

/// One stored response for the request's target, as [`select`] needs it.
#[derive(Debug, Clone, Copy)]
pub struct Variant<'a> {
    /// Its `Vary`.
    pub vary: &'a Vary,
    /// The secondary key of the request that fetched it.
    pub key: &'a SecondaryKey,
    /// Its `Date` (or receipt time), to prefer the most recent.
    pub date: SystemTime,
}

/// The index of the stored response that serves `request`: among those whose `Vary` matches,
/// the most recent by `Date` (§4: "the most recent one"); a tie goes to the later in order.
pub fn select<'a>(
    request: &HeaderMap,
    variants: impl IntoIterator<Item = Variant<'a>>,
) -> Option<usize> {
    let mut best: Option<(usize, SystemTime)> = None;
    for (index, variant) in variants.into_iter().enumerate() {
        if !variant.vary.matches(variant.key, request) {
            continue;
        }
        if best.is_none_or(|(_, date)| variant.date >= date) {
            best = Some((index, variant.date));
        }
    }
    best.map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::time::Duration;

    use crate::rules::test_support::map;

    fn vary(value: &'static str) -> Vary {
        Vary::from_headers(&map(&[("vary", value)]))
    }

    fn same(
        v: &Vary,
        a: &[(&'static str, &'static str)],
        b: &[(&'static str, &'static str)],
    ) -> bool {
        let key = v.secondary_key(&map(a)).unwrap();
        v.matches(&key, &map(b))
    }

    // RFC 9111 §4.1: Vary lists field names, case-insensitively, over several lines.
    #[test]
    fn reading_vary() {
        assert_eq!(Vary::from_headers(&HeaderMap::new()), Vary::None);
        assert_eq!(vary(" , "), Vary::None);
        let both = Vary::from_headers(&map(&[
            ("vary", "Accept-Encoding, accept-language"),
            ("vary", "ACCEPT-ENCODING"),
        ]));
        assert_eq!(
            both,
            Vary::Fields(vec![
                HeaderName::from_static("accept-encoding"),
                HeaderName::from_static("accept-language"),
            ])
        );
    }

    // RFC 9111 §4.1: a Vary of "*" always fails to match; so does a member that is no name.
    #[test]
    fn star_never_matches() {
        for v in ["*", "accept, *", "bad name"] {
            let v = vary(v);
            assert!(v.is_star());
            assert_eq!(v.secondary_key(&HeaderMap::new()), None);
            assert!(!v.matches(&SecondaryKey::default(), &HeaderMap::new()));
        }
    }

    // No Vary: every request matches.
    #[test]
    fn no_vary_matches_all() {
        assert!(same(&Vary::None, &[("accept", "a")], &[("accept", "b")]));
    }

    // RFC 9111 §4.1: values must match; different values do not.
    #[test]
    fn values_must_match() {
        let v = vary("accept-encoding");
        assert!(same(
            &v,
            &[("accept-encoding", "gzip")],
            &[("accept-encoding", "gzip")]
        ));
        assert!(!same(
            &v,
            &[("accept-encoding", "gzip")],
            &[("accept-encoding", "br")]
        ));
        let unrelated = [("accept-encoding", "gzip"), ("cookie", "x")];
        assert!(same(&v, &[("accept-encoding", "gzip")], &unrelated));
    }

    // RFC 9111 §4.1: absent matches only absent; an empty value is not absent.
    #[test]
    fn absent_matches_only_absent() {
        let v = vary("accept-encoding");
        assert!(same(&v, &[], &[]));
        assert!(!same(&v, &[], &[("accept-encoding", "gzip")]));
        assert!(!same(&v, &[("accept-encoding", "")], &[]));
    }

    // RFC 9111 §4.1: adding or removing white space; combining field lines.
    #[test]
    fn white_space_and_lines_normalise() {
        let v = vary("accept-encoding");
        assert!(same(
            &v,
            &[("accept-encoding", "gzip, br")],
            &[("accept-encoding", " gzip ,br ")]
        ));
        assert!(same(
            &v,
            &[("accept-encoding", "gzip, br")],
            &[("accept-encoding", "gzip"), ("accept-encoding", "br")]
        ));
        assert!(same(
            &v,
            &[("accept-encoding", "gzip, br")],
            &[("accept-encoding", "gzip,, br,")]
        ));
        let ua = vary("user-agent");
        assert!(same(
            &ua,
            &[("user-agent", "curl/8")],
            &[("user-agent", " curl/8 ")]
        ));
        assert!(!same(
            &ua,
            &[("user-agent", "curl/8")],
            &[("user-agent", "curl/7")]
        ));
    }

    // RFC 9111 §4.1: case-normalisation where values are case-insensitive.
    #[test]
    fn case_normalises_only_where_defined() {
        let v = vary("accept-encoding");
        assert!(same(
            &v,
            &[("accept-encoding", "GZIP")],
            &[("accept-encoding", "gzip")]
        ));
        let custom = vary("x-token");
        assert!(!same(&custom, &[("x-token", "ABC")], &[("x-token", "abc")]));
    }

    // Commas inside quoted strings are not member boundaries.
    #[test]
    fn quoted_commas() {
        let v = vary("accept");
        assert!(!same(
            &v,
            &[("accept", "text/x;p=\"a,b\"")],
            &[("accept", "text/x;p=\"a\", b\"")]
        ));
        assert_eq!(
            split_members(br#"a;q="x,\"y", b"#),
            [&br#"a;q="x,\"y""#[..], b"b"]
        );
    }

    // Several fields: all must match; their order in Vary does not matter.
    #[test]
    fn several_fields() {
        let a = vary("accept-language, accept-encoding");
        let b = vary("accept-encoding, Accept-Language");
        assert_eq!(a, b);
        let r1 = [("accept-encoding", "gzip"), ("accept-language", "ja")];
        let r2 = [("accept-encoding", "gzip"), ("accept-language", "en")];
        assert!(same(&a, &r1, &r1));
        assert!(!same(&a, &r1, &r2));
    }

    // RFC 9111 §4: among several matching responses, the most recent is used.
    #[test]
    fn select_most_recent() {
        let none = Vary::None;
        let by_encoding = vary("accept-encoding");
        let empty = SecondaryKey::default();
        let gzip = by_encoding
            .secondary_key(&map(&[("accept-encoding", "gzip")]))
            .unwrap();
        let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let variants = [
            Variant {
                vary: &none,
                key: &empty,
                date: at(10),
            },
            Variant {
                vary: &by_encoding,
                key: &gzip,
                date: at(20),
            },
            Variant {
                vary: &none,
                key: &empty,
                date: at(5),
            },
        ];
        assert_eq!(
            select(&map(&[("accept-encoding", "gzip")]), variants),
            Some(1)
        );
        assert_eq!(
            select(&map(&[("accept-encoding", "br")]), variants),
            Some(0)
        );
        assert_eq!(select(&HeaderMap::new(), []), None);
    }

    proptest::proptest! {
        // §4.1: however the same members are spread over lines and padded with white space and
        // empty members, and whatever their case, one Accept-Encoding list gives one key.
        #[test]
        fn equivalent_lists_share_a_key(
            members in proptest::collection::vec("[a-zA-Z0-9;=.]{1,8}", 1..6),
            splits in proptest::collection::vec(proptest::prelude::any::<bool>(), 6),
            pads in proptest::collection::vec("[ \t]{0,2}", 12),
            empties in proptest::collection::vec(proptest::prelude::any::<bool>(), 6),
        ) {
            let v = vary("accept-encoding");
            let canonical = members.join(",");
            let mut plain = HeaderMap::new();
            plain.insert("accept-encoding", HeaderValue::from_str(&canonical).unwrap());
            let mut lines = vec![String::new()];
            for (i, member) in members.iter().enumerate() {
                let line = lines.last_mut().unwrap();
                if !line.is_empty() {
                    line.push(',');
                }
                if empties[i] {
                    line.push_str(" ,");
                }
                line.push_str(&pads[2 * i]);
                line.push_str(&member.to_ascii_uppercase());
                line.push_str(&pads[2 * i + 1]);
                if splits[i] && i + 1 < members.len() {
                    lines.push(String::new());
                }
            }
            let mut spread = HeaderMap::new();
            for line in &lines {
                spread.append("accept-encoding", HeaderValue::from_str(line).unwrap());
            }
            proptest::prop_assert_eq!(v.secondary_key(&plain), v.secondary_key(&spread));
        }
    }
}
