//! `[normalize]`, the `normalize_*` keys of a `[[rule]]`, and `[device]` (`crate::keys`), each
//! mistake named with the file's line.

use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use toml::Spanned;

use super::file::{RuleFile, Source};
use super::ConfigError;
use crate::keys::device::{DeviceRule, DeviceRules, UaMatch};
use crate::keys::query::{ParamPattern, QueryRules};
use crate::keys::KeySettings;

/// `[normalize]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NormalizeFile {
    remove: Option<Vec<Spanned<String>>>,
    also_remove: Option<Vec<Spanned<String>>>,
    sort: Option<bool>,
    forward_removed: Option<bool>,
    count_params: Option<usize>,
}

/// `[device]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeviceFile {
    enabled: Option<bool>,
    header: Option<Spanned<String>>,
    default: Option<Spanned<String>>,
    vary_user_agent: Option<bool>,
    rule: Option<Vec<Spanned<DeviceRuleFile>>>,
}

/// One `[[device.rule]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceRuleFile {
    contains: Option<Spanned<String>>,
    pattern: Option<Spanned<String>>,
    class: Spanned<String>,
}

fn invalid(src: Source<'_>, at: usize, what: &str, why: String) -> ConfigError {
    ConfigError::Invalid(format!("{}{what}: {why}", src.at(Some(at))))
}

fn patterns(
    list: &[Spanned<String>],
    what: &str,
    src: Source<'_>,
) -> Result<Vec<ParamPattern>, ConfigError> {
    list.iter()
        .map(|p| {
            ParamPattern::parse(p.get_ref()).map_err(|e| invalid(src, p.span().start, what, e))
        })
        .collect()
}

/// The query rules of `base` changed by a remove list (replacing), an also-remove list
/// (adding), sort and forward settings.
fn query_rules(
    base: &QueryRules,
    remove: Option<&Vec<Spanned<String>>>,
    also: Option<&Vec<Spanned<String>>>,
    sort: Option<bool>,
    forward_removed: Option<bool>,
    prefix: &str,
    src: Source<'_>,
) -> Result<QueryRules, ConfigError> {
    let mut rules = base.clone();
    if let Some(remove) = remove {
        rules.remove = patterns(remove, &format!("{prefix}remove"), src)?;
    }
    if let Some(also) = also {
        rules
            .remove
            .extend(patterns(also, &format!("{prefix}also_remove"), src)?);
    }
    rules.sort = sort.unwrap_or(rules.sort);
    rules.forward_removed = forward_removed.unwrap_or(rules.forward_removed);
    Ok(rules)
}

/// The top-level query rules and the settings of [`KeySettings`].
pub(super) fn top(
    normalize: Option<NormalizeFile>,
    device: Option<DeviceFile>,
    src: Source<'_>,
) -> Result<(QueryRules, KeySettings), ConfigError> {
    let normalize = normalize.unwrap_or_default();
    let rules = query_rules(
        &QueryRules::default(),
        normalize.remove.as_ref(),
        normalize.also_remove.as_ref(),
        normalize.sort,
        normalize.forward_removed,
        "normalize.",
        src,
    )?;
    let settings = KeySettings {
        device: device_rules(device.unwrap_or_default(), src)?,
        count_params: normalize
            .count_params
            .unwrap_or(KeySettings::default().count_params),
    };
    Ok((rules, settings))
}

/// A `[[rule]]`'s query rules: the top level's, changed by its `normalize_*` keys.
pub(super) fn rule(
    rule: &RuleFile,
    top: &QueryRules,
    src: Source<'_>,
) -> Result<QueryRules, ConfigError> {
    query_rules(
        top,
        rule.normalize_remove.as_ref(),
        rule.normalize_also_remove.as_ref(),
        rule.normalize_sort,
        rule.normalize_forward_removed,
        "rule: normalize_",
        src,
    )
}

fn device_rules(file: DeviceFile, src: Source<'_>) -> Result<Option<DeviceRules>, ConfigError> {
    if file.enabled == Some(false) {
        return Ok(None);
    }
    let mut rules = DeviceRules::default();
    if let Some(header) = &file.header {
        let at = header.span().start;
        rules.header = match HeaderName::from_bytes(header.get_ref().as_bytes()) {
            Ok(name) if name != http::header::USER_AGENT && name != http::header::HOST => name,
            _ => {
                return Err(invalid(
                    src,
                    at,
                    "device.header",
                    format!("{:?} is not a header name of its own", header.get_ref()),
                ))
            }
        };
    }
    let class = |value: &Spanned<String>, what: &str| {
        let text = value.get_ref();
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if text.is_empty() || !text.chars().all(token) {
            return Err(invalid(
                src,
                value.span().start,
                what,
                format!("{text:?} is not a class name (letters, digits, - _ . and the like)"),
            ));
        }
        HeaderValue::from_str(text)
            .map_err(|e| invalid(src, value.span().start, what, e.to_string()))
    };
    if let Some(default) = &file.default {
        rules.default = class(default, "device.default")?;
    }
    rules.vary_user_agent = file.vary_user_agent.unwrap_or(false);
    if let Some(list) = file.rule {
        rules.rules = Vec::with_capacity(list.len());
        for entry in list {
            let at = entry.span().start;
            let entry = entry.into_inner();
            let matcher = match (&entry.contains, &entry.pattern) {
                (Some(text), None) if !text.get_ref().is_empty() => {
                    UaMatch::contains(text.get_ref().as_bytes())
                }
                (None, Some(pattern)) => match regex::bytes::Regex::new(pattern.get_ref()) {
                    Ok(regex) => UaMatch::Pattern(regex),
                    Err(e) => {
                        return Err(invalid(
                            src,
                            pattern.span().start,
                            "device.rule",
                            format!(
                                "pattern {:?} is not a regular expression: {e}",
                                pattern.get_ref()
                            ),
                        ))
                    }
                },
                _ => {
                    return Err(invalid(
                        src,
                        at,
                        "device.rule",
                        "give one of contains (not empty) or pattern".into(),
                    ))
                }
            };
            rules.rules.push(DeviceRule {
                matcher,
                class: class(&entry.class, "device.rule class")?,
            });
        }
    }
    Ok(Some(rules))
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
