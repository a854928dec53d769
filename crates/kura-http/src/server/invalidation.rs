//! The invalidation requests applications already send to Varnish, read as kura's bans and
//! tags (docs/http.md, "Invalidation as applications send it"):
//!
//! - `BAN` with FOSHttpCache's fields (Symfony, Sulu): `X-Host`, `X-Url`, `X-Content-Type`
//!   and `X-Cache-Tags`, each a regular expression on the object's host, URL, `Content-Type`
//!   and `X-Cache-Tags`, all of them to match; Drupal's `Cache-Tags` (and `Purge-Cache-Tags`)
//!   likewise on the object's field of the same name;
//! - `PURGE` with Magento's `X-Magento-Tags-Pattern` (on `X-Magento-Tags`) or `X-Pool`;
//! - varnish-modules' xkey: `PURGEKEYS` (FOSHttpCache's) with `xkey-purge` and/or
//!   `xkey-softpurge`, and `PURGE` with `xkey`, `xkey-purge` or `xkey-softpurge`: the objects
//!   tagged with any of the keys, as `POST /tags` does.
//!
//! A `PURGE` with none of these purges its URL. Who may send them is `purge.rs`'s question.

use http::{HeaderMap, HeaderName};

use crate::bans::{Expr, ExprError, Target};

/// What an invalidation request asks for.
#[derive(Debug)]
pub enum Action {
    /// Purge the request's URL (a plain `PURGE`).
    Url,
    /// Add these bans, each hard (`false`) or soft (`true`).
    Bans(Vec<(Expr, bool)>),
}

/// Why an invalidation request was refused (400).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A `BAN` with none of the fields a ban is built from.
    #[error("BAN needs at least one of X-Host, X-Url, X-Content-Type, X-Cache-Tags, Cache-Tags, Purge-Cache-Tags")]
    NothingToBan,
    /// A `PURGEKEYS` without keys.
    #[error("PURGEKEYS needs xkey-purge or xkey-softpurge with at least one key")]
    NoKeys,
    /// A field whose value is not text, or that appears twice.
    #[error("{0}: one line of visible ASCII expected")]
    Value(&'static str),
    /// A pattern kura cannot evaluate.
    #[error("{0}")]
    Pattern(#[from] ExprError),
}

/// FOSHttpCache's `BAN` fields and what each is matched against.
const BAN_FIELDS: [(&str, Field); 6] = [
    ("x-host", Field::Host),
    ("x-url", Field::Url),
    ("x-content-type", Field::Header("content-type")),
    ("x-cache-tags", Field::Header("x-cache-tags")),
    ("cache-tags", Field::Header("cache-tags")),
    ("purge-cache-tags", Field::Header("purge-cache-tags")),
];

/// Magento's `PURGE` fields.
const MAGENTO_FIELDS: [(&str, Field); 2] = [
    ("x-magento-tags-pattern", Field::Header("x-magento-tags")),
    ("x-pool", Field::Header("x-pool")),
];

#[derive(Clone, Copy)]
enum Field {
    Host,
    Url,
    Header(&'static str),
}

impl Field {
    fn target(self) -> Target {
        match self {
            Field::Host => Target::Host,
            Field::Url => Target::Url,
            Field::Header(name) => Target::Header(HeaderName::from_static(name)),
        }
    }
}

/// Whether `method` is one of the invalidation methods.
pub fn is_invalidation(method: &str) -> bool {
    matches!(method, "PURGE" | "BAN" | "PURGEKEYS")
}

/// What a `PURGE`, `BAN` or `PURGEKEYS` with `headers` asks for; `soft`: the purge's soft
/// field was sent (bans from patterns are then soft ones).
///
/// # Errors
/// See [`Refusal`].
pub fn read(method: &str, headers: &HeaderMap, soft: bool) -> Result<Action, Refusal> {
    match method {
        "BAN" => {
            let conditions = fields(headers, &BAN_FIELDS)?;
            if conditions.is_empty() {
                return Err(Refusal::NothingToBan);
            }
            Ok(Action::Bans(vec![(Expr::matching_all(&conditions)?, soft)]))
        }
        "PURGEKEYS" => {
            let bans = keys(headers, soft);
            if bans.is_empty() {
                return Err(Refusal::NoKeys);
            }
            Ok(Action::Bans(bans))
        }
        _ => {
            // Magento's VCL adds one ban for each field it was sent.
            let mut bans = Vec::new();
            for (target, pattern) in fields(headers, &MAGENTO_FIELDS)? {
                bans.push((Expr::matching_all(&[(target, pattern)])?, soft));
            }
            bans.extend(keys(headers, soft));
            if bans.is_empty() {
                return Ok(Action::Url);
            }
            Ok(Action::Bans(bans))
        }
    }
}

/// The conditions of the `fields` present in `headers`.
fn fields<'h>(
    headers: &'h HeaderMap,
    fields: &[(&'static str, Field)],
) -> Result<Vec<(Target, &'h str)>, Refusal> {
    let mut conditions = Vec::new();
    for &(name, field) in fields {
        let mut lines = headers.get_all(name).iter();
        let Some(value) = lines.next() else {
            continue;
        };
        // Varnish reads one line; two are refused rather than one of them guessed.
        if lines.next().is_some() {
            return Err(Refusal::Value(name));
        }
        let value = value.to_str().map_err(|_| Refusal::Value(name))?;
        conditions.push((field.target(), value));
    }
    Ok(conditions)
}

/// The key purges of xkey's fields: `xkey-purge` (and `xkey`, as xkey's own example reads it)
/// hard, `xkey-softpurge` soft; keys separated by spaces or commas, every line read.
fn keys(headers: &HeaderMap, soft: bool) -> Vec<(Expr, bool)> {
    let words = |name: &str| -> Vec<&str> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(|c: char| c.is_ascii_whitespace() || c == ','))
            .filter(|key| !key.is_empty())
            .collect()
    };
    let mut hard = words("xkey-purge");
    hard.extend(words("xkey"));
    let softened = words("xkey-softpurge");
    let mut bans = Vec::new();
    if !hard.is_empty() {
        bans.push((Expr::any_tag(hard), soft));
    }
    if !softened.is_empty() {
        bans.push((Expr::any_tag(softened), true));
    }
    bans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::test_support::map as headers;

    fn bans(method: &str, pairs: &[(&'static str, &'static str)]) -> Vec<(String, bool)> {
        match read(method, &headers(pairs), false).unwrap() {
            Action::Bans(bans) => bans.iter().map(|(e, s)| (e.text().into(), *s)).collect(),
            Action::Url => panic!("a URL purge"),
        }
    }

    #[test]
    fn each_convention_becomes_its_bans() {
        assert_eq!(
            bans(
                "BAN",
                &[
                    ("x-host", ".*"),
                    ("x-url", ".*"),
                    ("x-content-type", ".*"),
                    ("x-cache-tags", "(^|,)(a|b)(,|$)")
                ]
            ),
            [(
                r#"obj.host ~ ".*" && obj.url ~ ".*" && obj.http.content-type ~ ".*" && obj.http.x-cache-tags ~ "(^|,)(a|b)(,|$)""#.into(),
                false
            )]
        );
        assert_eq!(
            bans("BAN", &[("cache-tags", "node:1|node_list")]),
            [(r#"obj.http.cache-tags ~ "node:1|node_list""#.into(), false)]
        );
        assert_eq!(
            bans(
                "PURGE",
                &[
                    ("x-magento-tags-pattern", "((^|,)cat_p_1(,|$))"),
                    ("x-pool", "p1")
                ]
            ),
            [
                (
                    r#"obj.http.x-magento-tags ~ "((^|,)cat_p_1(,|$))""#.into(),
                    false
                ),
                (r#"obj.http.x-pool ~ "p1""#.into(), false)
            ]
        );
        assert_eq!(
            bans(
                "PURGEKEYS",
                &[("xkey-purge", "a b"), ("xkey-softpurge", "c,d")]
            ),
            [
                ("obj.tag in (a b)".into(), false),
                ("obj.tag in (c d)".into(), true)
            ]
        );
        assert_eq!(
            bans("PURGE", &[("xkey", "k1 k2")]),
            [("obj.tag in (k1 k2)".into(), false)]
        );
    }

    #[test]
    fn plain_purges_stay_url_purges_and_bad_requests_are_refused() {
        assert!(matches!(
            read("PURGE", &headers(&[]), false),
            Ok(Action::Url)
        ));
        assert!(matches!(
            read("BAN", &headers(&[("x-other", "a")]), false),
            Err(Refusal::NothingToBan)
        ));
        assert!(matches!(
            read("PURGEKEYS", &headers(&[("xkey-purge", " , ")]), false),
            Err(Refusal::NoKeys)
        ));
        assert!(matches!(
            read("BAN", &headers(&[("x-url", "a"), ("x-url", "b")]), false),
            Err(Refusal::Value("x-url"))
        ));
        assert!(matches!(
            read("BAN", &headers(&[("x-url", "(?<=a)b")]), false),
            Err(Refusal::Pattern(_))
        ));
        // The soft field makes pattern bans soft.
        let Ok(Action::Bans(soft)) = read("BAN", &headers(&[("cache-tags", "a")]), true) else {
            panic!("a ban");
        };
        assert!(soft[0].1);
    }
}
