//! Which header field controls caching: `Cache-Control` (with `Expires`), or an RFC 9213
//! targeted field such as `CDN-Cache-Control` when the operator lists it.
//!
//! RFC 9213 §2.2: the cache uses the first field of its target list that has a valid, non-empty
//! value, and then ignores `Cache-Control` and `Expires` in that response; with none, it falls
//! back to them. A targeted field is a Structured Fields Dictionary (RFC 8941/9651, parsed with
//! the `sfv` crate): lines are joined, a parse error makes the whole field invalid, keys are
//! lowercase, a repeated key keeps its last value, parameters are ignored (§2.1). Values that
//! break the directive's inferred type (a decimal `max-age`) are not consumed: a delta-seconds
//! becomes [`Seconds::Invalid`], a flag counts when that is the restrictive reading.

use http::{HeaderMap, HeaderName};
use sfv::{BareItem, Dictionary, ListEntry, Parser};

use super::cache_control::{FieldScope, ResponseDirectives, Seconds};
use super::delta::DELTA_SECONDS_MAX;
use super::surrogate::SurrogateControl;
use super::CachePolicy;

/// Where a response's directives came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlSource {
    /// `Cache-Control`, with `Expires` still in force.
    CacheControl,
    /// A targeted field of the operator's list; `Cache-Control` and `Expires` are ignored.
    Targeted(HeaderName),
}

/// The directives that govern a response in this cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseControl {
    /// The directives.
    pub directives: ResponseDirectives,
    /// The field they came from.
    pub source: ControlSource,
}

impl ResponseControl {
    /// Reads the directives that govern `headers`: the first targeted field of `targets` with a
    /// valid, non-empty value, else `Cache-Control`.
    pub fn from_headers(targets: &[HeaderName], headers: &HeaderMap) -> Self {
        for target in targets {
            if let Some(directives) = targeted(headers, target) {
                return Self {
                    directives,
                    source: ControlSource::Targeted(target.clone()),
                };
            }
        }
        Self {
            directives: ResponseDirectives::from_headers(headers),
            source: ControlSource::CacheControl,
        }
    }

    /// The directives that govern `headers` under `policy`: [`ResponseControl::from_headers`]
    /// with its targeted fields, and `Surrogate-Control` laid over them when it reads that
    /// field (`rules::surrogate`).
    pub fn of(policy: &CachePolicy, headers: &HeaderMap) -> Self {
        let mut control = Self::from_headers(&policy.targeted_fields, headers);
        if policy.surrogate_control {
            if let Some(surrogate) = SurrogateControl::from_headers(headers) {
                surrogate.apply(&mut control.directives);
            }
        }
        control
    }

    /// Whether `Expires` counts for this response (not when a targeted field governs it).
    pub fn uses_expires(&self) -> bool {
        self.source == ControlSource::CacheControl
    }
}

/// The directives of targeted field `name`, or `None` when it is absent, empty or invalid.
fn targeted(headers: &HeaderMap, name: &HeaderName) -> Option<ResponseDirectives> {
    let mut joined = Vec::new();
    for line in headers.get_all(name) {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(line.as_bytes());
    }
    if joined.trim_ascii().is_empty() {
        return None;
    }
    let dictionary: Dictionary = Parser::new(&joined).parse().ok()?;
    if dictionary.is_empty() {
        return None;
    }
    let mut directives = ResponseDirectives::default();
    for (key, entry) in &dictionary {
        let value = match entry {
            ListEntry::Item(item) => Some(&item.bare_item),
            ListEntry::InnerList(_) => None,
        };
        apply(&mut directives, key.as_str(), value);
    }
    Some(directives)
}

fn apply(directives: &mut ResponseDirectives, key: &str, value: Option<&BareItem>) {
    match key {
        "max-age" => directives.max_age = seconds(value),
        "s-maxage" => directives.s_maxage = seconds(value),
        "stale-while-revalidate" => directives.stale_while_revalidate = seconds(value),
        "stale-if-error" => directives.stale_if_error = seconds(value),
        "no-cache" => directives.no_cache = scope(value),
        "private" => directives.private = scope(value),
        "no-store" => directives.no_store = flag(value, true),
        "must-revalidate" => directives.must_revalidate = flag(value, true),
        "proxy-revalidate" => directives.proxy_revalidate = flag(value, true),
        "no-transform" => directives.no_transform = flag(value, true),
        "public" => directives.public = flag(value, false),
        "must-understand" => directives.must_understand = flag(value, false),
        "immutable" => directives.immutable = flag(value, false),
        _ => {}
    }
}

/// A delta-seconds directive: a non-negative Integer (capped at 2^31), else invalid.
fn seconds(value: Option<&BareItem>) -> Seconds {
    match value {
        Some(BareItem::Integer(integer)) => match u64::try_from(i64::from(*integer)) {
            Ok(value) => Seconds::Value(value.min(DELTA_SECONDS_MAX)),
            Err(_) => Seconds::Invalid,
        },
        _ => Seconds::Invalid,
    }
}

/// A flag: `true` counts, `?0` does not; any other value counts only if `restrictive`.
fn flag(value: Option<&BareItem>, restrictive: bool) -> bool {
    match value {
        Some(BareItem::Boolean(value)) => *value,
        _ => restrictive,
    }
}

/// `no-cache`/`private`: `true` is unqualified, a String or Token lists field names, `?0` is
/// absent, anything else is read as unqualified.
fn scope(value: Option<&BareItem>) -> FieldScope {
    use super::cache_control::lexer::Argument;
    match value {
        Some(BareItem::Boolean(false)) => FieldScope::Absent,
        Some(BareItem::String(list)) => {
            FieldScope::from_argument(&Argument::Token(list.as_str().as_bytes()))
        }
        Some(BareItem::Token(token)) => {
            FieldScope::from_argument(&Argument::Token(token.as_str().as_bytes()))
        }
        _ => FieldScope::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cdn() -> Vec<HeaderName> {
        vec![HeaderName::from_static("cdn-cache-control")]
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn control(pairs: &[(&'static str, &'static str)]) -> ResponseControl {
        ResponseControl::from_headers(&cdn(), &headers(pairs))
    }

    // RFC 9213 §2.2: a valid targeted field wins and Cache-Control/Expires are ignored.
    #[test]
    fn targeted_field_takes_precedence() {
        let c = control(&[
            ("cache-control", "no-store"),
            ("cdn-cache-control", "max-age=600, stale-if-error=60"),
        ]);
        assert_eq!(c.source, ControlSource::Targeted(cdn()[0].clone()));
        assert!(!c.uses_expires());
        assert!(!c.directives.no_store);
        assert_eq!(c.directives.max_age, Seconds::Value(600));
        assert_eq!(c.directives.stale_if_error, Seconds::Value(60));
    }

    // RFC 9213 §2.2: without the targeted field, Cache-Control applies.
    #[test]
    fn falls_back_to_cache_control() {
        let c = control(&[("cache-control", "max-age=5")]);
        assert_eq!(c.source, ControlSource::CacheControl);
        assert!(c.uses_expires());
        assert_eq!(c.directives.max_age, Seconds::Value(5));
    }

    // RFC 9213 §2.2: an invalid or empty targeted field is as if absent.
    #[test]
    fn invalid_or_empty_targeted_field_falls_back() {
        for bad in [
            "",
            "  ",
            "max-age=",
            "Max-Age=5",
            "max-age=5,,",
            "a=\"unterminated",
        ] {
            let c = control(&[("cache-control", "max-age=5"), ("cdn-cache-control", bad)]);
            assert_eq!(c.source, ControlSource::CacheControl, "{bad:?}");
        }
    }

    // RFC 9213 §3.1: a field of only unknown directives is valid and non-empty.
    #[test]
    fn unknown_only_is_still_in_force() {
        let c = control(&[("cache-control", "no-store"), ("cdn-cache-control", "none")]);
        assert!(matches!(c.source, ControlSource::Targeted(_)));
        assert_eq!(c.directives, ResponseDirectives::default());
    }

    // RFC 9213 §2.2: first field of the target list that is valid wins.
    #[test]
    fn target_list_order() {
        let targets = vec![
            HeaderName::from_static("kura-cache-control"),
            HeaderName::from_static("cdn-cache-control"),
        ];
        let h = headers(&[
            ("cdn-cache-control", "max-age=1"),
            ("kura-cache-control", "max-age=2"),
        ]);
        let c = ResponseControl::from_headers(&targets, &h);
        assert_eq!(c.directives.max_age, Seconds::Value(2));
        let h = headers(&[
            ("cdn-cache-control", "max-age=1"),
            ("kura-cache-control", "?"),
        ]);
        let c = ResponseControl::from_headers(&targets, &h);
        assert_eq!(c.directives.max_age, Seconds::Value(1));
        let none: Vec<HeaderName> = Vec::new();
        let c = ResponseControl::from_headers(&none, &h);
        assert_eq!(c.source, ControlSource::CacheControl);
    }

    // RFC 9213 §2.1: directives as Structured Field types; type violations not consumed.
    #[test]
    fn structured_values() {
        let c = control(&[(
            "cdn-cache-control",
            "max-age=1.5, s-maxage=-3, stale-while-revalidate=\"5\", no-store=?0, \
             must-revalidate, public=5, private=\"x-user, x-other\", no-cache=?0",
        )]);
        let d = c.directives;
        assert_eq!(d.max_age, Seconds::Invalid);
        assert_eq!(d.s_maxage, Seconds::Invalid);
        assert_eq!(d.stale_while_revalidate, Seconds::Invalid);
        assert!(!d.no_store && d.must_revalidate && !d.public);
        assert_eq!(
            d.private,
            FieldScope::Fields(vec![
                HeaderName::from_static("x-user"),
                HeaderName::from_static("x-other")
            ])
        );
        assert_eq!(d.no_cache, FieldScope::Absent);
        let d = control(&[(
            "cdn-cache-control",
            "no-cache, private=(a b), max-age=99999999999",
        )])
        .directives;
        assert_eq!(d.no_cache, FieldScope::All);
        assert_eq!(d.private, FieldScope::All);
        assert_eq!(d.max_age, Seconds::Value(DELTA_SECONDS_MAX));
    }

    // RFC 8941 §4.2.2: lines are joined; a repeated key keeps the last value.
    #[test]
    fn lines_join_and_last_key_wins() {
        let d = control(&[
            ("cdn-cache-control", "max-age=5"),
            ("cdn-cache-control", "max-age=9, no-store"),
        ])
        .directives;
        assert_eq!(d.max_age, Seconds::Value(9));
        assert!(d.no_store);
    }

    proptest::proptest! {
        // Any bytes in the targeted field: a decision, never a panic.
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)) {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                let mut h = HeaderMap::new();
                h.insert("cdn-cache-control", value);
                let _ = ResponseControl::from_headers(&cdn(), &h);
            }
        }
    }
}
