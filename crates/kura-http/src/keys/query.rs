//! The URL part of the cache key (seed 002's "query strings normalised so that the cache does
//! not scatter"): percent-encoding normalised (RFC 3986 §6.2.2.1-§6.2.2.2: unreserved
//! characters decoded, other escapes in upper-case hex), the default port dropped
//! (§6.2.3), query parameters removed by name or `*` pattern (tracking parameters by default)
//! and the rest sorted by name (stable: repeated names keep their order).

use std::borrow::Cow;

use http::Uri;
use regex::Regex;

/// Tracking parameters removed by default: they change nothing in a page, only in the
/// analytics that read them in the browser.
pub const DEFAULT_REMOVED: [&str; 10] = [
    "utm_*",
    "_ga",
    "_gl",
    "gclid",
    "fbclid",
    "__twitter_impression",
    "yclid",
    "msclkid",
    "mc_cid",
    "mc_eid",
];

/// A parameter name, or a pattern where `*` stands for any run of characters.
#[derive(Debug, Clone)]
pub struct ParamPattern {
    text: String,
    glob: Option<Regex>,
}

impl ParamPattern {
    /// Parses `text`: a parameter name as it appears in a URL (percent-encoded or not), with
    /// any number of `*`.
    ///
    /// # Errors
    /// Empty, or a character that cannot be part of a parameter name (`&`, `=`, `#`, `?`,
    /// white space, control or non-ASCII characters).
    pub fn parse(text: &str) -> Result<ParamPattern, String> {
        if text.is_empty() {
            return Err("an empty parameter pattern".into());
        }
        if let Some(bad) = text
            .chars()
            .find(|&c| !c.is_ascii_graphic() || matches!(c, '&' | '=' | '#' | '?'))
        {
            return Err(format!(
                "parameter pattern {text:?}: {bad:?} cannot be part of a parameter name"
            ));
        }
        let name = normalise_percent(text).into_owned();
        if !name.contains('*') {
            return Ok(ParamPattern {
                text: name,
                glob: None,
            });
        }
        let pieces: Vec<String> = name.split('*').map(regex::escape).collect();
        let glob = Regex::new(&format!("^{}$", pieces.join(".*")))
            .map_err(|e| format!("parameter pattern {text:?}: {e}"))?;
        Ok(ParamPattern {
            text: name,
            glob: Some(glob),
        })
    }

    /// Whether the (percent-normalised) parameter name `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match &self.glob {
            None => self.text == name,
            Some(glob) => glob.is_match(name),
        }
    }

    /// The pattern as given (percent-normalised).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// How a route's query strings become keys.
#[derive(Debug, Clone)]
pub struct QueryRules {
    /// Parameters left out of the key.
    pub remove: Vec<ParamPattern>,
    /// Parameters sorted by name.
    pub sort: bool,
    /// The backend gets the request's own target (true) or the key's (false: removed
    /// parameters stripped, the rest normalised and sorted).
    pub forward_removed: bool,
}

impl Default for QueryRules {
    fn default() -> Self {
        QueryRules {
            remove: DEFAULT_REMOVED
                .iter()
                .filter_map(|p| ParamPattern::parse(p).ok())
                .collect(),
            sort: true,
            forward_removed: false,
        }
    }
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn hex(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// `text` with percent-encoded unreserved characters decoded and the other escapes in upper
/// case (`%7e` -> `~`, `%2f` -> `%2F`); a `%` not followed by two hex digits is kept as it is.
pub fn normalise_percent(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| Some((hex(*bytes.get(at + 1)?)?, hex(*bytes.get(at + 2)?)?)))
            .flatten();
        match escaped {
            Some((high, low)) => {
                let byte = high << 4 | low;
                if is_unreserved(byte) {
                    out.push(char::from(byte));
                } else {
                    out.push('%');
                    out.push(char::from(bytes[at + 1].to_ascii_uppercase()));
                    out.push(char::from(bytes[at + 2].to_ascii_uppercase()));
                }
                at += 3;
            }
            None => {
                // `text` comes from a URI: ASCII, so every byte is a character.
                out.push(char::from(bytes[at]));
                at += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// The name of a query parameter (`a=1` -> `a`), percent-normalised.
pub fn param_name(param: &str) -> &str {
    param.split('=').next().unwrap_or(param)
}

/// The query string `query` as the key has it: parameters normalised, those `rules` remove
/// left out, empty ones (`a&&b`) dropped, the rest sorted by name when `rules.sort`. Empty
/// when nothing is left.
pub fn normalise_query(query: &str, rules: &QueryRules) -> String {
    let normal = normalise_percent(query);
    let mut params: Vec<&str> = normal
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let name = param_name(p);
            !rules.remove.iter().any(|r| r.matches(name))
        })
        .collect();
    if rules.sort {
        params.sort_by(|a, b| param_name(a).cmp(param_name(b)));
    }
    params.join("&")
}

/// The path and query of the key of `uri`: the path percent-normalised, the query as
/// [`normalise_query`] makes it (no `?` when it is empty).
pub fn normalise_path_and_query(uri: &Uri, rules: &QueryRules) -> String {
    let path = uri.path();
    let path = normalise_percent(if path.is_empty() { "/" } else { path });
    match uri.query().map(|q| normalise_query(q, rules)) {
        Some(query) if !query.is_empty() => format!("{path}?{query}"),
        _ => path.into_owned(),
    }
}

/// The key of the absolute URI `target` (scheme and host already lowercase): the default
/// port of its scheme dropped, path and query normalised.
pub fn key_of(target: &Uri, rules: &QueryRules) -> String {
    let scheme = target.scheme_str().unwrap_or("http");
    let authority = target.authority().map_or("", |a| a.as_str());
    key_from(scheme, authority, target, rules)
}

/// The key of `scheme`, `authority` (both lowercase) and `uri`'s path and query: the default
/// port of the scheme dropped, path and query normalised.
fn key_from(scheme: &str, authority: &str, uri: &Uri, rules: &QueryRules) -> String {
    let default_port = match scheme {
        "https" => ":443",
        _ => ":80",
    };
    let authority = authority
        .strip_suffix(default_port)
        .or_else(|| authority.strip_suffix(':'))
        .unwrap_or(authority);
    format!(
        "{scheme}://{authority}{}",
        normalise_path_and_query(uri, rules)
    )
}

/// The key of an origin-form request (`GET /path` with `Host: host`) whose connection has
/// `scheme`: the same bytes as [`key_of`] of the absolute URI
/// [`crate::rules::invalidation::target_uri`] makes, without making it (on a hit that URI's
/// formatting, parsing and lowercasing were a tenth of the request's instructions). `None` when
/// the request is not that simple case: an absolute-form target, one that is not a path, or a
/// host that is not a whole authority by itself; the caller then takes the long way, whose
/// answer for those is the reference.
pub fn key_of_origin_form(
    scheme: &str,
    host: &str,
    uri: &Uri,
    rules: &QueryRules,
) -> Option<String> {
    const URI_MAX: usize = u16::MAX as usize - 1; // the longest URI `http` parses
    let path_and_query = uri.path_and_query()?.as_str();
    let host = host.trim();
    if uri.scheme().is_some()
        || !path_and_query.starts_with('/')
        || scheme.len() + 3 + host.len() + path_and_query.len() > URI_MAX
    {
        return None;
    }
    // The long way's URI parser reads the same authority, and only it, when the host alone
    // parses as one: an authority ends at the first `/`, `?` or `#`, which one that parses
    // whole does not hold.
    host.parse::<http::uri::Authority>().ok()?;
    Some(key_from(
        &scheme.to_ascii_lowercase(),
        &host.to_ascii_lowercase(),
        uri,
        rules,
    ))
}

/// `uri` with the key's path and query (for the backend when removed parameters are
/// stripped), or `None` when that is what it has already.
pub fn stripped(uri: &Uri, rules: &QueryRules) -> Option<Uri> {
    let path_and_query = normalise_path_and_query(uri, rules);
    if uri.path_and_query().map(|p| p.as_str()) == Some(path_and_query.as_str()) {
        return None;
    }
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    Uri::from_parts(parts).ok()
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
