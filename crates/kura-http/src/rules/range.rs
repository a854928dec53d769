//! Range requests answered from a complete stored response (RFC 9110 §14; RFC 9111 §3.3-3.4:
//! a cache stores whole responses only, and serves ranges out of them).
//!
//! - Only `GET`, only a stored `200`, only the `bytes` unit; a `Range` that does not parse is
//!   ignored (§14.2: the whole representation is sent).
//! - `If-Range` (§13.1.5): an entity tag matches only by strong comparison with the stored
//!   `ETag`; a date only when it equals `Last-Modified` exactly and that is a strong validator
//!   (at least one second before `Date`, §8.8.2.2). When it does not match, the whole
//!   representation is sent.
//! - One satisfiable range: 206 with `Content-Range`. None: 416 with `Content-Range: bytes */N`.
//!   Several satisfiable ranges: the whole representation (200), as Varnish does. RFC 9110
//!   §14.2 lets a server ignore `Range`; a multipart answer would let a client make the cache
//!   send the same bytes many times over (overlapping ranges, CVE-2011-3192), and clients that
//!   ask for several ranges accept a 200.

use std::time::Duration;

use http::header::{DATE, IF_RANGE, LAST_MODIFIED, RANGE};
use http::{HeaderMap, Method, StatusCode};

use super::dates::{self, FieldDate};
use super::validation::etag;

/// At most this many range specs are read; a longer list is answered whole.
const MAX_SPECS: usize = 64;

/// How to answer a request that may carry `Range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeAnswer {
    /// The whole representation (no `Range`, ignored, or `If-Range` did not match).
    Full,
    /// 206: bytes `start..=end` of it.
    Partial {
        /// First byte.
        start: u64,
        /// Last byte (inclusive).
        end: u64,
    },
    /// 416: no range overlaps the representation.
    Unsatisfiable,
}

/// One `byte-range-spec` or `suffix-range`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    /// `first-last` or `first-`.
    From(u64, Option<u64>),
    /// `-suffix`.
    Suffix(u64),
}

fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Larger than any representation: saturate rather than refuse.
    Some(text.parse().unwrap_or(u64::MAX))
}

/// Parses a `Range` value; `None` when it is not a valid `bytes` range set.
fn parse(value: &[u8]) -> Option<Vec<Spec>> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (unit, set) = text.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for member in set.split(',') {
        let member = member.trim();
        if member.is_empty() {
            continue;
        }
        if specs.len() == MAX_SPECS {
            return None;
        }
        let (first, last) = member.split_once('-')?;
        let spec = if first.is_empty() {
            Spec::Suffix(number(last)?)
        } else {
            let first = number(first)?;
            let last = if last.is_empty() {
                None
            } else {
                Some(number(last)?)
            };
            if last.is_some_and(|last| last < first) {
                return None;
            }
            Spec::From(first, last)
        };
        specs.push(spec);
    }
    (!specs.is_empty()).then_some(specs)
}

/// The bytes of `spec` in a representation of `length` bytes, if it overlaps it.
fn resolve(spec: Spec, length: u64) -> Option<(u64, u64)> {
    match spec {
        Spec::From(first, _) if first >= length => None,
        Spec::From(first, last) => Some((first, last.map_or(length - 1, |l| l.min(length - 1)))),
        Spec::Suffix(0) => None,
        Spec::Suffix(_) if length == 0 => None,
        Spec::Suffix(n) => Some((length.saturating_sub(n), length - 1)),
    }
}

/// Whether the request's `If-Range` (if any) lets the range be applied to the stored
/// response with `stored` fields.
fn if_range_holds(request: &HeaderMap, stored: &HeaderMap) -> bool {
    let mut lines = request.get_all(IF_RANGE).iter();
    let Some(value) = lines.next() else {
        return true;
    };
    if lines.next().is_some() {
        return false;
    }
    let bytes = value.as_bytes().trim_ascii();
    if bytes.starts_with(b"\"") || bytes.starts_with(b"W/") {
        return match (etag::parse(bytes), etag::of_response(stored)) {
            (Some(asked), Some(have)) => asked.strong_eq(&have),
            _ => false,
        };
    }
    let asked = value
        .to_str()
        .ok()
        .and_then(|t| httpdate::parse_http_date(t.trim()).ok());
    let (FieldDate::Valid(modified), Some(asked)) = (dates::read(stored, &LAST_MODIFIED), asked)
    else {
        return false;
    };
    let strong = match dates::read(stored, &DATE) {
        FieldDate::Valid(date) => date
            .duration_since(modified)
            .is_ok_and(|d| d >= Duration::from_secs(1)),
        _ => false,
    };
    strong && asked == modified
}

/// How to answer `method` with request fields `request` from a stored response with `status`,
/// fields `stored` and a body of `length` bytes.
pub fn answer(
    method: &Method,
    request: &HeaderMap,
    status: StatusCode,
    stored: &HeaderMap,
    length: u64,
) -> RangeAnswer {
    if method != Method::GET || status != StatusCode::OK {
        return RangeAnswer::Full;
    }
    let mut lines = request.get_all(RANGE).iter();
    let (Some(value), None) = (lines.next(), lines.next()) else {
        return RangeAnswer::Full;
    };
    let Some(specs) = parse(value.as_bytes()) else {
        return RangeAnswer::Full;
    };
    if !if_range_holds(request, stored) {
        return RangeAnswer::Full;
    }
    let mut satisfiable = specs.into_iter().filter_map(|s| resolve(s, length));
    match (satisfiable.next(), satisfiable.next()) {
        (None, _) => RangeAnswer::Unsatisfiable,
        (Some((start, end)), None) => RangeAnswer::Partial { start, end },
        (Some(_), Some(_)) => RangeAnswer::Full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    fn ask(range: &str, extra: &[(&str, &str)], stored: &HeaderMap, length: u64) -> RangeAnswer {
        let mut request = fields(extra);
        request.insert(RANGE, range.parse().unwrap());
        answer(&Method::GET, &request, StatusCode::OK, stored, length)
    }

    /// RFC 9110 §14.1.2's examples, on a representation of 10000 bytes.
    #[test]
    fn byte_ranges_of_the_rfc() {
        let none = HeaderMap::new();
        let partial = |start, end| RangeAnswer::Partial { start, end };
        assert_eq!(ask("bytes=0-499", &[], &none, 10000), partial(0, 499));
        assert_eq!(ask("bytes=500-999", &[], &none, 10000), partial(500, 999));
        assert_eq!(ask("bytes=-500", &[], &none, 10000), partial(9500, 9999));
        assert_eq!(ask("bytes=9500-", &[], &none, 10000), partial(9500, 9999));
        assert_eq!(ask("bytes=0-0,-1", &[], &none, 10000), RangeAnswer::Full);
        assert_eq!(ask("bytes=0-99999", &[], &none, 10000), partial(0, 9999));
        assert_eq!(ask("bytes=-20000", &[], &none, 10000), partial(0, 9999));
        assert_eq!(ask(" BYTES = 1-2 ", &[], &none, 10000), partial(1, 2));
        // Unsatisfiable members are dropped; the one left is served.
        assert_eq!(ask("bytes=20000-,5-9", &[], &none, 10000), partial(5, 9));
    }

    #[test]
    fn unsatisfiable_and_ignored_ranges() {
        let none = HeaderMap::new();
        assert_eq!(
            ask("bytes=10000-", &[], &none, 10000),
            RangeAnswer::Unsatisfiable
        );
        assert_eq!(
            ask("bytes=-0", &[], &none, 10000),
            RangeAnswer::Unsatisfiable
        );
        assert_eq!(ask("bytes=0-", &[], &none, 0), RangeAnswer::Unsatisfiable);
        assert_eq!(ask("bytes=-5", &[], &none, 0), RangeAnswer::Unsatisfiable);
        for ignored in [
            "bytes=5-1",
            "bytes=a-b",
            "bytes=",
            "lines=1-2",
            "bytes=1-2-3",
            "bytes=+1-2",
            "1-2",
        ] {
            assert_eq!(
                ask(ignored, &[], &none, 100),
                RangeAnswer::Full,
                "{ignored}"
            );
        }
        let many = format!("bytes={}", vec!["0-1"; 65].join(","));
        assert_eq!(ask(&many, &[], &none, 100), RangeAnswer::Full);
        let huge = ask("bytes=0-99999999999999999999999", &[], &none, 100);
        assert_eq!(huge, RangeAnswer::Partial { start: 0, end: 99 });
    }

    #[test]
    fn only_get_on_a_stored_200() {
        let mut request = HeaderMap::new();
        request.insert(RANGE, "bytes=0-1".parse().unwrap());
        let none = HeaderMap::new();
        assert_eq!(
            answer(&Method::HEAD, &request, StatusCode::OK, &none, 10),
            RangeAnswer::Full
        );
        assert_eq!(
            answer(&Method::GET, &request, StatusCode::NOT_FOUND, &none, 10),
            RangeAnswer::Full
        );
        request.append(RANGE, "bytes=2-3".parse().unwrap());
        assert_eq!(
            answer(&Method::GET, &request, StatusCode::OK, &none, 10),
            RangeAnswer::Full
        );
    }

    /// RFC 9110 §13.1.5: strong comparison for tags, exact strong dates.
    #[test]
    fn if_range() {
        let stored = fields(&[
            ("etag", "\"v1\""),
            ("last-modified", "Tue, 24 Nov 2026 03:00:00 GMT"),
            ("date", "Tue, 24 Nov 2026 04:00:00 GMT"),
        ]);
        let partial = RangeAnswer::Partial { start: 0, end: 0 };
        let with = |if_range: &str| ask("bytes=0-0", &[("if-range", if_range)], &stored, 10);
        assert_eq!(with("\"v1\""), partial);
        assert_eq!(with("\"v2\""), RangeAnswer::Full);
        assert_eq!(with("W/\"v1\""), RangeAnswer::Full);
        assert_eq!(with("Tue, 24 Nov 2026 03:00:00 GMT"), partial);
        assert_eq!(with("Tue, 24 Nov 2026 03:00:01 GMT"), RangeAnswer::Full);
        assert_eq!(with("garbage"), RangeAnswer::Full);
        let weak_tag = fields(&[("etag", "W/\"v1\"")]);
        let asked = ask("bytes=0-0", &[("if-range", "W/\"v1\"")], &weak_tag, 10);
        assert_eq!(asked, RangeAnswer::Full);
        // Last-Modified equal to Date is a weak validator: a date never matches it.
        let weak_date = fields(&[
            ("last-modified", "Tue, 24 Nov 2026 03:00:00 GMT"),
            ("date", "Tue, 24 Nov 2026 03:00:00 GMT"),
        ]);
        let when = [("if-range", "Tue, 24 Nov 2026 03:00:00 GMT")];
        assert_eq!(ask("bytes=0-0", &when, &weak_date, 10), RangeAnswer::Full);
    }
}
