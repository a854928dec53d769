//! The response directives of RFC 9111 §5.2.2 and RFC 5861 read from every `Cache-Control` line
//! of a response.

use http::header::CACHE_CONTROL;
use http::HeaderMap;

use super::lexer::{self, Directive};
use super::{flag, FieldScope, Seconds};

/// A response's cache directives, all occurrences merged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseDirectives {
    /// `max-age` (§5.2.2.1).
    pub max_age: Seconds,
    /// `s-maxage` (§5.2.2.10): the shared cache's own max-age; implies `proxy-revalidate`.
    pub s_maxage: Seconds,
    /// `no-cache` (§5.2.2.4): unqualified, or only for the listed fields.
    pub no_cache: FieldScope,
    /// `private` (§5.2.2.7): unqualified, or only for the listed fields.
    pub private: FieldScope,
    /// `no-store` (§5.2.2.5).
    pub no_store: bool,
    /// `must-revalidate` (§5.2.2.2).
    pub must_revalidate: bool,
    /// `proxy-revalidate` (§5.2.2.8).
    pub proxy_revalidate: bool,
    /// `public` (§5.2.2.9).
    pub public: bool,
    /// `must-understand` (§5.2.2.3).
    pub must_understand: bool,
    /// `no-transform` (§5.2.2.6).
    pub no_transform: bool,
    /// `immutable` (RFC 8246).
    pub immutable: bool,
    /// `stale-while-revalidate` (RFC 5861 §3).
    pub stale_while_revalidate: Seconds,
    /// `stale-if-error` (RFC 5861 §4).
    pub stale_if_error: Seconds,
}

impl ResponseDirectives {
    /// The directives of every `Cache-Control` line of `headers` (lines are one list, RFC 9110
    /// §5.3). `Pragma` is not read: RFC 9111 §5.4 deprecates it and gives it no meaning in
    /// responses.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        Self::from_lines(headers.get_all(CACHE_CONTROL).iter().map(|v| v.as_bytes()))
    }

    /// The directives of these field lines.
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut directives = Self::default();
        for line in lines {
            lexer::for_each(line, &mut |directive| directives.add(&directive));
        }
        directives
    }

    fn add(&mut self, directive: &Directive<'_>) {
        let argument = &directive.argument;
        let name = directive.name;
        let is = |wanted: &str| name.eq_ignore_ascii_case(wanted.as_bytes());
        if is("max-age") {
            self.max_age = self.max_age.merge(Seconds::from_argument(argument));
        } else if is("s-maxage") {
            self.s_maxage = self.s_maxage.merge(Seconds::from_argument(argument));
        } else if is("stale-while-revalidate") {
            let seconds = Seconds::from_argument(argument);
            self.stale_while_revalidate = self.stale_while_revalidate.merge(seconds);
        } else if is("stale-if-error") {
            self.stale_if_error = self.stale_if_error.merge(Seconds::from_argument(argument));
        } else if is("no-cache") {
            let scope = FieldScope::from_argument(argument);
            self.no_cache = std::mem::take(&mut self.no_cache).merge(scope);
        } else if is("private") {
            let scope = FieldScope::from_argument(argument);
            self.private = std::mem::take(&mut self.private).merge(scope);
        } else if is("no-store") {
            self.no_store |= flag(argument, true);
        } else if is("must-revalidate") {
            self.must_revalidate |= flag(argument, true);
        } else if is("proxy-revalidate") {
            self.proxy_revalidate |= flag(argument, true);
        } else if is("no-transform") {
            self.no_transform |= flag(argument, true);
        } else if is("public") {
            self.public |= flag(argument, false);
        } else if is("must-understand") {
            self.must_understand |= flag(argument, false);
        } else if is("immutable") {
            self.immutable |= flag(argument, false);
        }
        // Anything else is an extension this cache does not know: ignored (§5.2.3).
    }

    /// Whether the response says in so many words that a shared cache must not serve it stale
    /// without validating it first: `must-revalidate` or `proxy-revalidate` (§5.2.2.2,
    /// §5.2.2.8). The `proxy-revalidate` that `s-maxage` implies (§5.2.2.10) is weighed in
    /// [`crate::rules::stale`].
    pub fn forbids_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderName;

    fn parse(lines: &[&str]) -> ResponseDirectives {
        ResponseDirectives::from_lines(lines.iter().map(|line| line.as_bytes()))
    }

    // RFC 9111 §5.2.2: each response directive and its argument.
    #[test]
    fn every_directive() {
        let d = parse(&[
            "max-age=60, s-maxage=120, no-store, must-revalidate, proxy-revalidate, public",
            "must-understand, no-transform, immutable, stale-while-revalidate=5, stale-if-error=7",
        ]);
        assert_eq!(d.max_age, Seconds::Value(60));
        assert_eq!(d.s_maxage, Seconds::Value(120));
        assert!(d.no_store && d.must_revalidate && d.proxy_revalidate && d.public);
        assert!(d.must_understand && d.no_transform && d.immutable);
        assert_eq!(d.stale_while_revalidate, Seconds::Value(5));
        assert_eq!(d.stale_if_error, Seconds::Value(7));
        assert_eq!(d.no_cache, FieldScope::Absent);
        assert_eq!(parse(&[]), ResponseDirectives::default());
    }

    // RFC 9111 §5.2: directive names are case-insensitive.
    #[test]
    fn names_are_case_insensitive() {
        let d = parse(&["MAX-AGE=5, No-Store, PRIVATE"]);
        assert_eq!(d.max_age, Seconds::Value(5));
        assert!(d.no_store);
        assert_eq!(d.private, FieldScope::All);
    }

    // RFC 9111 §5.2.2.4 and §5.2.2.7: qualified and unqualified forms.
    #[test]
    fn no_cache_and_private_forms() {
        let d = parse(&["no-cache=\"Set-Cookie\", private=x-user"]);
        assert_eq!(
            d.no_cache,
            FieldScope::Fields(vec![HeaderName::from_static("set-cookie")])
        );
        assert_eq!(
            d.private,
            FieldScope::Fields(vec![HeaderName::from_static("x-user")])
        );
        let d = parse(&["no-cache=\"a\"", "no-cache"]);
        assert_eq!(d.no_cache, FieldScope::All);
    }

    // RFC 9111 §4.2.1: disagreeing duplicates make the value invalid (read as stale).
    #[test]
    fn duplicates() {
        assert_eq!(parse(&["max-age=5, max-age=5"]).max_age, Seconds::Value(5));
        assert_eq!(parse(&["max-age=5", "max-age=6"]).max_age, Seconds::Invalid);
        assert_eq!(parse(&["max-age=5, max-age=x"]).max_age, Seconds::Invalid);
        assert!(parse(&["no-store, no-store"]).no_store);
    }

    // RFC 9111 §4.2.1: invalid freshness information (non-integer max-age) -> invalid.
    #[test]
    fn invalid_arguments() {
        for line in [
            "max-age",
            "max-age=",
            "max-age=-1",
            "max-age=1.5",
            "max-age=abc",
            "max-age=\"\"",
            "max-age = 60",
            "max-age=60 s",
        ] {
            assert_eq!(parse(&[line]).max_age, Seconds::Invalid, "{line}");
        }
        assert_eq!(parse(&["max-age=\"60\""]).max_age, Seconds::Value(60));
    }

    // RFC 9111 §1.2.2: a huge max-age is 2^31.
    #[test]
    fn huge_values() {
        let d = parse(&["max-age=99999999999999999999, s-maxage=2147483648"]);
        assert_eq!(d.max_age, Seconds::Value(1 << 31));
        assert_eq!(d.s_maxage, Seconds::Value(1 << 31));
    }

    // RFC 9111 §5.2: no argument is allowed unless defined; the restrictive reading wins.
    #[test]
    fn flags_with_arguments() {
        let d = parse(&["no-store=1, must-revalidate=x, public=1, must-understand=\"y\""]);
        assert!(d.no_store && d.must_revalidate);
        assert!(!d.public && !d.must_understand);
    }

    // RFC 9111 §5.2.3: unknown directives are ignored, and do not disturb the known ones.
    #[test]
    fn unknown_directives_are_ignored() {
        let d = parse(&["community=\"UCI\", max-age=3, foo=\"a,b\", x"]);
        assert_eq!(
            d,
            ResponseDirectives {
                max_age: Seconds::Value(3),
                ..Default::default()
            }
        );
    }

    // RFC 9111 §5.2.2.8, §5.2.2.2.
    #[test]
    fn forbids_stale() {
        assert!(parse(&["must-revalidate"]).forbids_stale());
        assert!(parse(&["proxy-revalidate"]).forbids_stale());
        assert!(!parse(&["max-age=5"]).forbids_stale());
    }
}
