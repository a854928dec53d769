//! Bans built from parts rather than parsed from text: the invalidation requests applications
//! send (`server/invalidation.rs`) become these. Their text is shown by `GET /bans` and compared
//! to find duplicates; a [`Expr::matching_all`] ban's is what `Expr::parse` reads back.

use http::HeaderName;

use super::{compile, Cond, Expr, ExprError, Field, Op};

/// What one regular expression of a built ban is matched against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `obj.url`: path and query as stored.
    Url,
    /// `obj.host`: lower case, no port.
    Host,
    /// `obj.http.<name>`: the stored field.
    Header(HeaderName),
}

impl Target {
    fn name(&self) -> String {
        match self {
            Target::Url => "obj.url".into(),
            Target::Host => "obj.host".into(),
            Target::Header(name) => format!("obj.http.{name}"),
        }
    }
}

impl Expr {
    /// The ban matching objects where every target matches its pattern, a regular expression
    /// as Varnish's (PCRE) reads it: see [`from_pcre`].
    ///
    /// # Errors
    /// No conditions, or a pattern that is not a regular expression kura can evaluate (see
    /// [`compile`]).
    pub fn matching_all(conditions: &[(Target, &str)]) -> Result<Expr, ExprError> {
        if conditions.is_empty() {
            return Err(ExprError::Syntax("empty ban expression".into()));
        }
        let mut conds = Vec::with_capacity(conditions.len());
        let mut text = Vec::with_capacity(conditions.len());
        for (target, pattern) in conditions {
            let name = target.name();
            let value = from_pcre(pattern);
            let regex = compile(&name, &value)?;
            text.push(format!("{name} ~ {}", quote(&value)));
            let field = match target {
                Target::Url => Field::Url,
                Target::Host => Field::Host,
                Target::Header(header) => Field::Header(header.clone()),
            };
            conds.push(Cond {
                field,
                op: Op::Match,
                value,
                regex: Some(regex),
            });
        }
        Ok(Expr {
            conds,
            text: text.join(" && "),
        })
    }

    /// The ban matching objects that carry any of `tags` (one ban for a key purge of many).
    pub fn any_tag<'t>(tags: impl IntoIterator<Item = &'t str>) -> Expr {
        let mut set: Vec<String> = tags.into_iter().map(str::to_owned).collect();
        set.sort_unstable();
        set.dedup();
        let text = format!("obj.tag in ({})", set.join(" "));
        Expr {
            conds: vec![Cond {
                field: Field::AnyTag(set),
                op: Op::Eq,
                value: String::new(),
                regex: None,
            }],
            text,
        }
    }
}

/// A PCRE pattern as the `regex` crate reads it alike: `\<` and `\>` are the characters in
/// PCRE (PHP's `preg_quote` writes them) but word boundaries in the `regex` crate. Anything
/// else either means the same in both or is refused by [`compile`] (look-around,
/// back-references), never read otherwise.
pub fn from_pcre(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('<' | '>')) => out.push(e),
            Some(e) => {
                out.push('\\');
                out.push(e);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `value` as a quoted string of the expression syntax.
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;
    use crate::bans::Subject;

    fn subject<'a>(url: &'a str, headers: &'a HeaderMap, tags: &'a [HeaderName]) -> Subject<'a> {
        Subject {
            url,
            host: "shop.example",
            status: 200,
            headers,
            tag_fields: tags,
        }
    }

    #[test]
    fn built_bans_match_as_varnish_reads_their_patterns() {
        let mut headers = HeaderMap::new();
        headers.insert("x-cache-tags", HeaderValue::from_static("a<b,post-1"));
        headers.insert("content-type", HeaderValue::from_static("text/html"));
        let none = [];
        let expr = Expr::matching_all(&[
            (Target::Host, ".*"),
            (Target::Url, "^/blog/"),
            (
                Target::Header(HeaderName::from_static("content-type")),
                "html",
            ),
            (
                Target::Header(HeaderName::from_static("x-cache-tags")),
                r"(^|,)(a\<b|post\-9)(,|$)",
            ),
        ])
        .unwrap();
        assert!(expr.matches(&subject("/blog/1", &headers, &none)));
        assert!(!expr.matches(&subject("/news/1", &headers, &none)));
        // The text reads back as the same ban.
        let again = Expr::parse(expr.text()).unwrap();
        assert!(again.matches(&subject("/blog/1", &headers, &none)));
        assert!(expr
            .text()
            .contains(r#"obj.http.x-cache-tags ~ "(^|,)(a<b|post\\-9)(,|$)""#));
    }

    #[test]
    fn patterns_kura_cannot_evaluate_are_refused() {
        for bad in ["(a", r"(?=a)b", r"(a)\1", "(a{1000}){1000}"] {
            assert!(Expr::matching_all(&[(Target::Url, bad)]).is_err(), "{bad}");
        }
        assert!(Expr::matching_all(&[]).is_err());
    }

    #[test]
    fn any_tag_matches_objects_with_one_of_the_tags() {
        let tags = [HeaderName::from_static("xkey")];
        let mut headers = HeaderMap::new();
        headers.insert("xkey", HeaderValue::from_static("product-1, category-2"));
        let expr = Expr::any_tag(["product-9", "category-2", "product-9"]);
        assert_eq!(expr.text(), "obj.tag in (category-2 product-9)");
        assert!(expr.matches(&subject("/", &headers, &tags)));
        assert!(!Expr::any_tag(["product-"]).matches(&subject("/", &headers, &tags)));
        assert!(!Expr::any_tag(["product-1"]).matches(&subject("/", &headers, &[])));
    }
}
