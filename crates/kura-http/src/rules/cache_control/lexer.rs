//! The syntax of a `Cache-Control` field line (RFC 9111 §5.2): a comma-separated list of
//! `token [ "=" ( token / quoted-string ) ]`. The lexer never fails: a member that does not fit
//! the grammar yields its name with a [`Argument::Malformed`] argument (so the directive's
//! meaning can decide what a malformed use means), or nothing when it has no name at all.
//! Directive names are compared without regard to case.

use std::borrow::Cow;

/// The argument of one directive, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Argument<'a> {
    /// `name` alone.
    None,
    /// `name=token`.
    Token(&'a [u8]),
    /// `name="quoted string"`, with its quoted-pairs resolved.
    Quoted(Cow<'a, [u8]>),
    /// `name=` followed by nothing usable, an unterminated quoted string, or stray bytes after
    /// the member (`max-age=60 junk`, `max-age = 60`).
    Malformed,
}

impl Argument<'_> {
    /// The argument's bytes for a token or quoted string.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Argument::Token(token) => Some(token),
            Argument::Quoted(quoted) => Some(quoted),
            Argument::None | Argument::Malformed => None,
        }
    }
}

/// One directive of a field line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive<'a> {
    /// The name as written (compare with [`Directive::is`]).
    pub name: &'a [u8],
    /// The argument.
    pub argument: Argument<'a>,
}

impl Directive<'_> {
    /// Whether this directive is `name` (ASCII case-insensitive).
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name.as_bytes())
    }
}

/// tchar of RFC 9110 §5.6.2.
pub fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn is_ows(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

/// Calls `each` for every directive of one field line, in order.
pub fn for_each<'a>(line: &'a [u8], each: &mut impl FnMut(Directive<'a>)) {
    let mut at = 0;
    loop {
        while at < line.len() && (is_ows(line[at]) || line[at] == b',') {
            at += 1;
        }
        if at >= line.len() {
            return;
        }
        let start = at;
        while at < line.len() && is_tchar(line[at]) {
            at += 1;
        }
        let name = &line[start..at];
        if name.is_empty() {
            // A member with no name (`=5`, `"x"`, `@`) is nobody's directive.
            at = member_end(line, at);
            continue;
        }
        let mut argument = Argument::None;
        if line.get(at) == Some(&b'=') {
            at += 1;
            if line.get(at) == Some(&b'"') {
                match quoted_string(line, at) {
                    Some((value, end)) => {
                        argument = Argument::Quoted(value);
                        at = end;
                    }
                    None => {
                        argument = Argument::Malformed;
                        at = line.len();
                    }
                }
            } else {
                let value_start = at;
                while at < line.len() && is_tchar(line[at]) {
                    at += 1;
                }
                argument = if value_start == at {
                    Argument::Malformed
                } else {
                    Argument::Token(&line[value_start..at])
                };
            }
        }
        while at < line.len() && is_ows(line[at]) {
            at += 1;
        }
        if at < line.len() && line[at] != b',' {
            argument = Argument::Malformed;
            at = member_end(line, at);
        }
        each(Directive { name, argument });
    }
}

/// The index of the comma that ends the member containing `at` (or the line's end), skipping
/// commas inside quoted strings.
fn member_end(line: &[u8], mut at: usize) -> usize {
    let mut quoted = false;
    while at < line.len() {
        match line[at] {
            b'\\' if quoted => at += 1,
            b'"' => quoted = !quoted,
            b',' if !quoted => return at,
            _ => {}
        }
        at += 1;
    }
    line.len()
}

/// Parses the quoted string starting at `line[open] == '"'`: its value and the index after the
/// closing quote, or `None` when it is not closed.
fn quoted_string(line: &[u8], open: usize) -> Option<(Cow<'_, [u8]>, usize)> {
    let body = open + 1;
    let mut at = body;
    let mut unescaped: Option<Vec<u8>> = None;
    while at < line.len() {
        match line[at] {
            b'"' => {
                let value = match unescaped {
                    Some(owned) => Cow::Owned(owned),
                    None => Cow::Borrowed(&line[body..at]),
                };
                return Some((value, at + 1));
            }
            b'\\' => {
                let escaped = *line.get(at + 1)?;
                unescaped
                    .get_or_insert_with(|| line[body..at].to_vec())
                    .push(escaped);
                at += 2;
            }
            byte => {
                if let Some(owned) = unescaped.as_mut() {
                    owned.push(byte);
                }
                at += 1;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(line: &str) -> Vec<(String, Argument<'static>)> {
        let line: &'static [u8] = Box::leak(line.as_bytes().to_vec().into_boxed_slice());
        let mut out = Vec::new();
        for_each(line, &mut |d| {
            out.push((String::from_utf8_lossy(d.name).into_owned(), d.argument))
        });
        out
    }

    fn quoted(s: &str) -> Argument<'static> {
        Argument::Quoted(Cow::Owned(s.as_bytes().to_vec()))
    }

    // RFC 9111 §5.2: cache-directive = token [ "=" ( token / quoted-string ) ].
    #[test]
    fn names_tokens_and_quoted_strings() {
        assert_eq!(
            lex("max-age=60, no-cache=\"set-cookie, x-a\",public"),
            vec![
                ("max-age".into(), Argument::Token(b"60")),
                ("no-cache".into(), quoted("set-cookie, x-a")),
                ("public".into(), Argument::None),
            ]
        );
    }

    // RFC 9110 §5.6.1: empty list members and optional white space are allowed.
    #[test]
    fn empty_members_and_white_space() {
        assert_eq!(
            lex(" , ,\tno-store ,, max-age=5\t"),
            vec![
                ("no-store".into(), Argument::None),
                ("max-age".into(), Argument::Token(b"5")),
            ]
        );
        assert!(lex("").is_empty());
        assert!(lex(" ,, ").is_empty());
    }

    // RFC 9110 §5.6.4: quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ).
    #[test]
    fn quoted_pairs_are_resolved() {
        assert_eq!(
            lex(r#"x="a\"b\\c", y=1"#),
            vec![
                ("x".into(), quoted(r#"a"b\c"#)),
                ("y".into(), Argument::Token(b"1")),
            ]
        );
    }

    // Members that do not fit the grammar keep their name with a malformed argument.
    #[test]
    fn malformed_members() {
        assert_eq!(
            lex("max-age=, s-maxage=60 junk, max-age = 5, public"),
            vec![
                ("max-age".into(), Argument::Malformed),
                ("s-maxage".into(), Argument::Malformed),
                ("max-age".into(), Argument::Malformed),
                ("public".into(), Argument::None),
            ]
        );
        assert_eq!(
            lex(r#"no-cache="a"b, max-age=1"#),
            vec![
                ("no-cache".into(), Argument::Malformed),
                ("max-age".into(), Argument::Token(b"1")),
            ]
        );
    }

    // An unterminated quoted string swallows the rest of the line.
    #[test]
    fn unterminated_quoted_string() {
        assert_eq!(
            lex(r#"no-cache="set-cookie, max-age=60"#),
            vec![("no-cache".into(), Argument::Malformed)]
        );
        assert_eq!(lex(r#"x="\"#), vec![("x".into(), Argument::Malformed)]);
    }

    // Members without a name belong to no directive; commas in their quotes do not split them.
    #[test]
    fn nameless_members_are_skipped() {
        assert_eq!(
            lex(r#"=5, "a, b", @x, max-age=3"#),
            vec![("max-age".into(), Argument::Token(b"3"))]
        );
    }

    #[test]
    fn names_compare_without_case() {
        let mut seen = false;
        for_each(b"Max-AGE=1", &mut |d| seen = d.is("max-age"));
        assert!(seen);
    }
}
