//! `kura proxy`'s settings: the quick-start flags ([`ProxyArgs`]) and the
//! TOML file (`--config`), merged into one [`Config`]. docs/proxy.md lists
//! every setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use kura_ring::{Hash, KeyPart, Kind, Ring, Server};
use serde::Deserialize;

pub use crate::limits::Limits;
pub use net::{BackendAuthFile, BackendTlsFile, Net};
pub use routing::{Op, RateLimit, ReadMode};

mod net;
pub mod routing;

/// Run `kura proxy`, a memcached router for text, meta and binary clients.
#[derive(Args, Debug, Default, Clone)]
pub struct ProxyArgs {
    /// Address to listen on (default 127.0.0.1:11311).
    #[arg(long, short = 'l', value_name = "ADDR")]
    pub listen: Option<String>,
    /// The backends of the default pool, comma-separated HOST:PORT[:WEIGHT].
    #[arg(long, value_name = "SERVERS")]
    pub pool: Option<String>,
    /// The pool's placement: libmemcached (ketama, the default), dalli,
    /// twemproxy, ch3, jump.
    #[arg(long, value_name = "KIND")]
    pub ring: Option<String>,
    /// twemproxy's key hash (with --ring twemproxy; default fnv1a_64).
    #[arg(long, value_name = "HASH")]
    pub hash: Option<String>,
    /// TOML configuration file (pools, routes, health, journal).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of the rejoin journals (kept in memory without one).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    /// Address of the Prometheus endpoint (`GET /metrics`; off without it).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Worker threads (default 2).
    #[arg(long, short = 't', value_name = "N")]
    pub threads: Option<usize>,
    /// Check the configuration (the file and the flags) and exit: 0 when
    /// it can be used, else 1 and why (twemproxy's -t, mcrouter's
    /// --validate-config).
    #[arg(long)]
    pub check_config: bool,
    /// Write the kura proxy configuration equivalent to twemproxy's
    /// FILE.yml on standard output, name on standard error what it could
    /// not carry, and exit.
    #[arg(long, value_name = "FILE.yml")]
    pub from_nutcracker: Option<PathBuf>,
    /// Requests one client may have in flight: mcrouter's name for
    /// `[limits] client_max_requests` (0: no bound on the count, the byte
    /// bounds still hold).
    #[arg(long, value_name = "N")]
    pub max_client_outstanding_reqs: Option<usize>,
}

/// What reads of an unavailable backend's keys answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DownReply {
    /// `SERVER_ERROR ...` (binary: temporary failure).
    #[default]
    Error,
    /// A miss.
    Miss,
}

/// What a backend whose journal overflowed gets before it serves again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// `flush_all`: everything it held is dropped.
    #[default]
    Flush,
    /// Kept out until an operator removes its journal file.
    KeepOut,
}

/// How a backend that was away is let back (a ring pool's `rejoin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rejoin {
    /// Its journal's keys are deleted on it first (docs/proxy.md).
    #[default]
    Journal,
    /// That too, and it serves only while its `stats` say it is a kura
    /// replica whose link to its primary is up and caught up (or not a
    /// replica at all): for pools of kura replicas, which get the writes
    /// they missed from their primary, not from the proxy.
    CaughtUp,
}

/// Health and journal settings (TOML `[health]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Health {
    pub connect_timeout_ms: u64,
    pub request_timeout_ms: u64,
    pub failure_limit: u32,
    pub probe_backoff_min_ms: u64,
    pub probe_backoff_max_ms: u64,
    pub down_reply: DownReply,
    /// Connections to each backend per worker thread (each worker has its
    /// own; a client connection uses one of its worker's).
    pub connections_per_backend: usize,
    pub journal_max_keys: usize,
    pub journal_overflow: Overflow,
    /// How often the replication of a `rejoin = "caught-up"` pool's
    /// backends is looked at while they serve.
    pub catch_up_check_ms: u64,
}

impl Default for Health {
    fn default() -> Health {
        Health {
            connect_timeout_ms: 500,
            request_timeout_ms: 1000,
            failure_limit: 3,
            probe_backoff_min_ms: 100,
            probe_backoff_max_ms: 5000,
            down_reply: DownReply::Error,
            connections_per_backend: 1,
            journal_max_keys: 100_000,
            journal_overflow: Overflow::Flush,
            catch_up_check_ms: 500,
        }
    }
}

impl Health {
    /// The backend client's settings (meta protocol to every backend).
    pub fn client_config(&self) -> kura_client::Config {
        kura_client::Config {
            connections_per_server: self.connections_per_backend.max(1),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            failure_limit: self.failure_limit.max(1),
            probe_backoff_min: Duration::from_millis(self.probe_backoff_min_ms),
            probe_backoff_max: Duration::from_millis(self.probe_backoff_max_ms),
            ..Default::default()
        }
    }
}

/// How a replicated pool answers a write sent to every replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// Waits for every replica; the worst reply (docs/proxy.md's order).
    #[default]
    AllSync,
    /// Answers with the first replica's reply; the others are not waited for.
    AllAsync,
    /// Success when more than half the replicas succeeded, else the worst.
    Majority,
    /// mcrouter's AllAsyncRoute: sent to every replica and answered at
    /// once with success, whatever the replicas answer (incr/decr, whose
    /// reply is a number, wait for the first replica as `all-async`).
    FireAndForget,
}

/// A pool in the file (`[pools.NAME]`): servers on a ring, or replicas
/// (other pools, each holding every key).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PoolFile {
    /// HOST:PORT[:WEIGHT][ NAME] (a twemproxy node name after a space).
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default)]
    pub ring: Option<String>,
    #[serde(default)]
    pub hash: Option<String>,
    /// The pools that replicate this one (instead of `servers`).
    #[serde(default)]
    pub replicas: Vec<String>,
    #[serde(default)]
    pub write: WriteMode,
    /// A pool that takes the keys of this pool's unavailable servers.
    #[serde(default)]
    pub gutter: Option<String>,
    /// The longest TTL of a write to the gutter, in seconds (default 10).
    #[serde(default)]
    pub gutter_ttl: Option<u32>,
    /// How its backends are let back after being away.
    #[serde(default)]
    pub rejoin: Rejoin,
    /// twemproxy's `hash_tag`: two characters; a key hashes as what lies
    /// between them (`"{}"`: `user:{42}:name` as `42`).
    #[serde(default)]
    pub hash_tag: Option<String>,
    /// mcrouter's hash stop: a key hashes as what comes before it
    /// (`"|#|"`: `foo:key|#|etc` as `foo:key`).
    #[serde(default)]
    pub hash_stop: Option<String>,
    /// A replicated pool's choice of replica for reads.
    #[serde(default)]
    pub read: ReadMode,
    /// A replicated pool: a retrieval's miss tries the next replica.
    #[serde(default)]
    pub miss_failover: bool,
    /// Requests a second the pool takes (token bucket); more are refused.
    #[serde(default)]
    pub rate_limit: Option<f64>,
    /// Requests the pool takes at once after a quiet while (default: a
    /// second's worth).
    #[serde(default)]
    pub rate_burst: Option<f64>,
}

/// A route in the file (`[[routes]]`): keys starting with `prefix` go to
/// `pool`, reads to `read_pool` and writes to `write_pool` when given; a
/// `shadow_rate` share of the requests is mirrored to `shadow`; `warm`
/// fills `pool` from a warm pool on a miss.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteFile {
    pub prefix: String,
    pub pool: String,
    #[serde(default)]
    pub read_pool: Option<String>,
    #[serde(default)]
    pub write_pool: Option<String>,
    #[serde(default)]
    pub shadow: Option<String>,
    #[serde(default)]
    pub shadow_rate: Option<f64>,
    #[serde(default)]
    pub warm: Option<String>,
    /// A pool per operation (`get = "a"`); the others as above.
    #[serde(default)]
    pub ops: BTreeMap<String, String>,
}

/// A route ready to use: pool indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSpec {
    pub prefix: Vec<u8>,
    pub read: usize,
    pub write: usize,
    pub shadow: Option<(usize, f64)>,
    pub warm: Option<usize>,
    /// The pools of the operations its `ops` names.
    pub ops: Vec<(Op, usize)>,
}

/// The TOML file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub metrics_listen: Option<String>,
    pub threads: Option<usize>,
    pub journal_dir: Option<PathBuf>,
    /// The pool of keys no route names (default: the pool named "default",
    /// or the only pool).
    pub default_pool: Option<String>,
    #[serde(default)]
    pub health: Health,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub pools: BTreeMap<String, PoolFile>,
    #[serde(default)]
    pub routes: Vec<RouteFile>,
    /// TLS for clients: kura server's `[tls]` (config/net.rs).
    pub tls: Option<kura_tls::TlsConfig>,
    pub backend_tls: Option<BackendTlsFile>,
    pub backend_auth: Option<BackendAuthFile>,
    /// The Unix socket's permissions, octal (memcached's `-a`).
    pub unix_mode: Option<String>,
    #[serde(default)]
    pub preconnect: bool,
}

/// A pool ready to build: its name and ring, or its replicas.
#[derive(Debug, Clone)]
pub struct PoolSpec {
    pub name: String,
    pub ring: Option<Ring>,
    /// Indexes of the replica pools (each a ring pool).
    pub replicas: Vec<usize>,
    pub write: WriteMode,
    /// The gutter pool and its TTL cap.
    pub gutter: Option<(usize, u32)>,
    pub rejoin: Rejoin,
    pub read: ReadMode,
    pub miss_failover: bool,
    pub rate_limit: Option<RateLimit>,
}

/// Everything `kura proxy` runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: String,
    pub metrics_listen: Option<String>,
    pub threads: usize,
    pub journal_dir: Option<PathBuf>,
    pub health: Health,
    pub limits: Limits,
    pub pools: Vec<PoolSpec>,
    /// Longest prefix first.
    pub routes: Vec<RouteSpec>,
    pub default_pool: usize,
    /// TLS, logins, the Unix socket's mode, preconnect (config/net.rs).
    pub net: Net,
    /// The file it was read from, read again on SIGHUP.
    pub file: Option<PathBuf>,
    pub args: ProxyArgs,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err(s: impl Into<String>) -> ConfigError {
    ConfigError(s.into())
}

/// Builds a ring from the settings' strings.
pub fn ring(
    kind: Option<&str>,
    hash: Option<&str>,
    servers: &[String],
) -> Result<Ring, ConfigError> {
    let mut k: Kind = kind
        .unwrap_or("libmemcached")
        .parse()
        .map_err(|e| err(format!("{e}")))?;
    if let Some(h) = hash {
        let h = h.parse::<Hash>().map_err(|e| err(format!("{e}")))?;
        k = match k {
            Kind::Twemproxy(_) => Kind::Twemproxy(h),
            Kind::Modula(_) => Kind::Modula(h),
            // twemproxy takes a hash for random too, and uses none.
            Kind::Random => Kind::Random,
            _ => {
                return Err(err(format!(
                    "hash {h:?} is twemproxy's setting; {} has its own",
                    k.name()
                )))
            }
        };
    }
    let servers = servers
        .iter()
        .map(|s| {
            s.trim()
                .parse::<Server>()
                .map_err(|e| err(format!("server {s:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ring::new(k, servers).map_err(|e| err(format!("{e}")))
}

/// The part of a key a pool's ring hashes.
fn key_part(p: &PoolFile) -> Result<KeyPart, ConfigError> {
    match (&p.hash_tag, &p.hash_stop) {
        (Some(_), Some(_)) => Err(err("hash_tag or hash_stop, not both")),
        (Some(t), None) => match t.as_bytes() {
            &[open, close] => Ok(KeyPart::Tag(open, close)),
            _ => Err(err(format!("hash_tag {t:?}: two characters"))),
        },
        (None, Some(s)) if s.is_empty() => Err(err("hash_stop is empty")),
        (None, Some(s)) => Ok(KeyPart::Stop(s.as_bytes().to_vec())),
        (None, None) => Ok(KeyPart::Whole),
    }
}

impl Config {
    /// Reads the file (if any) and applies the flags over it.
    ///
    /// # Errors
    /// An unreadable or invalid file, an unknown ring, hash or pool, or no
    /// pool at all.
    pub fn load(args: &ProxyArgs) -> Result<Config, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        Config::build(args, file)
    }

    fn build(args: &ProxyArgs, mut file: FileConfig) -> Result<Config, ConfigError> {
        if let Some(servers) = &args.pool {
            let servers: Vec<String> = servers.split(',').map(str::to_string).collect();
            file.pools.insert(
                "default".into(),
                PoolFile {
                    servers,
                    ring: args.ring.clone(),
                    hash: args.hash.clone(),
                    ..Default::default()
                },
            );
        } else if args.ring.is_some() || args.hash.is_some() {
            return Err(err("--ring and --hash go with --pool"));
        }
        if file.pools.is_empty() {
            return Err(err(
                "no pool: give --pool HOST:PORT,... or a [pools.NAME] in --config",
            ));
        }
        let names: Vec<&String> = file.pools.keys().collect();
        let index = |name: &str| {
            names
                .iter()
                .position(|p| *p == name)
                .ok_or_else(|| err(format!("no pool named {name:?}")))
        };
        let mut pools = Vec::new();
        for (name, p) in &file.pools {
            let rate_limit = routing::check_pool(name, p)?;
            let spec = if p.replicas.is_empty() {
                let ring = ring(p.ring.as_deref(), p.hash.as_deref(), &p.servers)
                    .and_then(|r| Ok(r.with_key_part(key_part(p)?)))
                    .map_err(|e| err(format!("pool {name}: {e}")))?;
                let gutter = match &p.gutter {
                    Some(g) if g == name => {
                        return Err(err(format!("pool {name}: its own gutter")))
                    }
                    Some(g) => Some((index(g)?, p.gutter_ttl.unwrap_or(10).max(1))),
                    None => None,
                };
                PoolSpec {
                    name: name.clone(),
                    ring: Some(ring),
                    replicas: Vec::new(),
                    write: p.write,
                    gutter,
                    rejoin: p.rejoin,
                    read: p.read,
                    miss_failover: false,
                    rate_limit,
                }
            } else {
                if !p.servers.is_empty()
                    || p.ring.is_some()
                    || p.hash.is_some()
                    || p.hash_tag.is_some()
                    || p.hash_stop.is_some()
                {
                    return Err(err(format!("pool {name}: replicas or servers, not both")));
                }
                let mut replicas = Vec::new();
                for r in &p.replicas {
                    let i = index(r)?;
                    if !file.pools[r].replicas.is_empty() {
                        return Err(err(format!(
                            "pool {name}: replica {r} is itself replicated"
                        )));
                    }
                    replicas.push(i);
                }
                if p.gutter.is_some() {
                    return Err(err(format!(
                        "pool {name}: a replicated pool fails over to its replicas, not a gutter"
                    )));
                }
                if p.rejoin != Rejoin::Journal {
                    return Err(err(format!(
                        "pool {name}: rejoin is set on the pools of servers (its replicas), not on a replicated pool"
                    )));
                }
                PoolSpec {
                    name: name.clone(),
                    ring: None,
                    replicas,
                    write: p.write,
                    gutter: None,
                    rejoin: Rejoin::Journal,
                    read: p.read,
                    miss_failover: p.miss_failover,
                    rate_limit,
                }
            };
            pools.push(spec);
        }
        let default_pool = match &file.default_pool {
            Some(n) => index(n)?,
            None if pools.len() == 1 => 0,
            None => index("default")
                .map_err(|_| err("several pools and no default_pool (or pool named default)"))?,
        };
        let mut routes = Vec::new();
        for r in &file.routes {
            let pool = index(&r.pool)?;
            let shadow = routing::shadow(r, index)?;
            routes.push(RouteSpec {
                prefix: r.prefix.as_bytes().to_vec(),
                read: r.read_pool.as_deref().map_or(Ok(pool), index)?,
                write: r.write_pool.as_deref().map_or(Ok(pool), index)?,
                shadow,
                warm: r.warm.as_deref().map(index).transpose()?,
                ops: routing::ops(&r.prefix, &r.ops, index)?,
            });
        }
        routes.sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
        let net = Net::from_file(&file)?;
        let journal_dir = args.journal_dir.clone().or(file.journal_dir);
        if file.health.journal_overflow == Overflow::KeepOut && journal_dir.is_none() {
            // The operator lets a kept-out backend in by removing its
            // journal file; in memory there is none to remove, and a
            // restart would forget what is kept out and serve it stale.
            return Err(err(
                "journal_overflow = \"keep-out\" needs a journal directory (--journal-dir or journal_dir): a backend kept out is let in by removing its journal file, and a journal in memory only has no file and is forgotten by a restart",
            ));
        }
        Ok(Config {
            net,
            listen: args
                .listen
                .clone()
                .or(file.listen)
                .unwrap_or_else(|| "127.0.0.1:11311".into()),
            metrics_listen: args.metrics_listen.clone().or(file.metrics_listen),
            threads: args.threads.or(file.threads).unwrap_or(2).max(1),
            journal_dir,
            health: file.health,
            limits: routing::client_limits(args, file.limits),
            pools,
            routes,
            default_pool,
            file: args.config.clone(),
            args: args.clone(),
        })
    }

    /// The same flags over the file as it is now (SIGHUP).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn reload(&self) -> Result<Config, ConfigError> {
        Config::load(&self.args)
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(format!("reading {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| err(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests;
