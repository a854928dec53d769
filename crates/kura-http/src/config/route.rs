//! Backends by name and the per-URL rules that choose among them: a request is matched against
//! the rules in the file's order by host and path; the first that matches gives its backend and
//! settings (TTL, grace, pass, cookies, authorization, unkeyed fields), and a request no rule matches goes to
//! the default backend with the top-level settings.

use std::path::PathBuf;

use http::Uri;
use regex::Regex;

use crate::rules::CachePolicy;

/// Where a backend listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendAddr {
    /// `http://host:port` or `https://host:port`.
    Tcp(Uri),
    /// `unix:/path/to/socket` (HTTP/1.1 over a Unix socket).
    Unix(PathBuf),
}

/// A backend of the configuration: a pool of one server or more (`config/directors.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSpec {
    /// Its name (`default` for the top-level `backend`).
    pub name: String,
    /// Its servers, in the order given.
    pub servers: Vec<super::ServerSpec>,
    /// How a server is picked.
    pub policy: super::Policy,
    /// The random policy's seed (reproducible choices, for tests and benchmarks).
    pub seed: Option<u64>,
    /// Its own timeouts, instead of the top-level ones.
    pub timeouts: super::Timeouts,
    /// Its queue for requests that find every server full, if any.
    pub wait: Option<super::directors::Wait>,
}

/// Parses a backend address: `http://host:port` or `https://host:port` (no path), or
/// `unix:/absolute/path`.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_backend(text: &str) -> Result<BackendAddr, String> {
    let bad = |why: &str| format!("backend {text:?}: {why}");
    if let Some(path) = text.strip_prefix("unix:") {
        if !path.starts_with('/') {
            return Err(bad(
                "a Unix socket path must be absolute (unix:/run/app.sock)",
            ));
        }
        return Ok(BackendAddr::Unix(PathBuf::from(path)));
    }
    let uri: Uri = text.parse().map_err(|_| bad("not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad(
            "only http://, https:// and unix: backends are supported",
        ));
    }
    if uri.authority().is_none() {
        return Err(bad("no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad("a backend is scheme and host only, without a path"));
    }
    Ok(BackendAddr::Tcp(uri))
}

/// How a rule matches the request's host (the `Host` field or the URI's authority, without
/// port, lowercase).
#[derive(Debug, Clone)]
pub enum HostMatch {
    /// Exactly this host.
    Exact(String),
    /// `*.example.com`: any host ending in `.example.com` (not `example.com` itself).
    Suffix(String),
}

/// How a rule matches the request's path (without the query).
#[derive(Debug, Clone)]
pub enum PathMatch {
    /// The path starts with this.
    Prefix(String),
    /// The path matches this regular expression (anchor it with `^...$` to match it whole).
    Pattern(Regex),
}

/// What a matched request gets: the settings of its rule, or the top-level ones.
#[derive(Debug, Clone)]
pub struct Route {
    /// Index of the backend in [`super::Config::backends`].
    pub backend: usize,
    /// The rules' settings for this route (TTL, grace, stale-if-error overridden).
    pub policy: CachePolicy,
    /// Never looked up or stored: every request goes to the backend.
    pub pass: bool,
    /// Its responses are processed for ESI (Varnish's `beresp.do_esi`; `crate::esi`).
    pub do_esi: bool,
    /// Requests carrying `Cookie` (after [`Route::cookie_ignore`]) are passed: the default,
    /// as Varnish's built-in rule.
    pub pass_cookie: bool,
    /// Requests carrying `Authorization` are passed (the default, as Varnish); when false they
    /// are looked up, and responses are stored only as RFC 9111 §3.5 allows.
    pub pass_authorization: bool,
    /// How its URLs become cache keys (`[normalize]`, a rule's `normalize_*`).
    pub normalize: crate::keys::QueryRules,
    /// Cookies removed from every request before anything else (analytics cookies).
    pub cookie_ignore: Vec<crate::keys::query::ParamPattern>,
    /// Unkeyed request fields: removed on the lookup path, or keyed.
    pub unkeyed: super::Unkeyed,
    /// Cookies whose values key the route's responses, with kura's field for each
    /// (`server/key_cookies.rs`).
    pub key_cookies: Vec<(String, http::HeaderName)>,
    /// Header edits and a synthetic answer (`config/edits.rs`).
    pub edits: std::sync::Arc<super::Edits>,
}

/// A `[[rule]]`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Host condition, if any.
    pub host: Option<HostMatch>,
    /// Path condition, if any.
    pub path: Option<PathMatch>,
    /// Index of its route in [`super::Config::routes`].
    pub route: usize,
}

impl Rule {
    /// Whether a request for `host` (lowercase, no port) and `path` matches.
    pub fn matches(&self, host: Option<&str>, path: &str) -> bool {
        let host_ok = match (&self.host, host) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(HostMatch::Exact(want)), Some(host)) => want == host,
            (Some(HostMatch::Suffix(suffix)), Some(host)) => host.ends_with(suffix.as_str()),
        };
        host_ok
            && match &self.path {
                None => true,
                Some(PathMatch::Prefix(prefix)) => path.starts_with(prefix.as_str()),
                Some(PathMatch::Pattern(pattern)) => pattern.is_match(path),
            }
    }
}

/// The host of a request for rule matching: `Host` (else the URI's authority) without the
/// port, lowercase. `None` when there is none.
pub fn request_host<'a>(uri: &'a Uri, host_field: Option<&'a [u8]>) -> Option<String> {
    let raw = match host_field {
        Some(bytes) => std::str::from_utf8(bytes).ok()?,
        None => uri.authority()?.as_str(),
    };
    let host = match raw.strip_prefix('[') {
        // An IPv6 literal keeps its brackets; the port follows the closing one.
        Some(rest) => &raw[..rest.find(']').map_or(raw.len(), |i| i + 2)],
        None => raw.split(':').next().unwrap_or(raw),
    };
    Some(host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(host: Option<HostMatch>, path: Option<PathMatch>) -> Rule {
        Rule {
            host,
            path,
            route: 1,
        }
    }

    #[test]
    fn hosts_and_paths_match() {
        let exact = rule(Some(HostMatch::Exact("api.example.com".into())), None);
        assert!(exact.matches(Some("api.example.com"), "/x"));
        assert!(!exact.matches(Some("www.example.com"), "/x"));
        assert!(!exact.matches(None, "/x"));
        let suffix = rule(Some(HostMatch::Suffix(".example.com".into())), None);
        assert!(suffix.matches(Some("a.b.example.com"), "/"));
        assert!(!suffix.matches(Some("example.com"), "/"));
        assert!(!suffix.matches(Some("badexample.com"), "/"));
        let prefix = rule(None, Some(PathMatch::Prefix("/static/".into())));
        assert!(prefix.matches(None, "/static/a.css"));
        assert!(!prefix.matches(None, "/static"));
        let pattern = rule(
            None,
            Some(PathMatch::Pattern(Regex::new(r"\.(css|js)$").unwrap())),
        );
        assert!(pattern.matches(Some("x"), "/a/b.css"));
        assert!(!pattern.matches(Some("x"), "/a/b.css.map"));
    }

    #[test]
    fn request_hosts_lose_port_and_case() {
        let uri: Uri = "/a".parse().unwrap();
        assert_eq!(
            request_host(&uri, Some(b"API.Example.com:8080")).as_deref(),
            Some("api.example.com")
        );
        assert_eq!(
            request_host(&uri, Some(b"[::1]:80")).as_deref(),
            Some("[::1]")
        );
        let absolute: Uri = "http://Example.com:81/a".parse().unwrap();
        assert_eq!(
            request_host(&absolute, None).as_deref(),
            Some("example.com")
        );
        assert_eq!(request_host(&uri, None), None);
    }

    #[test]
    fn backend_addresses() {
        assert!(matches!(
            parse_backend("http://127.0.0.1:80"),
            Ok(BackendAddr::Tcp(_))
        ));
        assert!(matches!(
            parse_backend("https://app.internal:8443"),
            Ok(BackendAddr::Tcp(_))
        ));
        assert_eq!(
            parse_backend("unix:/run/a.sock"),
            Ok(BackendAddr::Unix("/run/a.sock".into()))
        );
        for bad in [
            "unix:run/a.sock",
            "ftp://x",
            "https://x/p",
            "http://x/p",
            "x",
            "http:///",
        ] {
            assert!(parse_backend(bad).is_err(), "{bad}");
        }
    }
}
