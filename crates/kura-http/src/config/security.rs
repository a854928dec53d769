//! The settings that keep one client's page from another, at the top level and in each
//! `[[rule]]` (a rule starts from the top level's): `cookie`, `authorization`,
//! `cookie_ignore`, `heuristic_with_credentials`, `strip_unkeyed`, `key_headers`,
//! `key_headers_always`, `key_device_class` and `key_cookies`.
//! docs/http.md's *Security* section says what each default protects.

use http::HeaderName;
use toml::Spanned;

use super::file::Source;
use super::{ConfigError, Route};
use crate::keys::query::ParamPattern;

/// Request fields removed on the lookup path by default: each changes what many applications
/// send (links, redirects, the page itself, the method) without being part of the key.
pub const DEFAULT_STRIP_UNKEYED: [&str; 8] = [
    "x-forwarded-host",
    "x-host",
    "x-forwarded-server",
    "x-original-url",
    "x-rewrite-url",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// Request fields that vary the stored response when a request carries them: load balancers
/// set them legitimately (removing them would make an application that trusts them redirect
/// forever), so they key the response instead.
pub const DEFAULT_KEY_HEADERS: [&str; 2] = ["x-forwarded-proto", "x-forwarded-scheme"];

/// Unkeyed request fields: removed, or made part of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unkeyed {
    /// Removed from requests that are looked up.
    pub strip: Vec<HeaderName>,
    /// Added to the stored response's `Vary` when the request that fetched it carried any.
    pub key: Vec<HeaderName>,
    /// Added to every stored response's `Vary`, whatever the request carried
    /// (`key_headers_always`: a field whose absence is a variant too, such as
    /// `Accept-Language`).
    pub always: Vec<HeaderName>,
    /// Whether every stored response varies on the device class (`key_device_class`: the
    /// `[device]` header), whatever the backend's `Vary` says.
    pub device_class: bool,
}

impl Default for Unkeyed {
    fn default() -> Self {
        let names =
            |list: &[&'static str]| list.iter().map(|n| HeaderName::from_static(n)).collect();
        Unkeyed {
            strip: names(&DEFAULT_STRIP_UNKEYED),
            key: names(&DEFAULT_KEY_HEADERS),
            always: Vec::new(),
            device_class: false,
        }
    }
}

/// The keys of this module as read from the top level or a rule.
pub(super) struct SafetyFile<'a> {
    pub(super) cookie: Option<&'a Spanned<String>>,
    pub(super) authorization: Option<&'a Spanned<String>>,
    pub(super) cookie_ignore: Option<&'a Vec<Spanned<String>>>,
    pub(super) heuristic_with_credentials: Option<bool>,
    pub(super) strip_unkeyed: Option<&'a Vec<Spanned<String>>>,
    pub(super) key_headers: Option<&'a Vec<Spanned<String>>>,
    pub(super) key_headers_always: Option<&'a Vec<Spanned<String>>>,
    pub(super) key_device_class: Option<bool>,
    pub(super) key_cookies: Option<&'a Vec<Spanned<String>>>,
}

/// Applies `file`'s keys to `route`.
pub(super) fn apply(
    route: &mut Route,
    file: &SafetyFile<'_>,
    prefix: &str,
    src: Source<'_>,
) -> Result<(), ConfigError> {
    if let Some(value) = file.cookie {
        route.pass_cookie = pass_or_lookup(value, &format!("{prefix}cookie"), src)?;
    }
    if let Some(value) = file.authorization {
        route.pass_authorization = pass_or_lookup(value, &format!("{prefix}authorization"), src)?;
    }
    if let Some(list) = file.cookie_ignore {
        route.cookie_ignore = list
            .iter()
            .map(|p| {
                ParamPattern::parse(p.get_ref()).map_err(|e| {
                    ConfigError::Invalid(format!(
                        "{}{prefix}cookie_ignore: {e}",
                        src.at(Some(p.span().start))
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
    }
    if let Some(on) = file.heuristic_with_credentials {
        route.policy.heuristic_with_credentials = on;
    }
    if let Some(list) = file.strip_unkeyed {
        route.unkeyed.strip = names(list, &format!("{prefix}strip_unkeyed"), src)?;
    }
    if let Some(list) = file.key_headers {
        route.unkeyed.key = names(list, &format!("{prefix}key_headers"), src)?;
    }
    if let Some(list) = file.key_headers_always {
        route.unkeyed.always = names(list, &format!("{prefix}key_headers_always"), src)?;
    }
    if let Some(on) = file.key_device_class {
        route.unkeyed.device_class = on;
    }
    if let Some(list) = file.key_cookies {
        let mut cookies = Vec::new();
        for name in list {
            let text = name.get_ref();
            let field = format!("kura-key-cookie-{}", text.to_ascii_lowercase());
            let token = !text.is_empty()
                && text
                    .bytes()
                    .all(crate::rules::cache_control::lexer::is_tchar);
            match HeaderName::from_bytes(field.as_bytes()) {
                Ok(field) if token => cookies.push((text.clone(), field)),
                _ => {
                    return Err(ConfigError::Invalid(format!(
                        "{}{prefix}key_cookies: {text:?} is not a cookie name",
                        src.at(Some(name.span().start))
                    )))
                }
            }
        }
        route.key_cookies = cookies;
    }
    Ok(())
}

/// A value of a closed set: `pass` or `lookup`, true for `pass`.
fn pass_or_lookup(
    value: &Spanned<String>,
    name: &str,
    src: Source<'_>,
) -> Result<bool, ConfigError> {
    match value.get_ref().as_str() {
        "pass" => Ok(true),
        "lookup" => Ok(false),
        other => Err(ConfigError::Invalid(format!(
            "{}{name}: {other:?} is not pass or lookup",
            src.at(Some(value.span().start))
        ))),
    }
}

fn names(
    list: &[Spanned<String>],
    what: &str,
    src: Source<'_>,
) -> Result<Vec<HeaderName>, ConfigError> {
    list.iter()
        .map(|name| {
            HeaderName::from_bytes(name.get_ref().as_bytes()).map_err(|_| {
                ConfigError::Invalid(format!(
                    "{}{what}: {:?} is not a header field name",
                    src.at(Some(name.span().start)),
                    name.get_ref()
                ))
            })
        })
        .collect()
}
