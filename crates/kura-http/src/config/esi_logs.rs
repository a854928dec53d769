//! `access_log_format` and `[esi]` (the route switch `do_esi` is read with each route).

use serde::Deserialize;
use toml::Spanned;

use super::file::Source;
use super::ConfigError;
use crate::access_log::LogFormat;
use crate::esi::EsiSettings;

/// `[esi]` as read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EsiFile {
    pub(super) surrogate_control: Option<bool>,
    pub(super) max_depth: Option<usize>,
    pub(super) max_includes: Option<usize>,
    pub(super) hosts: Option<Vec<Spanned<String>>>,
}

/// `access_log_format`: `"json"` or a `varnishncsa -F` format string.
pub(super) fn log_format(
    value: Option<&Spanned<String>>,
    src: Source<'_>,
) -> Result<LogFormat, ConfigError> {
    let Some(value) = value else {
        return Ok(LogFormat::default());
    };
    LogFormat::parse(value.get_ref()).map_err(|why| {
        ConfigError::Invalid(format!(
            "{}access_log_format: {why}",
            src.at(Some(value.span().start))
        ))
    })
}

/// `[esi]`.
pub(super) fn esi(file: Option<EsiFile>, src: Source<'_>) -> Result<EsiSettings, ConfigError> {
    let file = file.unwrap_or_default();
    let defaults = EsiSettings::default();
    let mut hosts = Vec::new();
    for host in file.hosts.unwrap_or_default() {
        let name = host.get_ref().trim().to_ascii_lowercase();
        let valid = !name.is_empty()
            && name.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !valid {
            return Err(ConfigError::Invalid(format!(
                "{}esi.hosts: {:?} is not a host name",
                src.at(Some(host.span().start)),
                host.get_ref()
            )));
        }
        hosts.push(name);
    }
    Ok(EsiSettings {
        surrogate_control: file.surrogate_control.unwrap_or(defaults.surrogate_control),
        max_depth: file.max_depth.unwrap_or(defaults.max_depth),
        max_includes: file.max_includes.unwrap_or(defaults.max_includes).max(1),
        hosts,
        any: false,
    })
}
