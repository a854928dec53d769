//! The parts of the file checked after parsing: the backends by name and the `[[rule]]`s,
//! each error naming the line of the value it is about.

use std::collections::BTreeMap;
use std::time::Duration;

use regex::Regex;
use toml::Spanned;

use super::file::{RuleFile, Source};
use super::{parse_backend, BackendSpec, ConfigError, HostMatch, HttpArgs, PathMatch, Route, Rule};

/// The backends: the default first (`--backend`, else `backend`, else `[backends].default`),
/// then the others of `[backends]` by name. Each is a URL or a pool (`directors.rs`).
pub(super) fn backends(
    args: &HttpArgs,
    top: Option<Spanned<String>>,
    named: Option<BTreeMap<String, Spanned<toml::Value>>>,
    src: Source<'_>,
) -> Result<Vec<BackendSpec>, ConfigError> {
    let mut named = named.unwrap_or_default();
    let url = |name: &str, text: &str, at: Option<usize>| {
        let value = toml::Value::String(text.to_owned());
        match at {
            Some(at) => super::directors::pool(name, value, at, src),
            None => parse_backend(text)
                .map(super::directors::pool_of)
                .map_err(ConfigError::Invalid),
        }
    };
    let default = match (&args.backend, top) {
        (Some(text), _) => url("default", text, None)?,
        (None, Some(text)) => {
            if let Some(twice) = named.get("default") {
                return Err(ConfigError::Invalid(format!(
                    "{}a backend named \"default\" beside the top-level backend",
                    src.at(Some(twice.span().start))
                )));
            }
            url("default", text.get_ref(), Some(text.span().start))?
        }
        (None, None) => match named.remove("default") {
            Some(value) => {
                let at = value.span().start;
                super::directors::pool("default", value.into_inner(), at, src)?
            }
            None => {
                return Err(ConfigError::Invalid(
                    "no backend: give --backend URL, `backend = URL` or a backend named \"default\" in [backends]".into(),
                ))
            }
        },
    };
    named.remove("default");
    let mut out = vec![spec("default".into(), default)];
    for (name, value) in named {
        let at = value.span().start;
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if !name.chars().all(plain) {
            return Err(ConfigError::Invalid(format!(
                "{}backend name {name:?}: letters, digits, _ and - only",
                src.at(Some(at))
            )));
        }
        let pool = super::directors::pool(&name, value.into_inner(), at, src)?;
        out.push(spec(name, pool));
    }
    Ok(out)
}

fn spec(name: String, pool: super::directors::Pool) -> BackendSpec {
    BackendSpec {
        name,
        servers: pool.servers,
        policy: pool.policy,
        seed: pool.seed,
        timeouts: pool.timeouts,
        wait: pool.wait,
    }
}

pub(super) fn parse_rule(
    rule: Spanned<RuleFile>,
    backends: &[BackendSpec],
    routes: &mut Vec<Route>,
    src: Source<'_>,
) -> Result<Rule, ConfigError> {
    let rule = rule.into_inner();
    let bad =
        |at: usize, why: String| ConfigError::Invalid(format!("{}rule: {why}", src.at(Some(at))));
    let host = match &rule.host {
        None => None,
        Some(host) => {
            let text = host.get_ref().to_ascii_lowercase();
            let at = host.span().start;
            match text.strip_prefix('*') {
                Some(suffix) if suffix.starts_with('.') && !suffix[1..].contains('*') => {
                    Some(HostMatch::Suffix(suffix.to_owned()))
                }
                _ if text.is_empty() || text.contains('*') || text.contains(['/', ':']) => {
                    return Err(bad(
                        at,
                        format!("host {text:?} is not a host name or *.domain"),
                    ))
                }
                _ => Some(HostMatch::Exact(text)),
            }
        }
    };
    let path = match (&rule.path_prefix, &rule.path) {
        (Some(_), Some(pattern)) => {
            return Err(bad(
                pattern.span().start,
                "give path_prefix or path, not both".into(),
            ))
        }
        (Some(prefix), None) => {
            if !prefix.get_ref().starts_with('/') {
                return Err(bad(
                    prefix.span().start,
                    format!("path_prefix {:?} must start with /", prefix.get_ref()),
                ));
            }
            Some(PathMatch::Prefix(prefix.get_ref().clone()))
        }
        (None, Some(pattern)) => match Regex::new(pattern.get_ref()) {
            Ok(regex) => Some(PathMatch::Pattern(regex)),
            Err(error) => {
                return Err(bad(
                    pattern.span().start,
                    format!(
                        "path {:?} is not a regular expression: {error}",
                        pattern.get_ref()
                    ),
                ))
            }
        },
        (None, None) => None,
    };
    let top = &routes[0];
    let backend = match &rule.backend {
        None => 0,
        Some(name) => backends
            .iter()
            .position(|b| b.name == *name.get_ref())
            .ok_or_else(|| {
                let known: Vec<&str> = backends.iter().map(|b| b.name.as_str()).collect();
                bad(
                    name.span().start,
                    format!(
                        "no backend named {:?} (backends: {})",
                        name.get_ref(),
                        known.join(", ")
                    ),
                )
            })?,
    };
    let mut policy = top.policy.clone();
    if let Some(ttl) = rule.default_ttl {
        policy.default_ttl = Duration::from_secs(ttl);
    }
    if let Some(grace) = rule.grace {
        policy.grace = Duration::from_secs(grace);
    }
    if let Some(sie) = rule.stale_if_error {
        policy.stale_if_error = Duration::from_secs(sie);
    }
    let normalize = super::keys::rule(&rule, &top.normalize, src)?;
    let mut route = Route {
        normalize,
        backend,
        policy,
        pass: rule.pass.unwrap_or(false),
        do_esi: rule.do_esi.unwrap_or(top.do_esi),
        ..top.clone()
    };
    let safety = super::security::SafetyFile {
        cookie: rule.cookie.as_ref(),
        authorization: rule.authorization.as_ref(),
        cookie_ignore: rule.cookie_ignore.as_ref(),
        heuristic_with_credentials: rule.heuristic_with_credentials,
        strip_unkeyed: rule.strip_unkeyed.as_ref(),
        key_headers: rule.key_headers.as_ref(),
        key_headers_always: rule.key_headers_always.as_ref(),
        key_device_class: rule.key_device_class,
        key_cookies: rule.key_cookies.as_ref(),
    };
    super::security::apply(&mut route, &safety, "rule: ", src)?;
    let edits = super::edits::EditsFile {
        request_set: rule.request_set.as_ref(),
        request_unset: rule.request_unset.as_ref(),
        request_append: rule.request_append.as_ref(),
        response_set: rule.response_set.as_ref(),
        response_unset: rule.response_unset.as_ref(),
        response_append: rule.response_append.as_ref(),
        synthetic: rule.synthetic.as_ref(),
    };
    route.edits = std::sync::Arc::new(super::edits::read(&edits, src)?);
    routes.push(route);
    Ok(Rule {
        host,
        path,
        route: routes.len() - 1,
    })
}

pub(super) fn probe(
    args: &HttpArgs,
    file: Option<super::file::ProbeFile>,
    src: Source<'_>,
) -> Result<Option<super::Probe>, ConfigError> {
    let file = file.unwrap_or_default();
    let (path, at) = match (&args.probe, &file.path) {
        (Some(path), _) => (path.clone(), None),
        (None, Some(path)) => (path.get_ref().clone(), Some(path.span().start)),
        (None, None) => return Ok(None),
    };
    if !path.starts_with('/') {
        return Err(ConfigError::Invalid(format!(
            "{}probe path {path:?} must start with /",
            src.at(at)
        )));
    }
    // `threshold` consecutive failures make a server sick, one success healthy again: a
    // window of `threshold` probes of which one must succeed.
    let failures = file.threshold.unwrap_or(3).clamp(1, 64);
    Ok(Some(super::Probe {
        path,
        interval: super::secs_f(file.interval, 5.0, "probe.interval", src)?,
        timeout: super::secs_f(file.timeout, 2.0, "probe.timeout", src)?,
        window: failures,
        threshold: 1,
        initial: 1,
        expected: None,
    }))
}
