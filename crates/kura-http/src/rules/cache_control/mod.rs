//! `Cache-Control` (RFC 9111 §5.2): the lexer ([`lexer`]) and the typed directives of requests
//! ([`RequestDirectives`]) and responses ([`ResponseDirectives`]).
//!
//! How bad input is read (docs/http.md has the table):
//! - unknown directives are ignored (§5.2.3);
//! - a directive repeated with the same argument counts once; repeated with different
//!   delta-seconds it is [`Seconds::Invalid`] (§4.2.1: "the first occurrence should be used or
//!   the response should be considered stale"; kura takes the most restrictive reading);
//! - a delta-seconds argument may be a token or a quoted string (§5.2: recipients accept both);
//!   anything but digits makes it invalid, a huge number is 2^31 (§1.2.2);
//! - a directive that takes no argument but is given one counts as present when that is the
//!   more restrictive reading (`no-store=1`), absent otherwise (`public=1`).

pub mod lexer;
mod request;
mod response;

use http::HeaderName;

pub use request::{MaxStale, RequestDirectives};
pub use response::ResponseDirectives;

use lexer::Argument;

/// A delta-seconds argument after all occurrences of its directive were merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Seconds {
    /// The directive is not there.
    #[default]
    Absent,
    /// The directive's value, at most 2^31.
    Value(u64),
    /// Present, but without a usable value: missing, not digits, negative, or occurrences that
    /// disagree.
    Invalid,
}

impl Seconds {
    /// Reads one occurrence's argument.
    pub(crate) fn from_argument(argument: &Argument<'_>) -> Self {
        match argument.bytes().and_then(crate::rules::delta::parse) {
            Some(value) => Seconds::Value(value),
            None => Seconds::Invalid,
        }
    }

    /// Merges a further occurrence into this one.
    pub(crate) fn merge(self, next: Seconds) -> Self {
        match (self, next) {
            (Seconds::Absent, next) => next,
            (Seconds::Value(a), Seconds::Value(b)) if a == b => Seconds::Value(a),
            (current, Seconds::Absent) => current,
            _ => Seconds::Invalid,
        }
    }

    /// The value, if there is a valid one.
    pub fn value(self) -> Option<u64> {
        match self {
            Seconds::Value(value) => Some(value),
            Seconds::Absent | Seconds::Invalid => None,
        }
    }

    /// Whether the directive appeared at all, valid or not.
    pub fn is_present(self) -> bool {
        self != Seconds::Absent
    }
}

/// The scope of `no-cache` or `private` in a response: absent, the whole response, or only the
/// listed header fields (§5.2.2.4, §5.2.2.7).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FieldScope {
    /// The directive is not there.
    #[default]
    Absent,
    /// Unqualified: the directive applies to the whole response.
    All,
    /// Qualified: the directive applies to these header fields only.
    Fields(Vec<HeaderName>),
}

impl FieldScope {
    /// Reads one occurrence's argument: none is unqualified; a token or quoted string is a
    /// list of field names. A list that is empty, malformed or holds an invalid field name is
    /// read as unqualified, the more restrictive reading.
    pub(crate) fn from_argument(argument: &Argument<'_>) -> Self {
        let Some(list) = argument.bytes() else {
            return FieldScope::All;
        };
        let mut names = Vec::new();
        for member in list.split(|&byte| byte == b',') {
            let member = member.trim_ascii();
            if member.is_empty() {
                continue;
            }
            match HeaderName::from_bytes(member) {
                Ok(name) => names.push(name),
                Err(_) => return FieldScope::All,
            }
        }
        if names.is_empty() {
            FieldScope::All
        } else {
            FieldScope::Fields(names)
        }
    }

    /// Merges a further occurrence: unqualified wins, lists are united.
    pub(crate) fn merge(self, next: FieldScope) -> Self {
        match (self, next) {
            (FieldScope::Absent, next) => next,
            (current, FieldScope::Absent) => current,
            (FieldScope::All, _) | (_, FieldScope::All) => FieldScope::All,
            (FieldScope::Fields(mut names), FieldScope::Fields(more)) => {
                // Sorted and deduplicated rather than searched, so that a response with
                // thousands of names costs n log n, not n².
                names.extend(more);
                names.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
                names.dedup();
                FieldScope::Fields(names)
            }
        }
    }

    /// Whether the directive appeared.
    pub fn is_present(&self) -> bool {
        *self != FieldScope::Absent
    }
}

/// Reads a directive that takes no argument. `restrictive` directives (`no-store`,
/// `must-revalidate`...) given an argument still count; permissive ones (`public`,
/// `must-understand`, `immutable`) given an argument do not.
pub(crate) fn flag(argument: &Argument<'_>, restrictive: bool) -> bool {
    restrictive || *argument == Argument::None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    // RFC 9111 §4.2.1: duplicates that agree count once, duplicates that disagree are invalid.
    #[test]
    fn seconds_merge() {
        use Seconds::*;
        assert_eq!(Absent.merge(Value(5)), Value(5));
        assert_eq!(Value(5).merge(Value(5)), Value(5));
        assert_eq!(Value(5).merge(Value(6)), Invalid);
        assert_eq!(Value(5).merge(Invalid), Invalid);
        assert_eq!(Invalid.merge(Value(5)), Invalid);
        assert_eq!(Value(5).merge(Absent), Value(5));
    }

    // RFC 9111 §5.2: recipients accept both token and quoted-string arguments.
    #[test]
    fn seconds_from_token_or_quoted() {
        assert_eq!(
            Seconds::from_argument(&Argument::Token(b"10")),
            Seconds::Value(10)
        );
        let quoted = Argument::Quoted(Cow::Borrowed(b"10"));
        assert_eq!(Seconds::from_argument(&quoted), Seconds::Value(10));
        assert_eq!(Seconds::from_argument(&Argument::None), Seconds::Invalid);
        assert_eq!(
            Seconds::from_argument(&Argument::Token(b"-1")),
            Seconds::Invalid
        );
        assert_eq!(
            Seconds::from_argument(&Argument::Malformed),
            Seconds::Invalid
        );
    }

    // RFC 9111 §5.2.2.4 / §5.2.2.7: the qualified forms list field names.
    #[test]
    fn field_scope_lists() {
        let quoted = Argument::Quoted(Cow::Borrowed(b" Set-Cookie ,, x-a "));
        assert_eq!(
            FieldScope::from_argument(&quoted),
            FieldScope::Fields(vec![
                HeaderName::from_static("set-cookie"),
                HeaderName::from_static("x-a")
            ])
        );
        assert_eq!(
            FieldScope::from_argument(&Argument::Token(b"set-cookie")),
            FieldScope::Fields(vec![HeaderName::from_static("set-cookie")])
        );
        assert_eq!(FieldScope::from_argument(&Argument::None), FieldScope::All);
        let empty = Argument::Quoted(Cow::Borrowed(b""));
        assert_eq!(FieldScope::from_argument(&empty), FieldScope::All);
        let bad = Argument::Quoted(Cow::Borrowed(b"a b"));
        assert_eq!(FieldScope::from_argument(&bad), FieldScope::All);
        assert_eq!(
            FieldScope::from_argument(&Argument::Malformed),
            FieldScope::All
        );
    }

    #[test]
    fn field_scope_merge() {
        let a = FieldScope::Fields(vec![HeaderName::from_static("a")]);
        let b = FieldScope::Fields(vec![HeaderName::from_static("b")]);
        assert_eq!(
            a.clone().merge(b),
            FieldScope::Fields(vec![
                HeaderName::from_static("a"),
                HeaderName::from_static("b")
            ])
        );
        assert_eq!(a.clone().merge(FieldScope::All), FieldScope::All);
        assert_eq!(FieldScope::All.merge(a.clone()), FieldScope::All);
        assert_eq!(a.clone().merge(a.clone()), a);
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            // Parsing never panics, whatever the bytes, and an unknown directive appended as
            // a new member changes nothing.
            #[test]
            fn parsing_never_panics(lines in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..64), 0..4)
            ) {
                let response = ResponseDirectives::from_lines(lines.iter().map(Vec::as_slice));
                let _ = RequestDirectives::from_lines(lines.iter().map(Vec::as_slice));
                if !lines.iter().any(|line| line.contains(&b'"')) {
                    let extended = lines.iter().map(|line| {
                        let mut line = line.clone();
                        line.extend_from_slice(b", x-unknown=1");
                        line
                    }).collect::<Vec<_>>();
                    let again = ResponseDirectives::from_lines(extended.iter().map(Vec::as_slice));
                    prop_assert_eq!(again, response);
                }
            }

            // Grammatical text built from the directive vocabulary also parses without panic.
            #[test]
            fn directive_soup(parts in proptest::collection::vec(
                prop_oneof![
                    Just("max-age"), Just("s-maxage"), Just("no-cache"), Just("private"),
                    Just("no-store"), Just("public"), Just("="), Just("\""), Just(","),
                    Just(" "), Just("\\"), Just("60"), Just("-1"), Just("99999999999999"),
                    Just("set-cookie"), Just("stale-if-error"),
                ], 0..24)
            ) {
                let line = parts.concat();
                let _ = ResponseDirectives::from_lines([line.as_bytes()]);
                let _ = RequestDirectives::from_lines([line.as_bytes()]);
            }

            // max-age=N reads as N, capped at 2^31 (§1.2.2).
            #[test]
            fn max_age_values(n in any::<u64>()) {
                let line = format!("max-age={n}");
                let parsed = ResponseDirectives::from_lines([line.as_bytes()]).max_age;
                prop_assert_eq!(parsed, Seconds::Value(n.min(1 << 31)));
            }
        }
    }
}
