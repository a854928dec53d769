//! `Surrogate-Control` (W3C Edge Architecture 1.0), read as Fastly and Akamai read it: the
//! origin's directives for surrogates (reverse proxies acting for it), beside `Cache-Control`
//! for browsers and shared caches further down.
//!
//! - `max-age=N` (`N+M` too: the `+M` is read as nothing) is this cache's lifetime for the
//!   response: it replaces `Cache-Control`'s `s-maxage` and `max-age` and `Expires`.
//! - `no-store`: not stored. (`no-store-remote` is for surrogates away from the origin, a
//!   CDN; kura stands at the origin's side, so it stores.)
//! - `stale-while-revalidate=N`, `stale-if-error=N`: as in `Cache-Control` (RFC 5861),
//!   replacing them.
//! - `content="ESI/1.0"`: the backend asks for ESI processing; kura does not process ESI and
//!   counts such responses (`esi_requested`), so a site moving from a CDN sees them.
//!
//! The rest of `Cache-Control` stays in force: `private`, `no-cache` and `no-store` there are
//! never overridden, so a surrogate's lifetime never shares what the origin marked personal.
//! The proxy removes the field from every response it sends (as Fastly does): it is for
//! surrogates only.

use http::{HeaderMap, HeaderName};

use super::cache_control::lexer::{for_each, Argument};
use super::cache_control::{ResponseDirectives, Seconds};
use super::delta;

/// The field's name.
pub const SURROGATE_CONTROL: HeaderName = HeaderName::from_static("surrogate-control");

/// The directives of a response's `Surrogate-Control`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SurrogateControl {
    /// `max-age`'s freshness part.
    pub max_age: Option<u64>,
    /// `no-store`.
    pub no_store: bool,
    /// `stale-while-revalidate`.
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error`.
    pub stale_if_error: Option<u64>,
    /// `content` names ESI (any `ESI/` capability).
    pub esi: bool,
}

impl SurrogateControl {
    /// The directives of every `Surrogate-Control` line of `headers`, or `None` without one.
    /// A directive whose value is not usable is ignored (the `Cache-Control` reading stands).
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let mut lines = headers.get_all(SURROGATE_CONTROL).iter().peekable();
        lines.peek()?;
        let mut control = SurrogateControl::default();
        for line in lines {
            for_each(line.as_bytes(), &mut |directive| {
                let seconds = || match &directive.argument {
                    Argument::Token(token) => {
                        // `max-age=freshness+revalidation`: the freshness part.
                        let freshness = token.split(|&b| b == b'+').next().unwrap_or(token);
                        delta::parse(freshness)
                    }
                    _ => directive.argument.bytes().and_then(delta::parse),
                };
                if directive.is("max-age") {
                    control.max_age = seconds().or(control.max_age);
                } else if directive.is("no-store") {
                    control.no_store = true;
                } else if directive.is("stale-while-revalidate") {
                    control.stale_while_revalidate = seconds().or(control.stale_while_revalidate);
                } else if directive.is("stale-if-error") {
                    control.stale_if_error = seconds().or(control.stale_if_error);
                } else if directive.is("content") {
                    let names = directive.argument.bytes().unwrap_or_default();
                    control.esi |= names
                        .split(|b| b.is_ascii_whitespace())
                        .any(|name| name.len() >= 4 && name[..4].eq_ignore_ascii_case(b"ESI/"));
                }
            });
        }
        Some(control)
    }

    /// Lays these directives over `directives` (from `Cache-Control` or a targeted field).
    pub fn apply(&self, directives: &mut ResponseDirectives) {
        if let Some(max_age) = self.max_age {
            directives.max_age = Seconds::Value(max_age);
            directives.s_maxage = Seconds::Absent;
        }
        directives.no_store |= self.no_store;
        if let Some(swr) = self.stale_while_revalidate {
            directives.stale_while_revalidate = Seconds::Value(swr);
        }
        if let Some(sie) = self.stale_if_error {
            directives.stale_if_error = Seconds::Value(sie);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::cache_control::FieldScope;
    use crate::rules::test_support::map;

    fn read(value: &'static str) -> SurrogateControl {
        SurrogateControl::from_headers(&map(&[("surrogate-control", value)])).unwrap()
    }

    #[test]
    fn directives_as_fastly_and_akamai_read_them() {
        assert_eq!(SurrogateControl::from_headers(&map(&[])), None);
        let c = read(r#"max-age=3600, content="ESI/1.0", stale-if-error=86400"#);
        assert_eq!(
            (c.max_age, c.esi, c.stale_if_error, c.no_store),
            (Some(3600), true, Some(86400), false)
        );
        assert_eq!(read("max-age=60+30").max_age, Some(60));
        assert!(read("no-store").no_store);
        assert!(!read("no-store-remote").no_store);
        assert_eq!(read("max-age=abc").max_age, None);
        assert!(!read(r#"content="ESI-Inline/1.0""#).esi);
        assert!(read(r#"content="ESI-Inline/1.0 ESI/1.0""#).esi);
    }

    #[test]
    fn the_lifetime_replaces_cache_controls_but_privacy_stays() {
        let mut directives = ResponseDirectives::from_headers(&map(&[(
            "cache-control",
            "private, s-maxage=5, max-age=0",
        )]));
        read("max-age=600, stale-while-revalidate=30").apply(&mut directives);
        assert_eq!(directives.max_age, Seconds::Value(600));
        assert_eq!(directives.s_maxage, Seconds::Absent);
        assert_eq!(directives.stale_while_revalidate, Seconds::Value(30));
        assert_eq!(directives.private, FieldScope::All);
        let mut directives = ResponseDirectives::default();
        read("no-store").apply(&mut directives);
        assert!(directives.no_store);
    }
}
