//! The server's settings. Command-line flags (memcached's) and a TOML file
//! (`--config`) both fill this one struct; the defaults are memcached's,
//! except that kura listens on 127.0.0.1 unless told otherwise. The struct
//! is flat (the TOML file's keys are the flags' names); its checks and
//! what it derives are by section: the network, authentication and TLS
//! (net.rs), the limits and the store (limits.rs), and the keyspace: data
//! dir, replication, tables, and the `KeyspaceConfig` built from them
//! (keyspace.rs).

mod flash;
mod keyspace;
mod limits;
mod net;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde::Deserialize;

pub use flash::{parse_ext_path, FlashSettings};
pub use kura_keyspace::TableSpec;

use crate::tls::TlsConfig;

/// memcached's defaults, which are kura's.
pub mod defaults {
    pub const PORT: u16 = 11211;
    pub const LISTEN: &str = "127.0.0.1";
    pub const MEMORY_LIMIT_MB: u64 = 64;
    pub const MAX_CONNECTIONS: usize = 1024;
    pub const THREADS: usize = 4;
    pub const ITEM_SIZE_MAX: usize = 1024 * 1024;
    pub const BACKLOG: u32 = 1024;
    pub const REQS_PER_EVENT: u32 = 20;
    pub const UNIX_MASK: u32 = 0o700;
    /// S3-FIFO: at least ARC's hit ratio on every trace row we measure,
    /// where exact LRU falls far short, and reads that share the shard
    /// lock (bench/results/history.md, "In-process cache").
    pub const EVICTION: &str = "s3fifo";
    /// Log segment size (`--log-file-size`).
    pub const LOG_FILE_SIZE: u64 = 64 * 1024 * 1024;
    pub const REPL_BACKLOG_SIZE: u64 = 16 * 1024 * 1024;
    /// What a full resync from memory may hold beyond the backlog
    /// (`--repl-resync-buffer`): Redis's hard limit on a replica's output
    /// buffer, which covers the same records.
    pub const REPL_RESYNC_BUFFER: u64 = 256 * 1024 * 1024;
    /// Log bytes after which a snapshot is taken (`--snapshot-log-size`).
    pub const SNAPSHOT_LOG_SIZE: u64 = 256 * 1024 * 1024;
    /// Seconds after which a snapshot is taken if anything changed
    /// (`--snapshot-interval`).
    pub const SNAPSHOT_INTERVAL: u64 = 3600;
    /// Seconds the log may fall behind before writers wait
    /// (`--log-max-lag`): what `everysec` and `no` can lose to a crash of
    /// the process, about this plus the last batch.
    pub const LOG_MAX_LAG: f64 = 1.0;
    /// The log's byte bound, when not given: a quarter of a shard's share
    /// of `-m` (the room its arena keeps beyond its budget for blocks
    /// still held, which is where a record waiting for the log keeps its
    /// value), within these limits.
    pub const LOG_MAX_LAG_BYTES_MIN: u64 = 64 * 1024;
    pub const LOG_MAX_LAG_BYTES_MAX: u64 = 64 * 1024 * 1024;
}

/// Which protocols a connection may speak (`-B`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Detect per connection from the first byte.
    #[default]
    Auto,
    /// Text and meta commands only.
    Ascii,
    /// Binary protocol only.
    Binary,
}

/// How a worker serves its plain connections (`-o worker_loop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerLoop {
    /// From the sockets' readiness, in one loop per worker (conn/direct/),
    /// where nothing makes requests wait.
    #[default]
    Direct,
    /// A task per connection.
    Tasks,
}

/// How the process writes its log lines (`-o log_format`, or the `kura`
/// binary's `--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text per event, coloured only on a terminal.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// A name `-o log_format` or `--log-format` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown log format {0:?}: text or json")]
pub struct UnknownLogFormat(pub String);

impl std::str::FromStr for LogFormat {
    type Err = UnknownLogFormat;
    fn from_str(s: &str) -> Result<Self, UnknownLogFormat> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(UnknownLogFormat(other.to_string())),
        }
    }
}

impl WorkerLoop {
    /// The setting's name, as `stats settings` and `-o` spell it.
    pub fn name(self) -> &'static str {
        match self {
            WorkerLoop::Direct => "direct",
            WorkerLoop::Tasks => "tasks",
        }
    }
}

/// A `-B` value memcached does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for binding protocol: {0} -- should be one of auto, binary, or ascii")]
pub struct UnknownProtocol(pub String);

impl std::str::FromStr for Protocol {
    type Err = UnknownProtocol;
    fn from_str(s: &str) -> Result<Self, UnknownProtocol> {
        match s {
            "auto" => Ok(Protocol::Auto),
            "ascii" => Ok(Protocol::Ascii),
            "binary" => Ok(Protocol::Binary),
            other => Err(UnknownProtocol(other.to_string())),
        }
    }
}

impl Protocol {
    /// The name `stats settings` reports, as memcached does.
    pub fn stats_name(self) -> &'static str {
        match self {
            Protocol::Auto => "auto-negotiate",
            Protocol::Ascii => "ascii",
            Protocol::Binary => "binary",
        }
    }
}

/// Everything `kura server` can be told.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// TCP port (`-p`); 0 picks a free port.
    pub port: u16,
    /// Addresses to listen on (`-l`), each `host` or `host:port`.
    pub listen: Vec<String>,
    /// Listen on TCP (`-p 0` turns it off, as in memcached).
    pub tcp: bool,
    /// UDP port (`-U`); 0 is off, unless `udp_free`.
    pub udp_port: u16,
    /// UDP on a free port the system picks (`-U -1`).
    pub udp_free: bool,
    /// Unix socket path (`-s`); replaces the TCP listeners.
    pub unix_socket: Option<PathBuf>,
    /// Permissions of the Unix socket (`-a`), octal.
    pub unix_mask: u32,
    /// Item memory in megabytes (`-m`).
    pub memory_limit: u64,
    /// Simultaneous connections (`-c`).
    pub max_connections: usize,
    /// Worker threads (`-t`).
    pub threads: usize,
    /// Largest item in bytes (`-I`).
    pub item_size_max: usize,
    /// 0 quiet, 1 warnings and errors, 2 commands, 3 internals (`-v`).
    pub verbosity: u8,
    /// Allow the `shutdown` command (`-A`).
    pub enable_shutdown: bool,
    /// Refuse `flush_all` (`-F`).
    pub disable_flush_all: bool,
    /// Refuse `stats cachedump` and `lru_crawler metadump`/`mgdump` (`-X`).
    pub disable_dumping: bool,
    /// Refuse `watch` (`-W`).
    pub disable_watch: bool,
    /// No CAS uniques (`-C`).
    pub disable_cas: bool,
    /// Fail stores with out-of-memory instead of evicting (`-M`).
    pub disable_evictions: bool,
    /// Item memory and index on transparent huge pages (`-L`).
    pub large_pages: bool,
    /// Protocols accepted (`-B`).
    pub protocol: Protocol,
    /// User to switch to when started as root (`-u`).
    pub user: Option<String>,
    /// File to write the process id to (`-P`).
    pub pidfile: Option<PathBuf>,
    /// Listen backlog (`-b`).
    pub backlog: u32,
    /// Requests served per connection before yielding to others (`-R`).
    pub reqs_per_event: u32,
    /// Close connections idle this many seconds; 0 never (`-o idle_timeout`).
    pub idle_timeout: u64,
    /// The worker threads' scheduler time slice in microseconds, 0 for the
    /// kernel's default (`-o worker_slice_us`; kura-sched).
    pub worker_slice_us: u64,
    /// CPUs the worker threads are pinned to, worker `i` to the `i`-th
    /// (wrapping); empty, not pinned (`-o worker_cpulist`; kura-sched).
    pub worker_cpulist: Vec<usize>,
    /// How workers serve plain connections (`-o worker_loop`).
    pub worker_loop: WorkerLoop,
    /// How log lines are written (`-o log_format`).
    pub log_format: LogFormat,
    /// Store shards; 0 picks four per thread.
    pub shards: usize,
    /// Eviction policy of the store.
    pub eviction: String,
    /// Require SASL authentication on the binary protocol (`-S`).
    pub sasl: bool,
    /// Credentials, `user:password` lines (`-Y`): SASL PLAIN's with `-S`,
    /// else the ASCII authentication handshake's.
    pub auth_file: Option<PathBuf>,
    /// TLS on the TCP listeners (`-Z`, `-o ssl_*`), the `[tls]` section.
    pub tls: TlsConfig,
    /// Persist every change here (`--data-dir`); none: in memory only.
    pub data_dir: Option<PathBuf>,
    /// Follow this primary (`--replica-of HOST:PORT`): a read-only replica.
    pub replica_of: Option<String>,
    /// Replicas that must have a write before it is acknowledged
    /// (`--min-replicas-ack`), and how long a write waits for them.
    pub min_replicas_ack: u32,
    pub min_replicas_timeout_ms: u64,
    /// A `user:password` file the replica authenticates to its primary
    /// with (memcached's ASCII authentication, when the primary has `-Y`).
    pub replica_auth_file: Option<PathBuf>,
    /// The replica authenticates with SASL PLAIN over binary (`--replica-sasl`).
    pub replica_sasl: bool,
    /// TLS to the primary (`--replica-tls-*`).
    pub replica_tls: ReplicaTls,
    /// Bytes of the newest records kept in memory for replicas
    /// (`--repl-backlog-size`).
    pub repl_backlog_size: u64,
    /// Bytes a full resync may hold beyond the backlog, in memory or in the
    /// log's files (`--repl-resync-buffer`).
    pub repl_resync_buffer: u64,
    /// When the log reaches the disk: always, everysec, no (`--fsync`).
    pub fsync: String,
    /// Bytes per log file (`--log-file-size`).
    pub log_file_size: u64,
    /// Log bytes after which a snapshot is taken; 0 never by size.
    pub snapshot_log_size: u64,
    /// Seconds after which a snapshot is taken if anything changed; 0 never.
    pub snapshot_interval: u64,
    /// Seconds the update log may fall behind before writers wait.
    pub log_max_lag: f64,
    /// Bytes of records the update log may owe before writers wait; 0
    /// derives it from `-m` (see [`defaults::LOG_MAX_LAG_BYTES_MIN`]).
    pub log_max_lag_bytes: u64,
    /// Fixed-length tables (`--table`, `[[tables]]` in TOML).
    pub tables: Vec<TableSpec>,
    /// Serve Prometheus metrics at `http://ADDR/metrics`
    /// (`--metrics-listen`, `host:port`); none: off.
    pub metrics_listen: Option<String>,
    /// The flash tier (`--ext-path`, `-o ext_*`, `[flash]`); off without
    /// a path.
    pub flash: FlashSettings,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            port: defaults::PORT,
            listen: vec![defaults::LISTEN.to_string()],
            tcp: true,
            udp_port: 0,
            udp_free: false,
            unix_socket: None,
            unix_mask: defaults::UNIX_MASK,
            memory_limit: defaults::MEMORY_LIMIT_MB,
            max_connections: defaults::MAX_CONNECTIONS,
            threads: defaults::THREADS,
            item_size_max: defaults::ITEM_SIZE_MAX,
            verbosity: 0,
            enable_shutdown: false,
            disable_flush_all: false,
            disable_dumping: false,
            disable_watch: false,
            disable_cas: false,
            disable_evictions: false,
            large_pages: false,
            protocol: Protocol::Auto,
            user: None,
            pidfile: None,
            backlog: defaults::BACKLOG,
            reqs_per_event: defaults::REQS_PER_EVENT,
            idle_timeout: 0,
            worker_slice_us: 100,
            worker_cpulist: Vec::new(),
            worker_loop: WorkerLoop::Direct,
            log_format: LogFormat::Text,
            shards: 0,
            eviction: defaults::EVICTION.to_string(),
            sasl: false,
            auth_file: None,
            tls: TlsConfig::default(),
            data_dir: None,
            replica_of: None,
            min_replicas_ack: 0,
            min_replicas_timeout_ms: 1000,
            replica_auth_file: None,
            replica_sasl: false,
            replica_tls: ReplicaTls::default(),
            repl_backlog_size: defaults::REPL_BACKLOG_SIZE,
            repl_resync_buffer: defaults::REPL_RESYNC_BUFFER,
            fsync: "everysec".to_string(),
            log_file_size: defaults::LOG_FILE_SIZE,
            snapshot_log_size: defaults::SNAPSHOT_LOG_SIZE,
            snapshot_interval: defaults::SNAPSHOT_INTERVAL,
            log_max_lag: defaults::LOG_MAX_LAG,
            log_max_lag_bytes: 0,
            tables: Vec::new(),
            metrics_listen: None,
            flash: FlashSettings::default(),
        }
    }
}

/// TLS from a replica to its primary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicaTls {
    /// The CA the primary's certificate is checked against; TLS is on
    /// when it is set.
    pub ca: Option<PathBuf>,
    /// The name the certificate must carry (default: the primary's host).
    pub name: Option<String>,
    /// A client certificate chain and its key.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// A setting that cannot work, with memcached's wording where it has one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("worker_slice_us {0}: 0 (the kernel's), or 100 to 100000 microseconds")]
    WorkerSlice(u64),
    #[error("worker_cpulist: CPU {0} is not one this process may run on (it may use {1})")]
    WorkerCpu(usize, String),
    #[error("Item max size cannot be less than 1024 bytes.")]
    ItemSizeTooSmall,
    #[error("Cannot set item size limit higher than 1 GB.")]
    ItemSizeTooLarge,
    #[error("Cannot set item size limit higher than 1/2 of memory max.")]
    ItemSizeOverHalfMemory,
    #[error("Number of threads must be greater than 0")]
    NoThreads,
    #[error("Maximum connections must be greater than 0")]
    NoConnections,
    #[error("memory limit must be at least 1 megabyte")]
    NoMemory,
    #[error("no listen address given")]
    NoListener,
    #[error("{0}")]
    Eviction(String),
    #[error("You cannot allow the ASCII protocol while requiring SASL authentication")]
    SaslWithAscii,
    #[error("You cannot allow the BINARY protocol while using ascii authentication tokens")]
    AsciiAuthWithBinary,
    #[error("SASL authentication (-S) needs a credentials file: -Y FILE or MEMCACHED_SASL_PWDB")]
    SaslWithoutCredentials,
    #[error("nothing to listen on: -p 0 turns TCP off, and neither -U nor -s is given")]
    NothingToListenOn,
    #[error("UDP (-U) cannot be used with authentication: its requests carry no credentials")]
    UdpWithAuth,
    #[error("TLS (-Z) needs a certificate chain and its key: -o ssl_chain_cert=FILE,ssl_key=FILE")]
    TlsWithoutCert,
    #[error("ssl_verify_mode {0} verifies client certificates and needs the CA that signs them: -o ssl_ca_cert=FILE")]
    VerifyWithoutCa(u8),
    #[error("{0}")]
    Fsync(String),
    #[error("--fsync always acknowledges a write only once it is on disk, which UDP (-U) replies cannot wait for; use TCP")]
    UdpWithFsyncAlways,
    #[error("--log-file-size must be at least 4096 bytes")]
    LogFileTooSmall,
    #[error("--log-max-lag must be 0 to 3600 seconds, not {0}")]
    LogMaxLag(String),
    #[error("table '{0}': {1}")]
    Table(String, String),
    #[error("{0}")]
    Flash(String),
}

impl ServerConfig {
    /// Checks the settings against each other.
    ///
    /// # Errors
    /// The first setting that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_limits()?;
        self.validate_net()?;
        self.validate_flash()?;
        self.validate_keyspace()
    }
}
