//! A ban expression as one line of JSON and back, for the disk tier's ban journal
//! (`bans/journal.rs`): its text and each condition's field, operator and value, so that the
//! expressions built from parts (tags, key purges, soft purges of a URL), which have no syntax
//! `Expr::parse` reads, come back exactly as they were.

use http::HeaderName;
use serde_json::{json, Value};

use super::{compile, Cond, Expr, Field, Op};

impl Expr {
    /// The expression as JSON: `[text, [[field, argument, op, value], ...]]`.
    pub fn to_json(&self) -> Value {
        let conds: Vec<Value> = self
            .conds
            .iter()
            .map(|c| {
                let (field, arg) = match &c.field {
                    Field::Url => ("url", String::new()),
                    Field::Host => ("host", String::new()),
                    Field::Status => ("status", String::new()),
                    Field::Header(name) => ("header", name.as_str().to_owned()),
                    Field::Tag => ("tag", String::new()),
                    // Tags hold no spaces: they are the words of their fields.
                    Field::AnyTag(set) => ("any_tag", set.join(" ")),
                };
                let op = match c.op {
                    Op::Eq => "==",
                    Op::Ne => "!=",
                    Op::Match => "~",
                    Op::NoMatch => "!~",
                };
                json!([field, arg, op, c.value])
            })
            .collect();
        json!([self.text, conds])
    }

    /// The expression [`Expr::to_json`] wrote (`None`: not such JSON, or a regular expression
    /// that no longer compiles).
    pub fn from_json(value: &Value) -> Option<Expr> {
        let [text, conds] = value.as_array()?.as_slice() else {
            return None;
        };
        let mut out = Vec::new();
        for cond in conds.as_array()? {
            let [field, arg, op, value] = cond.as_array()?.as_slice() else {
                return None;
            };
            let (arg, value) = (arg.as_str()?, value.as_str()?.to_owned());
            let field = match field.as_str()? {
                "url" => Field::Url,
                "host" => Field::Host,
                "status" => Field::Status,
                "header" => Field::Header(HeaderName::from_bytes(arg.as_bytes()).ok()?),
                "tag" => Field::Tag,
                "any_tag" => Field::AnyTag(arg.split(' ').map(str::to_owned).collect()),
                _ => return None,
            };
            let op = match op.as_str()? {
                "==" => Op::Eq,
                "!=" => Op::Ne,
                "~" => Op::Match,
                "!~" => Op::NoMatch,
                _ => return None,
            };
            let regex = match op {
                Op::Match | Op::NoMatch => Some(compile("ban", &value).ok()?),
                Op::Eq | Op::Ne => None,
            };
            out.push(Cond {
                field,
                op,
                value,
                regex,
            });
        }
        Some(Expr {
            conds: out,
            text: text.as_str()?.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;
    use crate::bans::expr::Target;
    use crate::bans::Subject;

    #[test]
    fn every_kind_of_expression_comes_back_matching_the_same() {
        let tag_fields = [HeaderName::from_static("xkey")];
        let mut headers = HeaderMap::new();
        headers.insert("xkey", HeaderValue::from_static("a b"));
        headers.insert("content-type", HeaderValue::from_static("text/html"));
        let on = |url| Subject {
            url,
            host: "example.com",
            status: 200,
            headers: &headers,
            tag_fields: &tag_fields,
        };
        let exprs = [
            Expr::parse(r#"obj.url ~ "^/blog/" && obj.http.content-type == "text/html""#).unwrap(),
            Expr::parse("obj.status != 404 && obj.url !~ x").unwrap(),
            Expr::tag("b"),
            Expr::any_tag(["z", "a"]),
            Expr::url("example.com", "/blog/1"),
            Expr::matching_all(&[(Target::Host, "^example")]).unwrap(),
        ];
        for expr in exprs {
            let line = expr.to_json().to_string();
            let back = Expr::from_json(&serde_json::from_str(&line).unwrap()).unwrap();
            assert_eq!(back.text(), expr.text());
            for url in ["/blog/1", "/other"] {
                assert_eq!(
                    back.matches(&on(url)),
                    expr.matches(&on(url)),
                    "{line} {url}"
                );
            }
        }
        assert!(Expr::from_json(&json!(["x", [["nope", "", "==", "1"]]])).is_none());
        assert!(Expr::from_json(&json!(["x", [["url", "", "~", "("]]])).is_none());
    }
}
