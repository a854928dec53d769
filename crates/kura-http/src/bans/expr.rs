//! Ban expressions: conditions over a stored object's attributes joined with `&&`.
//!
//! ```text
//! obj.url ~ "^/blog/" && obj.http.content-type == "text/html"
//! ```
//!
//! Fields: `obj.url` (path and query), `obj.host` (lower case, no port), `obj.status`,
//! `obj.http.<name>` (the stored field's lines joined with ", "). Operators: `==`, `!=`, `~`
//! (regular expression, `regex` crate syntax), `!~`. Values: a double-quoted string (`\"` and
//! `\\` escapes) or a word without spaces. Fields of the request (`req.*`) are refused: the
//! lurker evaluates bans with no request at hand.

use http::{HeaderMap, HeaderName};
use regex::{Regex, RegexBuilder};

/// What a ban is evaluated against: one stored object.
pub struct Subject<'a> {
    /// Path and query.
    pub url: &'a str,
    /// Host, lower case, without port.
    pub host: &'a str,
    /// Status code.
    pub status: u16,
    /// Stored header fields.
    pub headers: &'a HeaderMap,
    /// The fields that carry tags (surrogate keys).
    pub tag_fields: &'a [HeaderName],
}

#[derive(Debug, Clone)]
enum Field {
    Url,
    Host,
    Status,
    Header(HeaderName),
    /// One of the object's tags (tag invalidation; not in the expression syntax).
    Tag,
    /// Any of these tags, sorted (a key purge; not in the expression syntax).
    AnyTag(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Match,
    NoMatch,
}

#[derive(Debug, Clone)]
struct Cond {
    field: Field,
    op: Op,
    value: String,
    regex: Option<Regex>,
}

/// A parsed ban expression.
#[derive(Debug, Clone)]
pub struct Expr {
    conds: Vec<Cond>,
    text: String,
}

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// The expression names a request field.
    #[error("{0}: bans cannot use request fields: the lurker evaluates bans against stored objects with no request at hand; use obj.url, obj.host, obj.status or obj.http.<name>")]
    RequestDependent(String),
    /// Anything else.
    #[error("{0}")]
    Syntax(String),
}

impl Expr {
    /// Parses `text`.
    ///
    /// # Errors
    /// A request field, an unknown field or operator, a missing value, a bad regular expression.
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let mut lexer = Lexer { rest: text.trim() };
        if lexer.rest.is_empty() {
            return Err(ExprError::Syntax("empty ban expression".into()));
        }
        let mut conds = Vec::new();
        loop {
            conds.push(lexer.cond()?);
            lexer.skip_space();
            if lexer.rest.is_empty() {
                break;
            }
            let Some(rest) = lexer.rest.strip_prefix("&&") else {
                return Err(ExprError::Syntax(format!(
                    "expected && or the end, found {:?}",
                    lexer.rest
                )));
            };
            lexer.rest = rest;
        }
        Ok(Expr {
            conds,
            text: text.trim().to_owned(),
        })
    }

    /// The expression matching objects tagged `tag`.
    pub fn tag(tag: &str) -> Expr {
        Expr {
            conds: vec![Cond {
                field: Field::Tag,
                op: Op::Eq,
                value: tag.to_owned(),
                regex: None,
            }],
            text: format!("obj.tag == {tag:?}"),
        }
    }

    /// The expression matching one URL's objects exactly (a soft purge).
    pub fn url(host: &str, url: &str) -> Expr {
        let cond = |field, value: &str| Cond {
            field,
            op: Op::Eq,
            value: value.to_owned(),
            regex: None,
        };
        Expr {
            conds: vec![cond(Field::Host, host), cond(Field::Url, url)],
            text: format!("obj.host == {host:?} && obj.url == {url:?}"),
        }
    }

    /// The expression as submitted (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `subject` matches every condition.
    pub fn matches(&self, subject: &Subject<'_>) -> bool {
        self.conds.iter().all(|cond| cond.matches(subject))
    }
}

impl Cond {
    fn matches(&self, s: &Subject<'_>) -> bool {
        let status;
        let joined;
        let value: Option<&str> = match &self.field {
            Field::Url => Some(s.url),
            Field::Host => Some(s.host),
            Field::Status => {
                status = s.status.to_string();
                Some(&status)
            }
            Field::Header(name) => {
                let lines: Vec<&str> = s
                    .headers
                    .get_all(name)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .collect();
                joined = lines.join(", ");
                (!lines.is_empty()).then_some(joined.as_str())
            }
            Field::Tag => return tags(s).any(|tag| tag == self.value),
            Field::AnyTag(set) => {
                return tags(s).any(|tag| set.binary_search_by(|t| t.as_str().cmp(tag)).is_ok())
            }
        };
        match (self.op, value) {
            (Op::Eq, Some(v)) => v == self.value,
            (Op::Ne, Some(v)) => v != self.value,
            (Op::Match, Some(v)) => self.regex.as_ref().is_some_and(|r| r.is_match(v)),
            (Op::NoMatch, Some(v)) => !self.regex.as_ref().is_some_and(|r| r.is_match(v)),
            // A field the object lacks equals nothing and matches no pattern.
            (Op::Eq | Op::Match, None) => false,
            (Op::Ne | Op::NoMatch, None) => true,
        }
    }
}

/// The object's tags: the words of its tag fields, separated by spaces or commas.
fn tags<'s>(s: &'s Subject<'_>) -> impl Iterator<Item = &'s str> {
    s.tag_fields.iter().flat_map(|name| {
        s.headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(|c: char| c.is_ascii_whitespace() || c == ','))
            .filter(|tag| !tag.is_empty())
    })
}

/// Compiles a ban's regular expression, bounded: a pattern whose compiled form passes
/// [`REGEX_SIZE`] is refused (the `regex` crate matches in linear time, so the size is what an
/// expression can cost).
pub(crate) fn compile(name: &str, pattern: &str) -> Result<Regex, ExprError> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE)
        .build()
        .map_err(|e| ExprError::Syntax(format!("{name}: bad regular expression {pattern:?}: {e}")))
}

/// The largest compiled regular expression a ban may hold (bytes of the `regex` crate's
/// program).
pub const REGEX_SIZE: usize = 2 << 20;

struct Lexer<'a> {
    rest: &'a str,
}

impl Lexer<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn cond(&mut self) -> Result<Cond, ExprError> {
        self.skip_space();
        let end = self
            .rest
            .find(|c: char| c.is_ascii_whitespace() || matches!(c, '=' | '!' | '~' | '"'))
            .unwrap_or(self.rest.len());
        let name = &self.rest[..end];
        self.rest = &self.rest[end..];
        if name.is_empty() {
            return Err(ExprError::Syntax(format!(
                "expected a field such as obj.url, found {:?}",
                self.rest
            )));
        }
        let field = field(name)?;
        self.skip_space();
        let op = if let Some(r) = self.rest.strip_prefix("==") {
            self.rest = r;
            Op::Eq
        } else if let Some(r) = self.rest.strip_prefix("!=") {
            self.rest = r;
            Op::Ne
        } else if let Some(r) = self.rest.strip_prefix("!~") {
            self.rest = r;
            Op::NoMatch
        } else if let Some(r) = self.rest.strip_prefix('~') {
            self.rest = r;
            Op::Match
        } else {
            return Err(ExprError::Syntax(format!(
                "{name}: expected ==, !=, ~ or !~, found {:?}",
                self.rest
            )));
        };
        self.skip_space();
        let value = self.value(name)?;
        let regex = match op {
            Op::Match | Op::NoMatch => Some(compile(name, &value)?),
            Op::Eq | Op::Ne => None,
        };
        if matches!(field, Field::Status) && (regex.is_some() || value.parse::<u16>().is_err()) {
            return Err(ExprError::Syntax(format!(
                "obj.status takes == or != and a status code, not {value:?}"
            )));
        }
        Ok(Cond {
            field,
            op,
            value,
            regex,
        })
    }

    fn value(&mut self, name: &str) -> Result<String, ExprError> {
        let Some(quoted) = self.rest.strip_prefix('"') else {
            let end = self
                .rest
                .find(|c: char| c.is_ascii_whitespace())
                .unwrap_or(self.rest.len());
            let word = &self.rest[..end];
            if word.is_empty() || word.starts_with("&&") {
                return Err(ExprError::Syntax(format!("{name}: missing value")));
            }
            self.rest = &self.rest[end..];
            return Ok(word.to_owned());
        };
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &quoted[i + 1..];
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    // Any other escape is kept as written (regular expressions use them).
                    Some((_, e)) => {
                        out.push('\\');
                        out.push(e);
                    }
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err(ExprError::Syntax(format!("{name}: unterminated string")))
    }
}

fn field(name: &str) -> Result<Field, ExprError> {
    if name == "req" || name.starts_with("req.") {
        return Err(ExprError::RequestDependent(name.to_owned()));
    }
    match name {
        "obj.url" => Ok(Field::Url),
        "obj.host" => Ok(Field::Host),
        "obj.status" => Ok(Field::Status),
        _ => {
            if let Some(header) = name.strip_prefix("obj.http.") {
                return HeaderName::from_bytes(header.as_bytes())
                    .map(Field::Header)
                    .map_err(|_| ExprError::Syntax(format!("{name}: not a header field name")));
            }
            Err(ExprError::Syntax(format!(
                "unknown field {name:?}: use obj.url, obj.host, obj.status or obj.http.<name>"
            )))
        }
    }
}

mod build;
mod persist;
pub use build::Target;

#[cfg(test)]
mod tests;
