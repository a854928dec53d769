//! `kura http`'s settings: command-line flags ([`HttpArgs`]) and the optional TOML file
//! (`--config`), merged into one [`Config`]. A flag given on the command line wins over the
//! file; the file wins over the defaults. docs/http.md lists every setting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use http::Uri;
use serde::Deserialize;

use crate::rules::{CachePolicy, ClientDirectives, SetCookie};

/// Run `kura http`, a caching reverse proxy (RFC 9111) in front of one HTTP backend.
#[derive(Args, Debug, Default, Clone)]
pub struct HttpArgs {
    /// The backend, as http://HOST:PORT.
    #[arg(long, short = 'b', value_name = "URL")]
    pub backend: Option<String>,
    /// Address to listen on for HTTP (repeatable). Default 127.0.0.1:6081.
    #[arg(long = "listen", short = 'l', value_name = "ADDR")]
    pub listen: Vec<SocketAddr>,
    /// Cache memory in MiB (objects, headers and per-object overhead). Default 256.
    #[arg(long, short = 'm', value_name = "MIB")]
    pub memory: Option<usize>,
    /// TOML configuration file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address of the admin listener: /stats (JSON) and /metrics (Prometheus).
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,
    /// Access log file ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<String>,
    /// Path the backend health probe requests (probes are off without it).
    #[arg(long, value_name = "PATH")]
    pub probe: Option<String>,
    /// Worker threads (default: the machine's parallelism).
    #[arg(long, short = 't', value_name = "N")]
    pub threads: Option<usize>,
    /// Lifetime in seconds of a response with no freshness information (default 120).
    #[arg(long, value_name = "SECONDS")]
    pub default_ttl: Option<u64>,
    /// Seconds a stale object may be served while it is refreshed (default 10).
    #[arg(long, value_name = "SECONDS")]
    pub grace: Option<u64>,
    /// Seconds a stale object may be served while the backend fails (default 10).
    #[arg(long, value_name = "SECONDS")]
    pub stale_if_error: Option<u64>,
}

/// Seconds an object with validators is kept past its last permitted use, to be revalidated
/// with a conditional request rather than fetched whole.
pub const DEFAULT_KEEP: u64 = 10;

/// A TLS listener: address, certificate chain and private key (PEM).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct TlsListener {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
}

/// The TOML file, every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    backend: Option<String>,
    listen: Option<Vec<SocketAddr>>,
    listen_unix: Option<Vec<PathBuf>>,
    tls: Option<Vec<TlsListener>>,
    memory_mb: Option<usize>,
    admin_listen: Option<SocketAddr>,
    access_log: Option<String>,
    threads: Option<usize>,
    default_ttl: Option<u64>,
    grace: Option<u64>,
    stale_if_error: Option<u64>,
    keep: Option<u64>,
    hit_for_miss: Option<u64>,
    honour_client_directives: Option<bool>,
    set_cookie: Option<String>,
    cdn_cache_control: Option<bool>,
    max_object_mb: Option<usize>,
    max_in_flight_mb: Option<usize>,
    max_header_kb: Option<usize>,
    max_url_bytes: Option<usize>,
    max_connections: Option<usize>,
    connect_timeout: Option<f64>,
    first_byte_timeout: Option<f64>,
    between_bytes_timeout: Option<f64>,
    probe: Option<ProbeFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeFile {
    path: Option<String>,
    interval: Option<f64>,
    timeout: Option<f64>,
    threshold: Option<u32>,
}

/// Backend health probes.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// Path requested with GET; a 2xx or 3xx answer is a success.
    pub path: String,
    /// Time between probes.
    pub interval: Duration,
    /// Time a probe may take.
    pub timeout: Duration,
    /// Consecutive failures that make the backend sick (one success makes it healthy).
    pub threshold: u32,
}

/// Everything `kura http` runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Backend origin (scheme and authority).
    pub backend: Uri,
    /// Plain HTTP listeners.
    pub listen: Vec<SocketAddr>,
    /// Unix-socket listeners (plain HTTP/1.1).
    pub listen_unix: Vec<PathBuf>,
    /// TLS listeners (HTTP/2 and HTTP/1.1 by ALPN).
    pub tls: Vec<TlsListener>,
    /// Cache memory in bytes.
    pub memory: usize,
    /// Admin listener.
    pub admin_listen: Option<SocketAddr>,
    /// Access log destination.
    pub access_log: Option<String>,
    /// Worker threads.
    pub threads: usize,
    /// The RFC 9111 rules' settings.
    pub policy: CachePolicy,
    /// How long an object is kept past its grace for revalidation (it has validators).
    pub keep: Duration,
    /// How long a URL whose response was not storable skips coalescing (Varnish's hit-for-miss).
    pub hit_for_miss: Duration,
    /// Largest body stored; larger ones stream through without being stored.
    pub max_object: usize,
    /// Bodies buffered for storing or for coalesced clients, all fetches together.
    pub max_in_flight: usize,
    /// Largest request head (request line and header fields) from a client.
    pub max_header: usize,
    /// Longest request target.
    pub max_url: usize,
    /// Client connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Backend connect timeout.
    pub connect_timeout: Duration,
    /// Time until the backend's response head.
    pub first_byte_timeout: Duration,
    /// Time between two reads of a backend body.
    pub between_bytes_timeout: Duration,
    /// Health probes.
    pub probe: Option<Probe>,
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("{path}: {source}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<toml::de::Error>,
    },
    /// A value is wrong.
    #[error("{0}")]
    Invalid(String),
}

fn secs_f(value: f64, name: &str) -> Result<Duration, ConfigError> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| ConfigError::Invalid(format!("{name}: {value} is not a duration in seconds")))
}

/// Parses a backend URL: `http://host:port` (a path is not allowed).
pub fn parse_backend(text: &str) -> Result<Uri, ConfigError> {
    let bad = |why: &str| ConfigError::Invalid(format!("backend {text:?}: {why}"));
    let uri: Uri = text.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// backends are supported"));
    }
    if uri.authority().is_none() {
        return Err(bad("no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(bad("a backend is scheme and host only, without a path"));
    }
    Ok(uri)
}

impl Config {
    /// The configuration of `args`, reading `args.config` when given.
    ///
    /// # Errors
    /// An unreadable or invalid file, or an invalid value.
    pub fn load(args: &HttpArgs) -> Result<Config, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        Self::merge(args, file)
    }

    /// The configuration of the TOML text `text` (no flags): for tests and tools.
    ///
    /// # Errors
    /// Invalid TOML or values.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let file = toml::from_str(text).map_err(|e| ConfigError::Toml {
            path: PathBuf::from("<text>"),
            source: Box::new(e),
        })?;
        Self::merge(&HttpArgs::default(), file)
    }

    fn merge(args: &HttpArgs, file: FileConfig) -> Result<Config, ConfigError> {
        let backend = args
            .backend
            .clone()
            .or(file.backend)
            .ok_or_else(|| ConfigError::Invalid("no backend: give --backend URL".into()))?;
        let mut listen = args.listen.clone();
        if listen.is_empty() {
            listen = file.listen.unwrap_or_default();
        }
        let tls = file.tls.unwrap_or_default();
        let listen_unix = file.listen_unix.unwrap_or_default();
        if listen.is_empty() && tls.is_empty() && listen_unix.is_empty() {
            listen.push(SocketAddr::from(([127, 0, 0, 1], 6081)));
        }
        let mut policy = CachePolicy::default();
        let secs = Duration::from_secs;
        if let Some(ttl) = args.default_ttl.or(file.default_ttl) {
            policy.default_ttl = secs(ttl);
        }
        if let Some(grace) = args.grace.or(file.grace) {
            policy.grace = secs(grace);
        }
        if let Some(sie) = args.stale_if_error.or(file.stale_if_error) {
            policy.stale_if_error = secs(sie);
        }
        if file.honour_client_directives == Some(true) {
            policy.client_directives = ClientDirectives::Honour;
        }
        policy.set_cookie = match file.set_cookie.as_deref() {
            None | Some("pass") => SetCookie::Pass,
            Some("strip") => SetCookie::Strip,
            Some("store") => SetCookie::Store,
            Some(other) => {
                return Err(ConfigError::Invalid(format!(
                    "set_cookie: {other:?} is not pass, strip or store"
                )))
            }
        };
        if file.cdn_cache_control == Some(true) {
            policy = policy.with_cdn_cache_control();
        }
        let memory = args.memory.or(file.memory_mb).unwrap_or(256);
        if memory == 0 {
            return Err(ConfigError::Invalid("memory must be at least 1 MiB".into()));
        }
        let memory = memory.saturating_mul(1 << 20);
        let probe_path = args
            .probe
            .clone()
            .or(file.probe.as_ref().and_then(|p| p.path.clone()));
        let probe = match probe_path {
            None => None,
            Some(path) => {
                if !path.starts_with('/') {
                    return Err(ConfigError::Invalid(format!(
                        "probe path {path:?} must start with /"
                    )));
                }
                let p = file.probe.unwrap_or_default();
                Some(Probe {
                    path,
                    interval: secs_f(p.interval.unwrap_or(5.0), "probe.interval")?,
                    timeout: secs_f(p.timeout.unwrap_or(2.0), "probe.timeout")?,
                    threshold: p.threshold.unwrap_or(3).max(1),
                })
            }
        };
        let threads = args
            .threads
            .or(file.threads)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .max(1);
        Ok(Config {
            backend: parse_backend(&backend)?,
            listen,
            listen_unix,
            tls,
            memory,
            admin_listen: args.admin_listen.or(file.admin_listen),
            access_log: args.access_log.clone().or(file.access_log),
            threads,
            policy,
            keep: secs(file.keep.unwrap_or(DEFAULT_KEEP)),
            hit_for_miss: secs(file.hit_for_miss.unwrap_or(120)),
            max_object: file
                .max_object_mb
                .map_or(memory / 8, |mb| mb << 20)
                .min(memory / 8),
            max_in_flight: file.max_in_flight_mb.map_or(64 << 20, |mb| mb << 20),
            max_header: file
                .max_header_kb
                .map_or(32 << 10, |kb| kb << 10)
                .max(8 << 10),
            max_url: file.max_url_bytes.unwrap_or(8 << 10),
            max_connections: file.max_connections.unwrap_or(10_000).max(1),
            connect_timeout: secs_f(file.connect_timeout.unwrap_or(3.5), "connect_timeout")?,
            first_byte_timeout: secs_f(
                file.first_byte_timeout.unwrap_or(60.0),
                "first_byte_timeout",
            )?,
            between_bytes_timeout: secs_f(
                file.between_bytes_timeout.unwrap_or(60.0),
                "between_bytes_timeout",
            )?,
            probe,
        })
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::Toml {
        path: path.to_owned(),
        source: Box::new(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_alone_are_enough() {
        let args = HttpArgs {
            backend: Some("http://127.0.0.1:8080".into()),
            ..HttpArgs::default()
        };
        let config = Config::load(&args).unwrap();
        assert_eq!(config.listen, vec!["127.0.0.1:6081".parse().unwrap()]);
        assert_eq!(config.memory, 256 << 20);
        assert_eq!(config.max_object, 32 << 20);
        assert!(config.probe.is_none());
    }

    #[test]
    fn file_settings() {
        let config = Config::from_toml(
            "backend = \"http://[::1]:9000\"\nmemory_mb = 64\ngrace = 30\nset_cookie = \"strip\"\n\
             cdn_cache_control = true\n[probe]\npath = \"/health\"\ninterval = 0.5\n",
        )
        .unwrap();
        assert_eq!(config.backend.authority().unwrap().as_str(), "[::1]:9000");
        assert_eq!(config.policy.grace, Duration::from_secs(30));
        assert_eq!(config.policy.set_cookie, SetCookie::Strip);
        assert_eq!(config.policy.targeted_fields.len(), 1);
        let probe = config.probe.unwrap();
        assert_eq!(probe.interval, Duration::from_millis(500));
        assert_eq!(probe.threshold, 3);
    }

    /// The example in docs/http.md is a valid file, with every key this version reads.
    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("../../../docs/http.md");
        let start = doc.find("```toml\n").expect("a TOML example") + 8;
        let end = start + doc[start..].find("```").expect("its end");
        let config = Config::from_toml(&doc[start..end]).unwrap();
        assert_eq!(config.tls.len(), 1);
        assert_eq!(config.listen_unix.len(), 1);
        assert_eq!(config.max_connections, 10_000);
        assert_eq!(config.probe.unwrap().path, "/health");
    }

    #[test]
    fn bad_settings_are_refused() {
        for text in [
            "",
            "backend = \"https://x\"",
            "backend = \"http://x/path\"",
            "backend = \"http://x\"\nmemory_mb = 0",
            "backend = \"http://x\"\nunknown = 1",
            "backend = \"http://x\"\nset_cookie = \"eat\"",
            "backend = \"http://x\"\n[probe]\npath = \"health\"",
            "backend = \"http://x\"\nconnect_timeout = -1.0",
        ] {
            assert!(Config::from_toml(text).is_err(), "{text}");
        }
    }
}
