//! The request directives of RFC 9111 §5.2.1 and RFC 5861's `stale-if-error`, read from every
//! `Cache-Control` line of a request. Whether the cache honours the freshness-related ones is
//! the operator's choice ([`crate::rules::ClientDirectives`]); `no-store` and
//! `only-if-cached` are always honoured.

use http::header::CACHE_CONTROL;
use http::HeaderMap;

use super::lexer::{self, Argument, Directive};
use super::{flag, Seconds};

/// `max-stale` (§5.2.1.2): how much staleness the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxStale {
    /// Not asked.
    #[default]
    Absent,
    /// `max-stale` with no value: any staleness.
    Any,
    /// `max-stale=N`.
    Limit(u64),
    /// Present but unusable (bad value, or occurrences that disagree): ignored.
    Invalid,
}

impl MaxStale {
    fn from_argument(argument: &Argument<'_>) -> Self {
        match argument {
            Argument::None => MaxStale::Any,
            other => match Seconds::from_argument(other) {
                Seconds::Value(value) => MaxStale::Limit(value),
                _ => MaxStale::Invalid,
            },
        }
    }

    fn merge(self, next: MaxStale) -> Self {
        match (self, next) {
            (MaxStale::Absent, next) => next,
            (current, MaxStale::Absent) => current,
            (a, b) if a == b => a,
            _ => MaxStale::Invalid,
        }
    }
}

/// A request's cache directives, all occurrences merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestDirectives {
    /// `max-age` (§5.2.1.1): the client prefers a response no older than this.
    pub max_age: Seconds,
    /// `max-stale` (§5.2.1.2).
    pub max_stale: MaxStale,
    /// `min-fresh` (§5.2.1.3): the response must stay fresh at least this much longer.
    pub min_fresh: Seconds,
    /// `no-cache` (§5.2.1.4): validate before serving a stored response.
    pub no_cache: bool,
    /// `no-store` (§5.2.1.5): store nothing of this request or its response.
    pub no_store: bool,
    /// `only-if-cached` (§5.2.1.7): answer from the cache or with 504.
    pub only_if_cached: bool,
    /// `stale-if-error` in a request (RFC 5861 §4).
    pub stale_if_error: Seconds,
}

impl RequestDirectives {
    /// The directives of every `Cache-Control` line of `headers`. `Pragma: no-cache` is not
    /// read: RFC 9111 §5.4 deprecates `Pragma`.
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
        if directive.is("max-age") {
            self.max_age = self.max_age.merge(Seconds::from_argument(argument));
        } else if directive.is("max-stale") {
            self.max_stale = self.max_stale.merge(MaxStale::from_argument(argument));
        } else if directive.is("min-fresh") {
            self.min_fresh = self.min_fresh.merge(Seconds::from_argument(argument));
        } else if directive.is("stale-if-error") {
            self.stale_if_error = self.stale_if_error.merge(Seconds::from_argument(argument));
        } else if directive.is("no-cache") {
            self.no_cache |= flag(argument, true);
        } else if directive.is("no-store") {
            self.no_store |= flag(argument, true);
        } else if directive.is("only-if-cached") {
            self.only_if_cached |= flag(argument, true);
        }
        // no-transform changes nothing for a cache that never transforms; others are unknown.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> RequestDirectives {
        RequestDirectives::from_lines([line.as_bytes()])
    }

    // RFC 9111 §5.2.1: every request directive.
    #[test]
    fn every_directive() {
        let d = parse("max-age=0, max-stale=30, min-fresh=5, no-cache, no-store, only-if-cached");
        assert_eq!(d.max_age, Seconds::Value(0));
        assert_eq!(d.max_stale, MaxStale::Limit(30));
        assert_eq!(d.min_fresh, Seconds::Value(5));
        assert!(d.no_cache && d.no_store && d.only_if_cached);
        assert_eq!(parse("stale-if-error=9").stale_if_error, Seconds::Value(9));
    }

    // RFC 9111 §5.2.1.2: max-stale without a value accepts any staleness.
    #[test]
    fn max_stale_forms() {
        assert_eq!(parse("max-stale").max_stale, MaxStale::Any);
        assert_eq!(parse("max-stale=\"7\"").max_stale, MaxStale::Limit(7));
        assert_eq!(parse("max-stale=x").max_stale, MaxStale::Invalid);
        assert_eq!(
            parse("max-stale=1, max-stale=2").max_stale,
            MaxStale::Invalid
        );
        assert_eq!(parse("max-stale, max-stale").max_stale, MaxStale::Any);
        assert_eq!(parse("").max_stale, MaxStale::Absent);
    }

    // Bad values: invalid, not a panic; huge ones are 2^31 (§1.2.2).
    #[test]
    fn bad_values() {
        assert_eq!(parse("max-age=-5").max_age, Seconds::Invalid);
        assert_eq!(parse("min-fresh").min_fresh, Seconds::Invalid);
        assert_eq!(parse("max-age=1e9").max_age, Seconds::Invalid);
        assert_eq!(
            parse("max-age=123456789012345").max_age,
            Seconds::Value(1 << 31)
        );
        assert!(parse("no-cache=\"x\"").no_cache);
        assert!(parse("NO-STORE=1").no_store);
    }

    #[test]
    fn unknown_directives_are_ignored() {
        assert_eq!(
            parse("foo, bar=\"max-age=1\""),
            RequestDirectives::default()
        );
    }
}
