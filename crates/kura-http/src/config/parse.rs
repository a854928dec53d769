//! The parts of the file checked after parsing: the backends by name and the `[[rule]]`s,
//! each error naming the line of the value it is about.

use std::collections::BTreeMap;
use std::time::Duration;

use regex::Regex;
use toml::Spanned;

use super::file::{RuleFile, Source};
use super::{parse_backend, BackendSpec, ConfigError, HostMatch, HttpArgs, PathMatch, Route, Rule};

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

/// The backends: the default first (`--backend`, else `backend`, else `[backends].default`),
/// then the others of `[backends]` by name.
pub(super) fn backends(
    args: &HttpArgs,
    top: Option<Spanned<String>>,
    named: Option<BTreeMap<String, Spanned<String>>>,
    src: Source<'_>,
) -> Result<Vec<BackendSpec>, ConfigError> {
    let mut named = named.unwrap_or_default();
    let parse = |text: &str, at: Option<usize>| {
        parse_backend(text).map_err(|e| ConfigError::Invalid(format!("{}{e}", src.at(at))))
    };
    let default = match (&args.backend, top) {
        (Some(url), _) => parse(url, None)?,
        (None, Some(url)) => {
            if let Some(twice) = named.get("default") {
                return Err(ConfigError::Invalid(format!(
                    "{}a backend named \"default\" beside the top-level backend",
                    src.at(Some(twice.span().start))
                )));
            }
            parse(url.get_ref(), Some(url.span().start))?
        }
        (None, None) => match named.remove("default") {
            Some(url) => parse(url.get_ref(), Some(url.span().start))?,
            None => {
                return Err(ConfigError::Invalid(
                    "no backend: give --backend URL, `backend = URL` or a backend named \"default\" in [backends]".into(),
                ))
            }
        },
    };
    named.remove("default");
    let mut out = vec![BackendSpec {
        name: "default".into(),
        addr: default,
    }];
    for (name, url) in named {
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if !name.chars().all(plain) {
            return Err(ConfigError::Invalid(format!(
                "{}backend name {name:?}: letters, digits, _ and - only",
                src.at(Some(url.span().start))
            )));
        }
        out.push(BackendSpec {
            addr: parse(url.get_ref(), Some(url.span().start))?,
            name,
        });
    }
    Ok(out)
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
    let pass_cookie = match &rule.cookie {
        Some(value) => pass_or_lookup(value, "cookie", src)?,
        None => top.pass_cookie,
    };
    let pass_authorization = match &rule.authorization {
        Some(value) => pass_or_lookup(value, "authorization", src)?,
        None => top.pass_authorization,
    };
    let normalize = super::keys::rule(&rule, &top.normalize, src)?;
    routes.push(Route {
        normalize,
        backend,
        policy,
        pass: rule.pass.unwrap_or(false),
        pass_cookie,
        pass_authorization,
    });
    Ok(Rule {
        host,
        path,
        route: routes.len() - 1,
    })
}
