//! `[purge]` and `[bans]`: who may PURGE, the admin token for bans and tags, the tag fields
//! and the lurker's pace.

use std::net::IpAddr;
use std::time::Duration;

use http::HeaderName;
use serde::Deserialize;
use toml::Spanned;

use super::file::Source;
use super::ConfigError;
use crate::bans::lurker::LurkerSettings;

/// `[purge]` as read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PurgeFile {
    allow: Option<Vec<Spanned<String>>>,
    token: Option<String>,
    token_header: Option<Spanned<String>>,
    soft_header: Option<Spanned<String>>,
}

/// `[bans]` as read.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BansFile {
    token: Option<String>,
    tag_headers: Option<Vec<Spanned<String>>>,
    lurker_batch: Option<usize>,
    lurker_interval_ms: Option<u64>,
}

/// An address range: a network address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `ADDR` or `ADDR/PREFIX`.
    ///
    /// # Errors
    /// Not an address, or a prefix longer than the address.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not an address or ADDR/PREFIX"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.trim().parse::<u8>() {
                Ok(p) if p <= max => p,
                _ => return Err(format!("{text:?}: the prefix must be 0 to {max}")),
            },
        };
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` is in the range (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let keep = |bits: u32| -> u128 {
            let host = bits - u32::from(self.prefix);
            u128::MAX.checked_shl(host).unwrap_or(0)
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = keep(32) as u32;
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = keep(128);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Who may PURGE, and how a soft purge is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeConfig {
    /// Client addresses allowed to PURGE.
    pub allow: Vec<Cidr>,
    /// A token that allows PURGE from anywhere, sent in `token_header`.
    pub token: Option<String>,
    /// The request field carrying the token.
    pub token_header: HeaderName,
    /// The request field that makes a PURGE soft (any value but `0`).
    pub soft_header: HeaderName,
}

impl PurgeConfig {
    /// Whether PURGE is on at all.
    pub fn enabled(&self) -> bool {
        !self.allow.is_empty() || self.token.is_some()
    }
}

/// The admin endpoints for bans and tags, the tag fields, the lurker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BansConfig {
    /// The bearer token of `/ban` and `/tags`; without it they are refused.
    pub token: Option<String>,
    /// Response fields whose words are an object's tags.
    pub tag_headers: Vec<HeaderName>,
    /// The lurker's pace.
    pub lurker: LurkerSettings,
}

fn header_name(
    value: &Spanned<String>,
    what: &str,
    src: Source<'_>,
) -> Result<HeaderName, ConfigError> {
    HeaderName::from_bytes(value.get_ref().as_bytes()).map_err(|_| {
        ConfigError::Invalid(format!(
            "{}{what}: {:?} is not a header field name",
            src.at(Some(value.span().start)),
            value.get_ref()
        ))
    })
}

fn token(value: Option<String>, what: &str) -> Result<Option<String>, ConfigError> {
    match value {
        Some(t) if t.len() < 16 => Err(ConfigError::Invalid(format!(
            "{what}: the token must be at least 16 characters"
        ))),
        other => Ok(other),
    }
}

pub(super) fn purge(file: Option<PurgeFile>, src: Source<'_>) -> Result<PurgeConfig, ConfigError> {
    let file = file.unwrap_or_default();
    let mut allow = Vec::new();
    for entry in file.allow.unwrap_or_default() {
        let cidr = Cidr::parse(entry.get_ref()).map_err(|e| {
            ConfigError::Invalid(format!(
                "{}purge.allow: {e}",
                src.at(Some(entry.span().start))
            ))
        })?;
        allow.push(cidr);
    }
    let name = |v: &Option<Spanned<String>>, what, default| match v {
        Some(v) => header_name(v, what, src),
        None => Ok(HeaderName::from_static(default)),
    };
    Ok(PurgeConfig {
        allow,
        token: token(file.token, "purge.token")?,
        token_header: name(&file.token_header, "purge.token_header", "x-purge-token")?,
        soft_header: name(&file.soft_header, "purge.soft_header", "x-purge-soft")?,
    })
}

pub(super) fn bans(file: Option<BansFile>, src: Source<'_>) -> Result<BansConfig, ConfigError> {
    let file = file.unwrap_or_default();
    let tag_headers = match file.tag_headers {
        Some(names) => names
            .iter()
            .map(|n| header_name(n, "bans.tag_headers", src))
            .collect::<Result<_, _>>()?,
        None => vec![
            HeaderName::from_static("surrogate-key"),
            HeaderName::from_static("xkey"),
        ],
    };
    let defaults = LurkerSettings::default();
    if file.lurker_batch == Some(0) || file.lurker_interval_ms == Some(0) {
        return Err(ConfigError::Invalid(
            "bans.lurker_batch and bans.lurker_interval_ms must be at least 1".into(),
        ));
    }
    Ok(BansConfig {
        token: token(file.token, "bans.token")?,
        tag_headers,
        lurker: LurkerSettings {
            batch: file.lurker_batch.unwrap_or(defaults.batch),
            interval: file
                .lurker_interval_ms
                .map_or(defaults.interval, Duration::from_millis),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn address_ranges() {
        let net = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(net.contains("10.1.200.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.0.9".parse().unwrap()));
        let one = Cidr::parse("127.0.0.1").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let all = Cidr::parse("0.0.0.0/0").unwrap();
        assert!(all.contains("192.0.2.1".parse().unwrap()));
        let v6 = Cidr::parse("fd00::/8").unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()));
        assert!(!v6.contains("fe80::1".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nonsense", "::/129", "1.2.3.4/x"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    const BACKEND: &str = "backend = \"http://127.0.0.1:1\"\n";

    #[test]
    fn sections_and_their_errors() {
        let config = Config::from_toml(
            r#"backend = "http://127.0.0.1:1"
[purge]
allow = ["127.0.0.1", "10.0.0.0/8"]
soft_header = "x-soft"
[bans]
token = "0123456789abcdef"
tag_headers = ["x-tags"]
lurker_batch = 50
"#,
        )
        .unwrap();
        assert!(config.purge.enabled());
        assert_eq!(config.purge.allow.len(), 2);
        assert_eq!(config.purge.soft_header, "x-soft");
        assert_eq!(config.purge.token_header, "x-purge-token");
        assert_eq!(config.bans.token.as_deref(), Some("0123456789abcdef"));
        assert_eq!(config.bans.tag_headers, ["x-tags"]);
        assert_eq!(config.bans.lurker.batch, 50);
        let default = Config::from_toml(BACKEND).unwrap();
        assert!(!default.purge.enabled());
        assert_eq!(default.bans.tag_headers, ["surrogate-key", "xkey"]);
        crate::config::tests::assert_refused(
            BACKEND,
            &[
                ("[purge]\nallow = [\"10.0.0.0/40\"]", "line 3: purge.allow"),
                ("[bans]\ntoken = \"short\"", "at least 16"),
                (
                    "[bans]\ntag_headers = [\"bad name\"]",
                    "not a header field name",
                ),
                ("[bans]\nlurker_batch = 0", "at least 1"),
                ("[purge]\nallowed = []", "unknown field"),
            ],
        );
    }
}
