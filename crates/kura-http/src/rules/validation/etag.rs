//! Entity tags (RFC 9110 §8.8.3) and their two comparisons (§8.8.3.2), plus the
//! `If-None-Match` list (§13.1.2).
//!
//! `entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE`, where etagc may be a comma, so lists are read
//! tag by tag rather than split at commas. Anything that is not exactly that is invalid.

use http::header::{ETAG, IF_NONE_MATCH};
use http::HeaderMap;

/// One entity tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityTag<'a> {
    /// `W/`: a weak validator.
    pub weak: bool,
    /// The opaque tag, without its quotes.
    pub opaque: &'a [u8],
}

impl EntityTag<'_> {
    /// Strong comparison: both strong and the same opaque tag.
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison: the same opaque tag, weak or not.
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

fn is_etagc(byte: u8) -> bool {
    byte == 0x21 || (0x23..=0x7e).contains(&byte) || byte >= 0x80
}

/// Parses one entity tag at the start of `bytes`: the tag and the rest.
fn parse_one(bytes: &[u8]) -> Option<(EntityTag<'_>, &[u8])> {
    let (weak, rest) = match bytes.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    let rest = rest.strip_prefix(b"\"")?;
    let end = rest.iter().position(|&b| !is_etagc(b))?;
    if rest[end] != b'"' {
        return None;
    }
    Some((
        EntityTag {
            weak,
            opaque: &rest[..end],
        },
        &rest[end + 1..],
    ))
}

/// Parses a field value holding exactly one entity tag (surrounding white space allowed).
pub fn parse(bytes: &[u8]) -> Option<EntityTag<'_>> {
    match parse_one(bytes.trim_ascii())? {
        (tag, []) => Some(tag),
        _ => None,
    }
}

/// The `ETag` of a response: `None` when absent, invalid or given twice.
pub fn of_response(headers: &HeaderMap) -> Option<EntityTag<'_>> {
    let mut lines = headers.get_all(ETAG).iter();
    let first = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    parse(first.as_bytes())
}

/// A request's `If-None-Match`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfNoneMatch<'a> {
    /// `*`: any current representation.
    Any,
    /// A list of entity tags.
    Tags(Vec<EntityTag<'a>>),
    /// Not `*` nor a list of entity tags.
    Invalid,
}

impl IfNoneMatch<'_> {
    /// Whether `etag` matches (weak comparison, RFC 9110 §13.1.2); `*` matches any stored
    /// response, tagged or not.
    pub fn matches(&self, etag: Option<&EntityTag<'_>>) -> bool {
        match self {
            IfNoneMatch::Any => true,
            IfNoneMatch::Tags(tags) => {
                etag.is_some_and(|etag| tags.iter().any(|t| t.weak_eq(etag)))
            }
            IfNoneMatch::Invalid => false,
        }
    }
}

/// Reads the request's `If-None-Match` (all lines), `None` when absent.
pub fn if_none_match(headers: &HeaderMap) -> Option<IfNoneMatch<'_>> {
    let mut lines = headers.get_all(IF_NONE_MATCH).iter().peekable();
    lines.peek()?;
    let mut tags = Vec::new();
    let mut star = false;
    for line in lines {
        let mut rest = line.as_bytes();
        loop {
            rest = rest.trim_ascii_start();
            while let Some(after) = rest.strip_prefix(b",") {
                rest = after.trim_ascii_start();
            }
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix(b"*") {
                star = true;
                rest = after;
            } else {
                match parse_one(rest) {
                    Some((tag, after)) => {
                        tags.push(tag);
                        rest = after;
                    }
                    None => return Some(IfNoneMatch::Invalid),
                }
            }
            rest = rest.trim_ascii_start();
            if !(rest.is_empty() || rest.starts_with(b",")) {
                return Some(IfNoneMatch::Invalid);
            }
        }
    }
    Some(match (star, tags.is_empty()) {
        (true, true) => IfNoneMatch::Any,
        (false, false) => IfNoneMatch::Tags(tags),
        // "*" mixed with tags, or nothing at all: not a valid field value.
        _ => IfNoneMatch::Invalid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn tag(weak: bool, opaque: &[u8]) -> EntityTag<'_> {
        EntityTag { weak, opaque }
    }

    // RFC 9110 §8.8.3: the entity-tag grammar.
    #[test]
    fn parsing() {
        assert_eq!(parse(b"\"xyzzy\""), Some(tag(false, b"xyzzy")));
        assert_eq!(parse(b"W/\"xyzzy\""), Some(tag(true, b"xyzzy")));
        assert_eq!(parse(b"\"\""), Some(tag(false, b"")));
        assert_eq!(parse(b" \"a,b\" "), Some(tag(false, b"a,b")));
        for bad in [
            &b"xyzzy"[..],
            b"\"open",
            b"w/\"x\"",
            b"W/x",
            b"\"a\"b",
            b"\"a\" \"b\"",
            b"",
            b"\"a\"b\"",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    // RFC 9110 §8.8.3.2: the comparison table.
    #[test]
    fn comparisons() {
        let (w1, w2, s1, s2) = (
            tag(true, b"1"),
            tag(true, b"2"),
            tag(false, b"1"),
            tag(false, b"2"),
        );
        assert!(!w1.strong_eq(&w1) && w1.weak_eq(&w1));
        assert!(!w1.strong_eq(&w2) && !w1.weak_eq(&w2));
        assert!(!w1.strong_eq(&s1) && w1.weak_eq(&s1));
        assert!(s1.strong_eq(&s1) && s1.weak_eq(&s1));
        assert!(!s1.strong_eq(&s2) && !s1.weak_eq(&s2));
    }

    fn inm(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(IF_NONE_MATCH, HeaderValue::from_static(value));
        }
        headers
    }

    // RFC 9110 §13.1.2: "*" or a list of entity tags, over several lines.
    #[test]
    fn if_none_match_lists() {
        assert_eq!(if_none_match(&HeaderMap::new()), None);
        assert_eq!(if_none_match(&inm(&["*"])), Some(IfNoneMatch::Any));
        let h = inm(&["\"a\", W/\"b\"", "\"c,d\""]);
        assert_eq!(
            if_none_match(&h),
            Some(IfNoneMatch::Tags(vec![
                tag(false, b"a"),
                tag(true, b"b"),
                tag(false, b"c,d")
            ]))
        );
        let h = inm(&[" , \"a\" ,, "]);
        assert_eq!(
            if_none_match(&h),
            Some(IfNoneMatch::Tags(vec![tag(false, b"a")]))
        );
        for bad in ["a", "\"a\" b", "*, \"a\"", "", "\"a", "W/"] {
            assert_eq!(
                if_none_match(&inm(&[bad])),
                Some(IfNoneMatch::Invalid),
                "{bad}"
            );
        }
    }

    // RFC 9110 §13.1.2: If-None-Match uses the weak comparison.
    #[test]
    fn if_none_match_matching() {
        let stored = tag(false, b"v1");
        let h = inm(&["W/\"v1\""]);
        assert!(if_none_match(&h).unwrap().matches(Some(&stored)));
        let h = inm(&["\"v2\""]);
        assert!(!if_none_match(&h).unwrap().matches(Some(&stored)));
        assert!(!if_none_match(&h).unwrap().matches(None));
        assert!(IfNoneMatch::Any.matches(None));
        assert!(!IfNoneMatch::Invalid.matches(Some(&stored)));
    }

    #[test]
    fn response_etag() {
        let mut h = HeaderMap::new();
        assert_eq!(of_response(&h), None);
        h.insert(ETAG, HeaderValue::from_static("W/\"x\""));
        assert_eq!(of_response(&h), Some(tag(true, b"x")));
        h.append(ETAG, HeaderValue::from_static("\"y\""));
        assert_eq!(of_response(&h), None);
    }
}
