//! A rule's header edits and synthetic answer, VCL's `set`/`unset` and `synth` without a
//! language:
//!
//! ```toml
//! [[rule]]
//! path_prefix = "/"
//! request_set = { "x-forwarded-proto" = "https" }   # before the lookup and the fetch
//! request_unset = ["x-debug"]
//! request_append = { "x-trace" = "kura" }
//! response_set = { "strict-transport-security" = "max-age=31536000" }   # before delivery
//! response_unset = ["x-cache-tags", "x-magento-tags", "xkey", "x-powered-by"]
//! response_append = { "vary" = "accept-language" }
//! synthetic = { status = 301, headers = { location = "https://example.com/" }, body = "" }
//! ```
//!
//! Each edit is a few header-map operations on requests of that rule only (nothing for rules
//! without edits). Fields that frame or route a message (`Host`, `Content-Length`,
//! `Transfer-Encoding`, `Connection` and the other hop-by-hop fields) cannot be edited: kura
//! writes those itself. Mistakes are refused with the line.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::Deserialize;
use toml::Spanned;

use super::file::Source;
use super::ConfigError;

/// Edits of one header map: fields removed, then set (replacing), then appended.
#[derive(Debug, Clone, Default)]
pub struct HeaderEdits {
    unset: Vec<HeaderName>,
    set: Vec<(HeaderName, HeaderValue)>,
    append: Vec<(HeaderName, HeaderValue)>,
}

impl HeaderEdits {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.unset.is_empty() && self.set.is_empty() && self.append.is_empty()
    }

    /// Applies the edits to `headers`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for name in &self.unset {
            headers.remove(name);
        }
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.append {
            headers.append(name.clone(), value.clone());
        }
    }
}

/// A rule's synthetic answer: its requests never reach the backend nor the cache.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// The status.
    pub status: StatusCode,
    /// The fields (`Content-Length` is kura's).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// What a rule does to its requests and responses.
#[derive(Debug, Clone, Default)]
pub struct Edits {
    /// Before the lookup and the fetch (after `cookie_ignore`).
    pub request: HeaderEdits,
    /// Before delivery.
    pub response: HeaderEdits,
    /// Answered by kura, if set.
    pub synthetic: Option<Synthetic>,
}

/// `synthetic` as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SyntheticFile {
    status: u16,
    headers: Option<BTreeMap<String, String>>,
    body: Option<String>,
}

/// A rule's edit keys as read.
#[derive(Debug, Default)]
pub(super) struct EditsFile<'a> {
    pub(super) request_set: Option<&'a Spanned<BTreeMap<String, String>>>,
    pub(super) request_unset: Option<&'a Spanned<Vec<String>>>,
    pub(super) request_append: Option<&'a Spanned<BTreeMap<String, String>>>,
    pub(super) response_set: Option<&'a Spanned<BTreeMap<String, String>>>,
    pub(super) response_unset: Option<&'a Spanned<Vec<String>>>,
    pub(super) response_append: Option<&'a Spanned<BTreeMap<String, String>>>,
    pub(super) synthetic: Option<&'a Spanned<SyntheticFile>>,
}

/// Fields kura writes itself.
const KURA_ONLY: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "trailer",
    "expect",
];

/// Reads a rule's edits.
pub(super) fn read(file: &EditsFile<'_>, src: Source<'_>) -> Result<Edits, ConfigError> {
    let request = header_edits(
        (file.request_unset, file.request_set, file.request_append),
        "request",
        src,
    )?;
    let response = header_edits(
        (file.response_unset, file.response_set, file.response_append),
        "response",
        src,
    )?;
    let synthetic = match file.synthetic {
        None => None,
        Some(synthetic) => Some(read_synthetic(synthetic, src)?),
    };
    Ok(Edits {
        request,
        response,
        synthetic,
    })
}

type Pairs<'a> = Option<&'a Spanned<BTreeMap<String, String>>>;

fn header_edits(
    (unset, set, append): (Option<&Spanned<Vec<String>>>, Pairs<'_>, Pairs<'_>),
    side: &str,
    src: Source<'_>,
) -> Result<HeaderEdits, ConfigError> {
    let mut edits = HeaderEdits::default();
    if let Some(names) = unset {
        let at = names.span().start;
        for name in names.get_ref() {
            edits
                .unset
                .push(field(name, &format!("{side}_unset"), at, src)?);
        }
    }
    for (pairs, key, out) in [
        (set, "set", &mut edits.set),
        (append, "append", &mut edits.append),
    ] {
        let Some(pairs) = pairs else { continue };
        let at = pairs.span().start;
        let what = format!("{side}_{key}");
        for (name, value) in pairs.get_ref() {
            let name = field(name, &what, at, src)?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| invalid(src, at, format!("{what}: {value:?} is not a field value")))?;
            out.push((name, value));
        }
    }
    Ok(edits)
}

fn field(name: &str, what: &str, at: usize, src: Source<'_>) -> Result<HeaderName, ConfigError> {
    let header = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| invalid(src, at, format!("{what}: {name:?} is not a field name")))?;
    if KURA_ONLY.contains(&header.as_str()) {
        return Err(invalid(
            src,
            at,
            format!("{what}: {name} is written by kura itself and cannot be edited"),
        ));
    }
    Ok(header)
}

fn read_synthetic(
    file: &Spanned<SyntheticFile>,
    src: Source<'_>,
) -> Result<Synthetic, ConfigError> {
    let at = file.span().start;
    let synthetic = file.get_ref();
    let status = StatusCode::from_u16(synthetic.status)
        .ok()
        .filter(|s| !s.is_informational())
        .ok_or_else(|| {
            invalid(
                src,
                at,
                format!("synthetic: status {} is not 200-599", synthetic.status),
            )
        })?;
    let mut headers = HeaderMap::new();
    for (name, value) in synthetic.headers.iter().flatten() {
        let name = field(name, "synthetic.headers", at, src)?;
        let value = HeaderValue::from_str(value).map_err(|_| {
            invalid(
                src,
                at,
                format!("synthetic.headers: {value:?} is not a field value"),
            )
        })?;
        headers.append(name, value);
    }
    Ok(Synthetic {
        status,
        headers,
        body: Bytes::from(synthetic.body.clone().unwrap_or_default()),
    })
}

fn invalid(src: Source<'_>, at: usize, why: String) -> ConfigError {
    ConfigError::Invalid(format!("{}rule: {why}", src.at(Some(at))))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BACKEND: &str = "backend = \"http://127.0.0.1:1\"\n[[rule]]\npath_prefix = \"/\"\n";

    #[test]
    fn edits_are_read_and_mistakes_name_the_line() {
        let config = Config::from_toml(&format!(
            "{BACKEND}request_set = {{ \"x-a\" = \"1\" }}\nresponse_unset = [\"x-cache-tags\"]\n\
             synthetic = {{ status = 301, headers = {{ location = \"/new\" }} }}\n"
        ))
        .unwrap();
        let edits = &config.routes[1].edits;
        assert!(!edits.request.is_empty() && !edits.response.is_empty());
        assert_eq!(edits.synthetic.as_ref().unwrap().status, 301);
        crate::config::tests::assert_refused(
            BACKEND,
            &[
                (
                    "request_set = { \"host\" = \"evil\" }\n",
                    "line 4: rule: request_set: host is written by kura",
                ),
                (
                    "response_unset = [\"bad name\"]\n",
                    "line 4: rule: response_unset: \"bad name\" is not a field name",
                ),
                (
                    "request_append = { \"x-a\" = \"a\\nb\" }\n",
                    "line 4: rule: request_append",
                ),
                (
                    "synthetic = { status = 99 }\n",
                    "line 4: rule: synthetic: status 99",
                ),
                (
                    "synthetic = { status = 200, bodyy = \"\" }\n",
                    "unknown field",
                ),
                (
                    "key_cookies = [\"a b\"]\n",
                    "line 4: rule: key_cookies: \"a b\" is not a cookie name",
                ),
            ],
        );
    }
}
