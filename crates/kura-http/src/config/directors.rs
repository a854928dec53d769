//! A backend that is a pool of servers (Varnish's directors): `[backends.NAME]` with
//! `servers`, a `policy`, its own timeouts, connection limit and health probe; a server given
//! as a table may have its own of each (Varnish's per-backend `.connect_timeout`,
//! `.first_byte_timeout`, `.between_bytes_timeout`, `.max_connections`, `.probe`). A backend
//! given as a URL string is a pool of one server with the top-level settings.

use std::time::Duration;

use http::HeaderName;
use serde::Deserialize;

use super::backend_tls::TlsFields;
use super::file::Source;
use super::{backend_tls, parse_backend, BackendAddr, BackendTls, ConfigError, Probe};

/// How a pool's director picks a server for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// Each request the next healthy server in turn (Varnish's `round_robin`).
    RoundRobin,
    /// A healthy server at random, in proportion to the weights (Varnish's `random`).
    Random,
    /// The healthy server the key hashes to, consistently: a sick server's keys go to others,
    /// the other keys stay where they were (Varnish's `hash`/`shard`).
    Hash(HashKey),
    /// The first healthy server in the listed order (Varnish's `fallback`).
    Fallback,
}

/// What a hash director hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// The request's path and query.
    Url,
    /// A request field's value (the URL when absent).
    Header(HeaderName),
    /// A cookie's value (the URL when absent).
    Cookie(String),
}

/// One server of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// Where it listens.
    pub addr: BackendAddr,
    /// Its share for `random` and `hash` (default 1; 0: only when no other can serve).
    pub weight: u32,
    /// Requests it may have at once; past it, another server or 503 (`max_connections`).
    pub max_connections: Option<usize>,
    /// Its own probe, instead of the pool's.
    pub probe: Option<Probe>,
    /// Its TLS settings, for an `https://` server.
    pub tls: Option<BackendTls>,
    /// Its own timeouts, each instead of its pool's (then the top-level one) when given.
    pub timeouts: Timeouts,
}

/// A pool's or a server's timeouts, each instead of the pool's or the top-level one when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting (Varnish's `.connect_timeout`).
    pub connect: Option<Duration>,
    /// Until the response head (`.first_byte_timeout`).
    pub first_byte: Option<Duration>,
    /// Between two reads of the body (`.between_bytes_timeout`).
    pub between_bytes: Option<Duration>,
}

/// A pool's queue for requests that find every server at `max_connections` (Varnish's
/// backend `wait_timeout` and `wait_limit`): at most `limit` wait, each at most `timeout`,
/// for a server to have room; past either, 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// How long a request waits.
    pub timeout: Duration,
    /// How many requests wait at once.
    pub limit: usize,
}

/// Requests that may wait at once in a pool's queue when `wait_timeout` is given alone.
pub const DEFAULT_WAIT_LIMIT: usize = 100;

/// `[backends.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolFile {
    servers: Vec<toml::Value>,
    policy: Option<String>,
    hash_key: Option<String>,
    seed: Option<u64>,
    connect_timeout: Option<f64>,
    first_byte_timeout: Option<f64>,
    between_bytes_timeout: Option<f64>,
    max_connections: Option<usize>,
    wait_timeout: Option<f64>,
    wait_limit: Option<usize>,
    probe: Option<ProbeFile>,
    #[serde(flatten)]
    tls: TlsFields,
}

/// A server given as a table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerFile {
    url: String,
    weight: Option<u32>,
    connect_timeout: Option<f64>,
    first_byte_timeout: Option<f64>,
    between_bytes_timeout: Option<f64>,
    max_connections: Option<usize>,
    probe: Option<ProbeFile>,
    #[serde(flatten)]
    tls: TlsFields,
}

/// A pool's or server's `probe`, with Varnish's `.probe` names.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeFile {
    url: String,
    interval: Option<f64>,
    timeout: Option<f64>,
    window: Option<u32>,
    threshold: Option<u32>,
    initial: Option<u32>,
    expected_response: Option<u16>,
}

/// A pool as read: everything of [`super::BackendSpec`] but its name.
pub(super) struct Pool {
    pub(super) servers: Vec<ServerSpec>,
    pub(super) policy: Policy,
    pub(super) seed: Option<u64>,
    pub(super) timeouts: Timeouts,
    pub(super) wait: Option<Wait>,
}

/// Reads `value`, the backend `name` at byte `at`: a URL string (one server) or a pool table.
pub(super) fn pool(
    name: &str,
    value: toml::Value,
    at: usize,
    src: Source<'_>,
) -> Result<Pool, ConfigError> {
    let bad =
        |why: String| ConfigError::Invalid(format!("{}backend {name:?}: {why}", src.at(Some(at))));
    let file = match value {
        toml::Value::String(url) => {
            return parse_backend(&url)
                .map(pool_of)
                .map_err(|e| ConfigError::Invalid(format!("{}{e}", src.at(Some(at)))));
        }
        table @ toml::Value::Table(_) => {
            PoolFile::deserialize(table).map_err(|e| bad(e.to_string()))?
        }
        other => {
            return Err(bad(format!(
                "a URL or a table of servers, not a {}",
                other.type_str()
            )))
        }
    };
    if file.servers.is_empty() {
        return Err(bad("servers is empty".into()));
    }
    let pool_probe = file.probe.map(|p| probe(p).map_err(&bad)).transpose()?;
    let secs = |value: Option<f64>, what: &str| {
        value
            .map(|v| {
                Duration::try_from_secs_f64(v)
                    .map_err(|_| bad(format!("{what}: {v} is not a duration in seconds")))
            })
            .transpose()
    };
    let timeouts = |connect, first_byte, between_bytes| {
        Ok::<_, ConfigError>(Timeouts {
            connect: secs(connect, "connect_timeout")?,
            first_byte: secs(first_byte, "first_byte_timeout")?,
            between_bytes: secs(between_bytes, "between_bytes_timeout")?,
        })
    };
    let mut servers = Vec::new();
    for server in file.servers {
        let spec = match server {
            toml::Value::String(url) => {
                let addr = parse_backend(&url).map_err(&bad)?;
                ServerSpec {
                    max_connections: file.max_connections,
                    probe: pool_probe.clone(),
                    tls: backend_tls::settings(is_https(&addr), &TlsFields::default(), &file.tls)
                        .map_err(&bad)?,
                    ..one(addr)
                }
            }
            table @ toml::Value::Table(_) => {
                let server = ServerFile::deserialize(table).map_err(|e| bad(e.to_string()))?;
                let addr = parse_backend(&server.url).map_err(&bad)?;
                ServerSpec {
                    tls: backend_tls::settings(is_https(&addr), &server.tls, &file.tls)
                        .map_err(&bad)?,
                    timeouts: timeouts(
                        server.connect_timeout,
                        server.first_byte_timeout,
                        server.between_bytes_timeout,
                    )?,
                    addr,
                    weight: server.weight.unwrap_or(1),
                    max_connections: server.max_connections.or(file.max_connections),
                    probe: match server.probe {
                        Some(p) => Some(probe(p).map_err(&bad)?),
                        None => pool_probe.clone(),
                    },
                }
            }
            other => {
                return Err(bad(format!(
                    "a server is a URL or a table with url, not a {}",
                    other.type_str()
                )))
            }
        };
        if spec.max_connections == Some(0) {
            return Err(bad("max_connections must be at least 1".into()));
        }
        if servers.iter().any(|s: &ServerSpec| s.addr == spec.addr) {
            return Err(bad(format!("server {:?} is listed twice", spec.addr)));
        }
        servers.push(spec);
    }
    let policy = match (
        file.policy.as_deref().unwrap_or("round-robin"),
        file.hash_key,
    ) {
        ("round-robin", None) => Policy::RoundRobin,
        ("random", None) => Policy::Random,
        ("fallback", None) => Policy::Fallback,
        ("hash", key) => Policy::Hash(hash_key(key.as_deref().unwrap_or("url")).map_err(&bad)?),
        (_, Some(_)) => return Err(bad("hash_key is for policy = \"hash\"".into())),
        (other, None) => {
            return Err(bad(format!(
                "policy {other:?} is not round-robin, random, hash or fallback"
            )))
        }
    };
    let wait = match (secs(file.wait_timeout, "wait_timeout")?, file.wait_limit) {
        (Some(timeout), limit) if !timeout.is_zero() && limit != Some(0) => Some(Wait {
            timeout,
            limit: limit.unwrap_or(DEFAULT_WAIT_LIMIT),
        }),
        (None, Some(_)) => return Err(bad("wait_limit is for a pool with wait_timeout".into())),
        _ => None,
    };
    if wait.is_some() && servers.iter().all(|s| s.max_connections.is_none()) {
        return Err(bad(
            "wait_timeout is for a pool whose servers have max_connections".into(),
        ));
    }
    Ok(Pool {
        servers,
        policy,
        seed: file.seed,
        timeouts: timeouts(
            file.connect_timeout,
            file.first_byte_timeout,
            file.between_bytes_timeout,
        )?,
        wait,
    })
}

/// The pool of the one server at `addr`, with the top-level settings.
pub(super) fn pool_of(addr: BackendAddr) -> Pool {
    Pool {
        servers: vec![one(addr)],
        policy: Policy::RoundRobin,
        seed: None,
        timeouts: Timeouts::default(),
        wait: None,
    }
}

/// One server at `addr` with the defaults (TLS with the system's roots for `https://`).
fn one(addr: BackendAddr) -> ServerSpec {
    ServerSpec {
        tls: is_https(&addr).then(BackendTls::default),
        addr,
        weight: 1,
        max_connections: None,
        probe: None,
        timeouts: Timeouts::default(),
    }
}

/// Whether the server at `addr` is reached with TLS.
pub fn is_https(addr: &BackendAddr) -> bool {
    matches!(addr, BackendAddr::Tcp(uri) if uri.scheme_str() == Some("https"))
}

/// `url`, `header:NAME` or `cookie:NAME`.
fn hash_key(text: &str) -> Result<HashKey, String> {
    if text == "url" {
        return Ok(HashKey::Url);
    }
    match text.split_once(':') {
        Some(("header", name)) => HeaderName::from_bytes(name.trim().as_bytes())
            .map(HashKey::Header)
            .map_err(|_| format!("hash_key: {name:?} is not a field name")),
        Some(("cookie", name)) if !name.trim().is_empty() => {
            Ok(HashKey::Cookie(name.trim().to_owned()))
        }
        _ => Err(format!(
            "hash_key {text:?} is not url, header:NAME or cookie:NAME"
        )),
    }
}

/// A probe with Varnish's defaults: every 5 s, 2 s allowed, healthy while at least 3 of the
/// last 8 succeeded; expects a 200. Unlike Varnish (`initial` = threshold - 1, starting sick),
/// a server starts healthy (`initial` = threshold).
fn probe(file: ProbeFile) -> Result<Probe, String> {
    if !file.url.starts_with('/') {
        return Err(format!("probe url {:?} must start with /", file.url));
    }
    let window = file.window.unwrap_or(8);
    if !(1..=64).contains(&window) {
        return Err(format!("probe window {window} is not between 1 and 64"));
    }
    let threshold = file.threshold.unwrap_or(3.min(window));
    if threshold == 0 || threshold > window {
        return Err(format!(
            "probe threshold {threshold} is not between 1 and the window ({window})"
        ));
    }
    let initial = file.initial.unwrap_or(threshold);
    if initial > window {
        return Err(format!(
            "probe initial {initial} is more than the window ({window})"
        ));
    }
    let expected = match file.expected_response.unwrap_or(200) {
        code @ 100..=599 => http::StatusCode::from_u16(code).ok(),
        code => return Err(format!("probe expected_response {code} is not a status")),
    };
    let secs = |value: Option<f64>, default: f64, what: &str| {
        let v = value.unwrap_or(default);
        Duration::try_from_secs_f64(v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("probe {what}: {v} is not a duration in seconds"))
    };
    Ok(Probe {
        path: file.url,
        interval: secs(file.interval, 5.0, "interval")?,
        timeout: secs(file.timeout, 2.0, "timeout")?,
        window,
        threshold,
        initial,
        expected,
    })
}

#[cfg(test)]
#[path = "directors_tests.rs"]
mod tests;
