//! `kura http`'s settings: command-line flags ([`HttpArgs`]) and the optional TOML file
//! (`--config`), merged into one [`Config`]. A flag given on the command line wins over the
//! file; the file wins over the defaults. The file may name several backends and per-URL
//! rules (`route.rs`). docs/http.md lists every setting.

pub mod backend_tls;
mod bans;
mod cache_status;
mod clients;
mod compression;
pub mod directors;
mod disk;
mod edits;
mod esi_logs;
mod file;
mod keys;
mod parse;
pub mod route;
mod security;
pub mod via;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use toml::Spanned;

use crate::rules::{CachePolicy, ClientDirectives, SetCookie};
pub use backend_tls::{BackendTls, CaFile};
pub use bans::{BansConfig, Cidr, PurgeConfig};
pub use cache_status::CacheStatus;
pub use directors::{HashKey, Policy, ServerSpec, Timeouts, Wait};
pub use disk::{parse_disk_cache, DiskCache, DISK_MAX, DISK_PAGE_MIN};
pub use edits::{Edits, HeaderEdits, Synthetic};
use file::{FileConfig, Source};
pub use route::{parse_backend, BackendAddr, BackendSpec, HostMatch, PathMatch, Route, Rule};
pub use security::{Unkeyed, DEFAULT_KEY_HEADERS, DEFAULT_STRIP_UNKEYED};
pub use via::Via;

/// Run `kura http`, a caching reverse proxy (RFC 9111) in front of one HTTP backend.
#[derive(Args, Debug, Default, Clone)]
pub struct HttpArgs {
    /// The default backend, as http://HOST:PORT or unix:/PATH.
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
    /// A disk tier in directory DIR of SIZE bytes (K, M, G, T suffixes): objects evicted from
    /// memory are kept there, and served again after a restart.
    #[arg(long, value_name = "DIR:SIZE")]
    pub disk_cache: Option<String>,
    /// Write every object to the disk tier when it is stored, not only when memory evicts it
    /// (a SIGKILL then loses none of memory's objects either).
    #[arg(long)]
    pub disk_cache_all: bool,
}

/// Seconds an object with validators is kept past its last permitted use, to be revalidated
/// with a conditional request rather than fetched whole.
pub const DEFAULT_KEEP: u64 = 10;

/// Most header fields in a client's request head: several hundred, far more than any browser
/// or CDN sends (Varnish's default is 64, hyper's 100).
pub const DEFAULT_MAX_HEADERS: usize = 512;

/// A TLS listener: address, certificate chain and private key (PEM).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsListener {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
    /// Whether each connection begins with a PROXY protocol header, before the TLS handshake
    /// (a balancer passing TLS through); only from `trusted_proxies`.
    #[serde(default)]
    pub proxy_protocol: bool,
}

/// Backend health probes (Varnish's `.probe`): a server is healthy while at least
/// `threshold` of its last `window` probes succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Path requested with GET.
    pub path: String,
    /// Time between probes.
    pub interval: Duration,
    /// Time a probe may take.
    pub timeout: Duration,
    /// Probes remembered (1..=64).
    pub window: u32,
    /// Successes among them that make the server healthy.
    pub threshold: u32,
    /// Successes counted at start (`threshold`: it starts healthy).
    pub initial: u32,
    /// The status a success answers with; `None`: any 2xx or 3xx.
    pub expected: Option<http::StatusCode>,
}

/// Everything `kura http` runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The flags it was loaded with (a reload reads the file again with them).
    pub args: HttpArgs,
    /// The backends; the first is the default one (requests no rule routes elsewhere).
    pub backends: Vec<BackendSpec>,
    /// The routes: the first is the top-level settings, then one per rule.
    pub routes: Vec<Route>,
    /// The `[[rule]]`s, in the file's order.
    pub rules: Vec<Rule>,
    /// Plain HTTP listeners.
    pub listen: Vec<SocketAddr>,
    /// Unix-socket listeners (plain HTTP/1.1).
    pub listen_unix: Vec<PathBuf>,
    /// Plain listeners whose connections begin with a PROXY protocol header (v1 or v2).
    pub listen_proxy: Vec<SocketAddr>,
    /// The load balancers: only they may send a PROXY header, and only their
    /// `X-Forwarded-For` names the client (`server/client_addr.rs`).
    pub trusted_proxies: Vec<Cidr>,
    /// TLS listeners (HTTP/2 and HTTP/1.1 by ALPN).
    pub tls: Vec<TlsListener>,
    /// Cache memory in bytes.
    pub memory: usize,
    /// The disk tier (`--disk-cache`), if any.
    pub disk_cache: Option<DiskCache>,
    /// Admin listener.
    pub admin_listen: Option<SocketAddr>,
    /// Access log destination.
    pub access_log: Option<String>,
    /// Its lines' format (`access_log_format`).
    pub access_log_format: crate::access_log::LogFormat,
    /// ESI processing's limits (`[esi]`; each route's `do_esi` turns it on).
    pub esi: crate::esi::EsiSettings,
    /// Worker threads.
    pub threads: usize,
    /// The RFC 9111 rules' settings at the top level (a rule's route may override them).
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
    /// Most header fields in a request head from a client (HTTP/1.x; 431 past it).
    pub max_headers: usize,
    /// Longest request target.
    pub max_url: usize,
    /// Client connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Upgrade requests (WebSocket) piped to the backend at once; 0: none are piped.
    pub max_pipes: usize,
    /// How long a pipe may pass no byte either way before both its connections close
    /// (`pipe_idle_timeout`, Varnish's `pipe_timeout`); `None`: never.
    pub pipe_idle_timeout: Option<Duration>,
    /// This instance's name in `Via`, and the most `Via` entries a request may carry.
    pub via: Via,
    /// Backend connect timeout.
    pub connect_timeout: Duration,
    /// Time until the backend's response head.
    pub first_byte_timeout: Duration,
    /// Time between two reads of a backend body.
    pub between_bytes_timeout: Duration,
    /// Health probes.
    pub probe: Option<Probe>,
    /// Device classes and query parameter counting (`[device]`, `[normalize]`).
    pub keys: crate::keys::KeySettings,
    /// Compressed storage (`[compression]`).
    pub compression: crate::compress::Compression,
    /// Who may PURGE (`[purge]`).
    pub purge: PurgeConfig,
    /// Bans, tags and the lurker (`[bans]`).
    pub bans: BansConfig,
    /// Whether any route keys on cookies (`key_cookies`): only then are responses' `Vary`
    /// fields rewritten for clients.
    pub key_cookies: bool,
    /// Whether any rule edits responses (`response_set`, ...): only then is a response's
    /// route looked up again before delivery.
    pub response_edits: bool,
    /// This cache's `Cache-Status` members (RFC 9211); `None`: the field is not sent.
    pub cache_status: Option<CacheStatus>,
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    // The cause is in the message, not a `source`: printed with its chain, it would be
    // printed twice.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("{path}: {error}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// Why.
        error: Box<toml::de::Error>,
    },
    /// A value is wrong.
    #[error("{0}")]
    Invalid(String),
}

fn secs_f(
    value: Option<Spanned<f64>>,
    default: f64,
    name: &str,
    src: Source<'_>,
) -> Result<Duration, ConfigError> {
    let (value, at) = match value {
        Some(v) => (*v.get_ref(), Some(v.span().start)),
        None => (default, None),
    };
    Duration::try_from_secs_f64(value).map_err(|_| {
        ConfigError::Invalid(format!(
            "{}{name}: {value} is not a duration in seconds",
            src.at(at)
        ))
    })
}

impl Config {
    /// The configuration of `args`, reading `args.config` when given.
    ///
    /// # Errors
    /// An unreadable or invalid file, or an invalid value (the message names its line).
    pub fn load(args: &HttpArgs) -> Result<Config, ConfigError> {
        match &args.config {
            Some(path) => {
                let text = read_file(path)?;
                let file = parse(&text, path)?;
                let name = path.display().to_string();
                Self::merge(
                    args,
                    file,
                    Source {
                        name: &name,
                        text: &text,
                    },
                )
            }
            None => Self::merge(args, FileConfig::default(), Source { name: "", text: "" }),
        }
    }

    /// The configuration of the TOML text `text` (no flags): for tests and tools.
    ///
    /// # Errors
    /// Invalid TOML or values.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let name = "<text>";
        let file = parse(text, Path::new(name))?;
        Self::merge(&HttpArgs::default(), file, Source { name, text })
    }

    /// The route of a request for `host` (lowercase, no port) and `path`: the first rule that
    /// matches, else the top level (index 0 of [`Config::routes`]).
    pub fn route_index(&self, host: Option<&str>, path: &str) -> usize {
        self.rules
            .iter()
            .find(|rule| rule.matches(host, path))
            .map_or(0, |rule| rule.route)
    }

    fn merge(
        args: &HttpArgs,
        mut file: FileConfig,
        src: Source<'_>,
    ) -> Result<Config, ConfigError> {
        let (listen, listen_unix, listen_proxy, trusted_proxies, tls) =
            listeners(args, &mut file, src)?;
        let policy = cache_policy(args, &file, src)?;
        let secs = Duration::from_secs;
        let cache_status = cache_status::read(file.cache_status.as_ref(), src)?;
        let memory = args.memory.or(file.memory_mb).unwrap_or(256);
        if memory == 0 {
            return Err(ConfigError::Invalid("memory must be at least 1 MiB".into()));
        }
        let memory = memory.saturating_mul(1 << 20);
        let probe = parse::probe(args, file.probe, src)?;
        let threads = args
            .threads
            .or(file.threads)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
            .max(1);
        let mut backends = parse::backends(args, file.backend, file.backends, src)?;
        backend_tls::top_ca(&mut backends, file.backend_tls_ca.as_ref(), src)?;
        let (normalize, key_settings) = keys::top(file.normalize, file.device, src)?;
        let purge = bans::purge(file.purge, src)?;
        let bans = bans::bans(file.bans, src)?;
        let mut top = Route {
            normalize,
            backend: 0,
            policy,
            pass: false,
            do_esi: file.do_esi.unwrap_or(false),
            pass_cookie: true,
            pass_authorization: true,
            cookie_ignore: Vec::new(),
            unkeyed: Unkeyed::default(),
            edits: std::sync::Arc::default(),
            key_cookies: Vec::new(),
        };
        let safety = security::SafetyFile {
            cookie: file.cookie.as_ref(),
            authorization: file.authorization.as_ref(),
            cookie_ignore: file.cookie_ignore.as_ref(),
            heuristic_with_credentials: file.heuristic_with_credentials,
            strip_unkeyed: file.strip_unkeyed.as_ref(),
            key_headers: file.key_headers.as_ref(),
            key_headers_always: file.key_headers_always.as_ref(),
            key_device_class: file.key_device_class,
            key_cookies: file.key_cookies.as_ref(),
        };
        security::apply(&mut top, &safety, "", src)?;
        let policy = top.policy.clone();
        let mut routes = vec![top];
        let mut rules = Vec::new();
        for rule in file.rule.unwrap_or_default() {
            rules.push(parse::parse_rule(rule, &backends, &mut routes, src)?);
        }
        if key_settings.device.is_none() && routes.iter().any(|r| r.unkeyed.device_class) {
            return Err(ConfigError::Invalid(
                "key_device_class: device classes are off ([device] enabled = false)".into(),
            ));
        }
        let response_edits = routes.iter().any(|r| !r.edits.response.is_empty());
        let mut esi = esi_logs::esi(file.esi, src)?;
        esi.any = esi.surrogate_control || routes.iter().any(|r| r.do_esi);
        let key_cookies = routes.iter().any(|r| !r.key_cookies.is_empty());
        Ok(Config {
            args: args.clone(),
            backends,
            routes,
            rules,
            listen,
            listen_unix,
            listen_proxy,
            trusted_proxies,
            tls,
            memory,
            disk_cache: disk::read(
                args.disk_cache.as_ref(),
                file.disk_cache.as_ref(),
                (args.disk_cache_all, file.disk_cache_all.as_ref()),
                src,
            )?,
            admin_listen: args.admin_listen.or(file.admin_listen),
            access_log: args.access_log.clone().or(file.access_log),
            access_log_format: esi_logs::log_format(file.access_log_format.as_ref(), src)?,
            esi,
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
            max_headers: file.max_headers.unwrap_or(DEFAULT_MAX_HEADERS).max(1),
            max_url: file.max_url_bytes.unwrap_or(8 << 10),
            max_connections: file.max_connections.unwrap_or(10_000).max(1),
            max_pipes: file.max_pipes.unwrap_or(1000),
            pipe_idle_timeout: Some(secs_f(
                file.pipe_idle_timeout,
                60.0,
                "pipe_idle_timeout",
                src,
            )?)
            .filter(|t| !t.is_zero()),
            via: via::read(file.via_name.as_ref(), file.max_via_hops, src)?,
            connect_timeout: secs_f(file.connect_timeout, 3.5, "connect_timeout", src)?,
            first_byte_timeout: secs_f(file.first_byte_timeout, 60.0, "first_byte_timeout", src)?,
            between_bytes_timeout: secs_f(
                file.between_bytes_timeout,
                60.0,
                "between_bytes_timeout",
                src,
            )?,
            probe,
            keys: key_settings,
            compression: compression::compression(file.compression, src)?,
            purge,
            bans,
            response_edits,
            key_cookies,
            cache_status,
        })
    }
}

/// The top level's cache policy: TTLs, grace, client directives and the
/// response headers that steer storage.
fn cache_policy(
    args: &HttpArgs,
    file: &FileConfig,
    src: Source<'_>,
) -> Result<CachePolicy, ConfigError> {
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
    if let Some(value) = &file.set_cookie {
        policy.set_cookie = match value.get_ref().as_str() {
            "pass" => SetCookie::Pass,
            "strip" => SetCookie::Strip,
            "store" => SetCookie::Store,
            other => {
                return Err(ConfigError::Invalid(format!(
                    "{}set_cookie: {other:?} is not pass, strip or store",
                    src.at(Some(value.span().start))
                )))
            }
        };
    }
    if file.cdn_cache_control == Some(true) {
        policy = policy.with_cdn_cache_control();
    }
    if let Some(read) = file.surrogate_control {
        policy.surrogate_control = read;
    }
    Ok(policy)
}

/// TCP, Unix, PROXY-protocol listeners, trusted proxies, TLS listeners.
type Listeners = (
    Vec<SocketAddr>,
    Vec<std::path::PathBuf>,
    Vec<SocketAddr>,
    Vec<Cidr>,
    Vec<TlsListener>,
);

/// Where to listen: TCP, TLS, Unix sockets and PROXY-protocol listeners
/// (127.0.0.1:6081 when none is given), and the proxies trusted to send
/// PROXY headers.
fn listeners(
    args: &HttpArgs,
    file: &mut FileConfig,
    src: Source<'_>,
) -> Result<Listeners, ConfigError> {
    let mut listen = args.listen.clone();
    if listen.is_empty() {
        listen = file.listen.take().unwrap_or_default();
    }
    let tls = file.tls.take().unwrap_or_default();
    let listen_unix = file.listen_unix.take().unwrap_or_default();
    let (listen_proxy, trusted_proxies) =
        clients::clients(file.listen_proxy.take(), file.trusted_proxies.take(), src)?;
    if tls.iter().any(|t| t.proxy_protocol) && trusted_proxies.is_empty() {
        return Err(ConfigError::Invalid(
            "[[tls]] proxy_protocol: list the load balancers' addresses in trusted_proxies (only they may send a PROXY header)".into(),
        ));
    }
    if listen.is_empty() && tls.is_empty() && listen_unix.is_empty() && listen_proxy.is_empty() {
        listen.push(SocketAddr::from(([127, 0, 0, 1], 6081)));
    }
    Ok((listen, listen_unix, listen_proxy, trusted_proxies, tls))
}

fn read_file(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_owned(),
        error,
    })
}

fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Toml {
        path: path.to_owned(),
        error: Box::new(e),
    })
}

#[cfg(test)]
mod tests;
