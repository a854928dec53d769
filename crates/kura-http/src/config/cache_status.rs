//! `cache_status`: this cache's name in `Cache-Status` (RFC 9211), and the members a hit and
//! a stale hit carry, made once here so that a hit only clones them.

use http::HeaderValue;
use toml::Spanned;

use super::file::Source;
use super::ConfigError;
use crate::rules::cache_control::lexer::is_tchar;

/// This cache's `Cache-Status` members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheStatus {
    /// The cache's name: an sf-token (a host name is one).
    pub name: String,
    /// `NAME; hit`.
    pub hit: HeaderValue,
    /// `NAME; hit; fwd=stale`.
    pub stale: HeaderValue,
}

impl CacheStatus {
    /// The members of a cache named `name` (a token: see [`read`]).
    pub fn named(name: &str) -> Option<CacheStatus> {
        Some(CacheStatus {
            name: name.to_owned(),
            hit: HeaderValue::try_from(format!("{name}; hit")).ok()?,
            stale: HeaderValue::try_from(format!("{name}; hit; fwd=stale")).ok()?,
        })
    }
}

/// `cache_status` as read: default `kura`; `""` turns the field off; anything that is not an
/// sf-token (RFC 9211 §2 takes a token or a string; kura takes tokens) is refused.
pub(super) fn read(
    value: Option<&Spanned<String>>,
    src: Source<'_>,
) -> Result<Option<CacheStatus>, ConfigError> {
    let Some(value) = value else {
        return Ok(CacheStatus::named("kura"));
    };
    let name = value.get_ref();
    if name.is_empty() {
        return Ok(None);
    }
    let bytes = name.as_bytes();
    let token = (bytes[0].is_ascii_alphabetic() || bytes[0] == b'*')
        && bytes.iter().all(|&b| is_tchar(b) || b == b':' || b == b'/');
    match CacheStatus::named(name) {
        Some(members) if token => Ok(Some(members)),
        _ => Err(ConfigError::Invalid(format!(
            "{}cache_status: {name:?} is not a token (a letter, then letters, digits and !#$%&'*+-.^_`|~:/)",
            src.at(Some(value.span().start))
        ))),
    }
}
