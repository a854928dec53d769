//! `kura server`'s command line: memcached's flags with memcached's
//! meanings, plus kura's own long options. Flags override `--config`.

use std::path::PathBuf;

use clap::{ArgAction, Args};

use crate::config::{Protocol, ServerConfig};
use crate::tls::{MinVersion, VerifyMode};

/// memcached `-o` sub-options that tune memcached internals kura does not
/// have (slab allocator, segmented LRU maintainer, extstore...). They are
/// accepted so existing command lines keep working, and ignored with a
/// warning.
const IGNORED_SUBOPTIONS: &[&str] = &[
    "maxconns_fast",
    "no_maxconns_fast",
    "hashpower",
    "tail_repair_time",
    "hash_algorithm",
    "lru_crawler",
    "no_lru_crawler",
    "lru_crawler_sleep",
    "lru_crawler_tocrawl",
    "read_buf_mem_limit",
    "resp_obj_mem_limit",
    "lru_maintainer",
    "no_lru_maintainer",
    "hot_lru_pct",
    "warm_lru_pct",
    "hot_max_factor",
    "warm_max_factor",
    "temporary_ttl",
    "temp_lru",
    "slab_chunk_max",
    "slab_reassign",
    "slab_automove",
    "slab_automove_ratio",
    "slab_automove_window",
    "slab_automove_freeratio",
    "watcher_logbuf_size",
    "worker_logbuf_size",
    "track_sizes",
    "no_hashexpand",
    "modern",
    "no_modern",
    "inline_ascii_resp",
    "no_inline_ascii_resp",
    "sock_cookie_id",
    "drop_privileges",
    "no_drop_privileges",
    "large_memory_pages",
    "meta_response_old",
];

/// The flags of `kura server`.
#[derive(Debug, Clone, Default, Args)]
// A flag given again overrides the earlier one, as in memcached (init
// scripts append overrides to a default command line); `-l`, `-o`,
// `--table` and `-v` accumulate.
#[command(
    args_override_self = true,
    after_help = "kura listens on 127.0.0.1 unless -l says otherwise, and serves UDP only when -U names a port."
)]
pub struct ServerArgs {
    /// TCP port to listen on (default: 11211); -1: a free port (see
    /// MEMCACHED_PORT_FILENAME); 0: no TCP
    #[arg(
        short = 'p',
        long = "port",
        value_name = "num",
        allow_negative_numbers = true,
        value_parser = parse_port
    )]
    pub port: Option<CliPort>,
    /// UDP port to listen on (default: 0, off); -1: a free port. Given
    /// without -p, TCP listens on the same port
    #[arg(
        short = 'U',
        long = "udp-port",
        value_name = "num",
        allow_negative_numbers = true,
        value_parser = parse_port
    )]
    pub udp_port: Option<CliPort>,
    /// UNIX socket to listen on (disables network support)
    #[arg(short = 's', long = "unix-socket", value_name = "file")]
    pub unix_socket: Option<PathBuf>,
    /// access mask for UNIX socket, in octal (default: 700)
    #[arg(short = 'a', long = "unix-mask", value_name = "mask")]
    pub unix_mask: Option<String>,
    /// enable ascii "shutdown" command
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// interface to listen on (default: 127.0.0.1); repeat or separate with
    /// commas for several, each `addr` or `addr:port`
    #[arg(short = 'l', long = "listen", value_name = "addr")]
    pub listen: Vec<String>,
    /// run as a daemon
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// maximize core file limit
    #[arg(short = 'r', long = "enable-coredumps")]
    pub enable_coredumps: bool,
    /// assume identity of <username> (only when run as root)
    #[arg(short = 'u', long = "user", value_name = "user")]
    pub user: Option<String>,
    /// item memory in megabytes (default: 64)
    #[arg(short = 'm', long = "memory-limit", value_name = "num")]
    pub memory_limit: Option<u64>,
    /// return error on memory exhausted instead of evicting
    #[arg(short = 'M', long = "disable-evictions")]
    pub disable_evictions: bool,
    /// max simultaneous connections (default: 1024)
    #[arg(short = 'c', long = "conn-limit", value_name = "num")]
    pub conn_limit: Option<usize>,
    /// lock down all paged memory
    #[arg(short = 'k', long = "lock-memory")]
    pub lock_memory: bool,
    /// verbose (print errors/warnings); -vv also prints client commands;
    /// -vvv internal state transitions
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count)]
    pub verbose: u8,
    /// print version (memcached's line, then kura's) and exit
    #[arg(short = 'V', long = "version")]
    pub version: bool,
    /// save PID in <file>
    #[arg(short = 'P', long = "pidfile", value_name = "file")]
    pub pidfile: Option<PathBuf>,
    /// chunk size growth factor (accepted for compatibility; kura has no slabs)
    #[arg(short = 'f', long = "slab-growth-factor", value_name = "num")]
    pub slab_growth_factor: Option<f64>,
    /// min space used for key+value+flags (accepted for compatibility)
    #[arg(short = 'n', long = "slab-min-size", value_name = "bytes")]
    pub slab_min_size: Option<u64>,
    /// try to use large memory pages (transparent huge pages for the item
    /// memory and its index, as memcached asks for them on Linux)
    #[arg(short = 'L', long = "enable-largepages")]
    pub enable_largepages: bool,
    /// delimiter between key prefixes and IDs for per-prefix stats
    /// (accepted for compatibility; kura has no per-prefix stats)
    #[arg(short = 'D', value_name = "char")]
    pub prefix_delimiter: Option<String>,
    /// number of threads to use (default: 4)
    #[arg(short = 't', long = "threads", value_name = "num")]
    pub threads: Option<usize>,
    /// maximum number of requests per event, limits the requests processed
    /// per connection to prevent starvation (default: 20)
    #[arg(short = 'R', long = "max-reqs-per-event", value_name = "num")]
    pub max_reqs_per_event: Option<u32>,
    /// disable use of CAS
    #[arg(short = 'C', long = "disable-cas")]
    pub disable_cas: bool,
    /// set the backlog queue limit (default: 1024)
    #[arg(short = 'b', long = "listen-backlog", value_name = "num")]
    pub listen_backlog: Option<u32>,
    /// protocol - one of ascii, binary, or auto (default: auto-negotiate)
    #[arg(short = 'B', long = "protocol", value_name = "name")]
    pub protocol: Option<String>,
    /// adjusts max item size (default: 1m, min: 1k, max: 1024m)
    #[arg(short = 'I', long = "max-item-size", value_name = "num")]
    pub max_item_size: Option<String>,
    /// disable flush_all command
    #[arg(short = 'F', long = "disable-flush-all")]
    pub disable_flush_all: bool,
    /// disable stats cachedump and lru_crawler metadump
    #[arg(short = 'X', long = "disable-dumping")]
    pub disable_dumping: bool,
    /// disable watch commands (live logging)
    #[arg(short = 'W', long = "disable-watch")]
    pub disable_watch: bool,
    /// turn on SASL authentication (PLAIN, binary protocol; credentials
    /// from -Y or $MEMCACHED_SASL_PWDB)
    #[arg(short = 'S', long = "enable-sasl")]
    pub enable_sasl: bool,
    /// enable ASCII protocol authentication. format: user:pass\n lines
    /// (with -S: the SASL credentials instead)
    #[arg(short = 'Y', long = "auth-file", value_name = "file")]
    pub auth_file: Option<PathBuf>,
    /// enable TLS/SSL on every TCP listener except those given as
    /// `-l notls:<addr>`; needs -o ssl_chain_cert, ssl_key
    #[arg(short = 'Z', long = "enable-ssl")]
    pub enable_ssl: bool,
    /// comma separated list of extended options: idle_timeout=<secs> closes
    /// idle connections; worker_slice_us=<us> the worker threads' scheduler
    /// time slice (100 by default; 0 the kernel's); worker_cpulist=<cpus>
    /// pins worker i to the i-th CPU of a list of CPUs and ranges, colon
    /// separated (0-3:8; not pinned by default); worker_loop=<direct|tasks>
    /// how workers serve plain connections (direct: from the sockets'
    /// readiness, the default; tasks: a task each); log_format=<text|json>
    /// log lines as text (coloured only on a terminal) or one JSON object
    /// each; ssl_chain_cert=<file> (PEM, leaf first),
    /// ssl_key=<file> (PEM), ssl_ca_cert=<file> (PEM CAs for client
    /// certificates), ssl_verify_mode=<0|1|2|3> (none, request, require,
    /// once), ssl_min_version=<0|1|2|3> (tlsv1.0 to tlsv1.3; kura's floor is
    /// tlsv1.2); memcached's tuning options for its slab allocator and LRU
    /// maintainer are accepted and ignored
    #[arg(short = 'o', long = "extended", value_name = "opts")]
    pub extended: Vec<String>,
    /// read settings from a TOML file (flags given here win)
    #[arg(long = "config", value_name = "file")]
    pub config: Option<PathBuf>,
    /// read memcached's flags from a Debian-style memcached.conf, one flag
    /// per line (-d and logfile are ignored); flags after it win
    #[arg(long = "memcached-conf", value_name = "file")]
    pub memcached_conf: Option<PathBuf>,
    /// number of store shards, a power of two (default: 4 per thread)
    #[arg(long = "shards", value_name = "num")]
    pub shards: Option<usize>,
    /// eviction policy: s3fifo (default, scan-resistant), lru (exact
    /// LRU), tinylfu (W-TinyLFU), sieve; none never evicts (a store, not a
    /// cache: when full, writes get SERVER_ERROR out of memory, as with -M)
    #[arg(long = "eviction", value_name = "policy")]
    pub eviction: Option<String>,
    /// durable mode: log every change to this directory and recover from it
    /// at startup (default: in memory only)
    #[arg(long = "data-dir", value_name = "dir")]
    pub data_dir: Option<PathBuf>,
    /// follow this primary's update log and serve reads only (the primary
    /// needs --data-dir; see docs/replication.md)
    #[arg(long = "replica-of", value_name = "host:port")]
    pub replica_of: Option<String>,
    /// with --replica-of: a file whose first `user:password` line the
    /// replica authenticates with (when the primary runs with -Y)
    #[arg(long = "replica-auth-file", value_name = "file")]
    pub replica_auth_file: Option<PathBuf>,
    /// with --replica-of: authenticate with SASL PLAIN over the binary
    /// protocol (a primary with -S), with the --replica-auth-file
    /// credentials
    #[arg(long = "replica-sasl")]
    pub replica_sasl: bool,
    /// with --replica-of: connect to the primary with TLS, checking its
    /// certificate against this CA (PEM)
    #[arg(long = "replica-tls-ca", value_name = "file")]
    pub replica_tls_ca: Option<PathBuf>,
    /// with --replica-tls-ca: the name the primary's certificate must carry
    /// (default: the host of --replica-of)
    #[arg(long = "replica-tls-name", value_name = "name")]
    pub replica_tls_name: Option<String>,
    /// with --replica-tls-ca: a client certificate chain and key (PEM) for
    /// a primary that verifies its clients
    #[arg(
        long = "replica-tls-cert",
        value_name = "file",
        requires = "replica_tls_key"
    )]
    pub replica_tls_cert: Option<PathBuf>,
    #[arg(
        long = "replica-tls-key",
        value_name = "file",
        requires = "replica_tls_cert"
    )]
    pub replica_tls_key: Option<PathBuf>,
    /// bytes of the newest update-log records kept in memory for replicas
    /// to resume from, with an optional k, m or g suffix (default 16m); a
    /// server without --data-dir has no other backlog
    #[arg(long = "repl-backlog-size", value_name = "bytes")]
    pub repl_backlog_size: Option<String>,
    /// bytes of records written while a full resync is sent that are kept
    /// for it beyond --repl-backlog-size, in memory (or in the log's files
    /// with --data-dir) (default 256m); a resync that needs more is cut off
    /// and the replica tries again
    #[arg(long = "repl-resync-buffer", value_name = "bytes")]
    pub repl_resync_buffer: Option<String>,
    /// acknowledge a write only once this many replicas have it (each
    /// under its own --fsync); 0 (default) does not wait
    #[arg(long = "min-replicas-ack", value_name = "n")]
    pub min_replicas_ack: Option<u32>,
    /// with --min-replicas-ack: milliseconds a write waits for its replicas
    /// before the client gets SERVER_ERROR (default 1000)
    #[arg(long = "min-replicas-timeout", value_name = "ms")]
    pub min_replicas_timeout: Option<u64>,
    /// with --data-dir: always (acknowledge a write once it is on disk,
    /// group commit), everysec (default; sync at most a second apart), no
    /// (leave it to the OS)
    #[arg(long = "fsync", value_name = "policy")]
    pub fsync: Option<String>,
    /// with --data-dir: bytes per log file, with an optional k, m or g
    /// suffix (default 64m)
    #[arg(long = "log-file-size", value_name = "bytes")]
    pub log_file_size: Option<String>,
    /// with --data-dir: take a snapshot after this many log bytes, with an
    /// optional k, m or g suffix; 0 never by size (default 256m)
    #[arg(long = "snapshot-log-size", value_name = "bytes")]
    pub snapshot_log_size: Option<String>,
    /// with --data-dir: take a snapshot this many seconds after the last if
    /// anything changed; 0 never by time (default 3600)
    #[arg(long = "snapshot-interval", value_name = "secs")]
    pub snapshot_interval: Option<u64>,
    /// with --data-dir: how many seconds the update log may fall behind
    /// the writes before writers wait for it, decimals allowed; under
    /// everysec and no, about what a crash of the process can lose
    /// (default 1)
    #[arg(long = "log-max-lag", value_name = "secs")]
    pub log_max_lag: Option<f64>,
    /// with --data-dir: how many bytes of records the update log may owe
    /// before writers wait for it, with an optional k, m or g suffix
    /// (default: a quarter of a shard's share of -m, 64k to 64m)
    #[arg(long = "log-max-lag-bytes", value_name = "bytes")]
    pub log_max_lag_bytes: Option<String>,
    /// a fixed-length table for dense integer ids, NAME:width=BYTES:max=ID
    /// [:path=FILE]; its records are the keys NAME:1 to NAME:max (repeat for
    /// more tables; see docs/tables.md)
    #[arg(long = "table", value_name = "spec")]
    pub table: Vec<String>,
    /// serve Prometheus metrics at http://ADDR/metrics (host:port, e.g.
    /// 127.0.0.1:9150), named as memcached_exporter names them (default:
    /// off)
    #[arg(long = "metrics-listen", value_name = "addr")]
    pub metrics_listen: Option<String>,
}

/// A command line that cannot be turned into settings.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("Illegal suboption \"{0}\"")]
    IllegalSuboption(String),
    #[error("invalid value for -o {0}: {1}")]
    BadSuboption(String, String),
    #[error(
        "invalid max item size '{0}': expected a number of bytes with an optional k or m suffix"
    )]
    BadItemSize(String),
    #[error("invalid {0} '{1}': expected a number of bytes with an optional k, m or g suffix")]
    BadBytes(&'static str, String),
    #[error("{0}")]
    Table(String),
    #[error("invalid unix socket mask '{0}': expected an octal number")]
    BadMask(String),
    #[error("{0}")]
    Protocol(String),
    #[error("{0} is not available yet in kura")]
    Unsupported(&'static str),
    #[error("-o {0} is not supported by kura's TLS (rustls); kura takes ssl_chain_cert, ssl_key, ssl_ca_cert, ssl_verify_mode, ssl_min_version, ssl_keyformat=1 (PEM), ssl_session_cache and ssl_wbuf_size (ignored)")]
    UnsupportedSsl(String),
    #[error("cannot read config file {0}: {1}")]
    ConfigRead(PathBuf, std::io::Error),
    #[error("invalid config file {0}: {1}")]
    ConfigParse(PathBuf, toml::de::Error),
}

/// A `-p` or `-U` value, as memcached reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliPort {
    /// `0`: no listener of that kind.
    Off,
    /// `-1`: a free port the system picks.
    Free,
    /// A port.
    At(u16),
}

fn parse_port(s: &str) -> Result<CliPort, String> {
    match s {
        "-1" => return Ok(CliPort::Free),
        "0" => return Ok(CliPort::Off),
        _ => {}
    }
    s.parse()
        .map(CliPort::At)
        .map_err(|_| format!("'{s}' is not a port: expected 0 to 65535, or -1"))
}

/// Parses `-I` values: bytes, or with a `k`/`m` suffix.
pub fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// Applies one `-o ssl_*` sub-option, memcached's names and values.
fn ssl_suboption(
    c: &mut ServerConfig,
    name: &str,
    value: &str,
    warnings: &mut Vec<String>,
) -> Result<(), CliError> {
    let bad = || CliError::BadSuboption(name.into(), value.into());
    let path = || {
        if value.is_empty() {
            Err(bad())
        } else {
            Ok(Some(PathBuf::from(value)))
        }
    };
    match name {
        "ssl_chain_cert" => c.tls.chain_cert = path()?,
        "ssl_key" => c.tls.key = path()?,
        "ssl_ca_cert" => c.tls.ca_cert = path()?,
        "ssl_verify_mode" => {
            let n: u8 = value.parse().map_err(|_| bad())?;
            c.tls.verify_mode = VerifyMode::try_from(n).map_err(|_| bad())?;
        }
        "ssl_min_version" => {
            let n: u8 = value.parse().map_err(|_| bad())?;
            c.tls.min_version = MinVersion::try_from(n).map_err(|_| bad())?;
            if n < 2 {
                warnings.push(format!(
                    "-o ssl_min_version={n}: kura (rustls) speaks TLS 1.2 and 1.3 only; the minimum is tlsv1.2"
                ));
            }
        }
        // 1 is OpenSSL's PEM, the only format kura reads.
        "ssl_keyformat" if value == "1" => {}
        // rustls always keeps a server-side session cache.
        "ssl_session_cache" => {}
        "ssl_wbuf_size" => {
            value.parse::<u32>().map_err(|_| bad())?;
            warnings.push("-o ssl_wbuf_size tunes memcached's TLS buffers; kura ignores it".into());
        }
        other => return Err(CliError::UnsupportedSsl(other.to_string())),
    }
    Ok(())
}

/// What the process should do besides serving (applied by the binary
/// before and after the server binds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessOptions {
    pub daemonize: bool,
    pub enable_coredumps: bool,
    pub lock_memory: bool,
}

impl ServerArgs {
    /// The settings these flags ask for, on top of `--config` if given,
    /// and the warnings to log once logging is up.
    ///
    /// # Errors
    /// A flag, sub-option or config file that cannot be used.
    pub fn into_config(self) -> Result<(ServerConfig, ProcessOptions, Vec<String>), CliError> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| CliError::ConfigRead(path.clone(), e))?;
                toml::from_str(&text).map_err(|e| CliError::ConfigParse(path.clone(), e))?
            }
            None => ServerConfig::default(),
        };
        let mut warnings = Vec::new();
        c.sasl |= self.enable_sasl;
        if let Some(p) = self.auth_file {
            c.auth_file = Some(p);
        }
        c.tls.enabled |= self.enable_ssl;
        // memcached: -U given without -p moves TCP to the UDP port too.
        let tcp_port = match (self.port, self.udp_port) {
            (None, Some(udp)) if udp != CliPort::Off => Some(udp),
            (tcp, _) => tcp,
        };
        match tcp_port {
            Some(CliPort::Off) => c.tcp = false,
            Some(CliPort::Free) => (c.tcp, c.port) = (true, 0),
            Some(CliPort::At(n)) => (c.tcp, c.port) = (true, n),
            None => {}
        }
        match self.udp_port {
            Some(CliPort::Off) => (c.udp_port, c.udp_free) = (0, false),
            Some(CliPort::Free) => (c.udp_port, c.udp_free) = (0, true),
            Some(CliPort::At(n)) => (c.udp_port, c.udp_free) = (n, false),
            None => {}
        }
        if let Some(v) = self.unix_socket {
            c.unix_socket = Some(v);
        }
        if let Some(m) = self.unix_mask {
            c.unix_mask = u32::from_str_radix(&m, 8).map_err(|_| CliError::BadMask(m))?;
        }
        c.enable_shutdown |= self.enable_shutdown;
        if !self.listen.is_empty() {
            c.listen = self
                .listen
                .iter()
                .flat_map(|l| l.split(','))
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(v) = self.user {
            c.user = Some(v);
        }
        if let Some(v) = self.memory_limit {
            c.memory_limit = v;
        }
        c.disable_evictions |= self.disable_evictions;
        if let Some(v) = self.conn_limit {
            c.max_connections = v;
        }
        c.verbosity = c.verbosity.max(self.verbose);
        if let Some(v) = self.pidfile {
            c.pidfile = Some(v);
        }
        if let Some(v) = self.threads {
            c.threads = v;
        }
        if let Some(v) = self.max_reqs_per_event {
            c.reqs_per_event = v;
        }
        c.disable_cas |= self.disable_cas;
        c.large_pages |= self.enable_largepages;
        if let Some(v) = self.listen_backlog {
            c.backlog = v;
        }
        if let Some(p) = self.protocol {
            c.protocol = p.parse::<Protocol>().map_err(CliError::Protocol)?;
        }
        if let Some(s) = self.max_item_size {
            c.item_size_max = parse_size(&s).ok_or(CliError::BadItemSize(s))?;
        }
        c.disable_flush_all |= self.disable_flush_all;
        c.disable_dumping |= self.disable_dumping;
        c.disable_watch |= self.disable_watch;
        if let Some(v) = self.shards {
            c.shards = v;
        }
        if let Some(v) = self.eviction {
            c.eviction = v;
        }
        if let Some(v) = self.data_dir {
            c.data_dir = Some(v);
        }
        if let Some(v) = self.replica_of {
            c.replica_of = Some(v);
        }
        if let Some(v) = self.min_replicas_ack {
            c.min_replicas_ack = v;
        }
        if let Some(v) = self.min_replicas_timeout {
            c.min_replicas_timeout_ms = v;
        }
        if let Some(v) = self.replica_auth_file {
            c.replica_auth_file = Some(v);
        }
        c.replica_sasl |= self.replica_sasl;
        if self.replica_tls_ca.is_some() {
            c.replica_tls.ca = self.replica_tls_ca;
        }
        if self.replica_tls_name.is_some() {
            c.replica_tls.name = self.replica_tls_name;
        }
        if self.replica_tls_cert.is_some() {
            c.replica_tls.cert = self.replica_tls_cert;
            c.replica_tls.key = self.replica_tls_key;
        }
        if let Some(v) = self.fsync {
            c.fsync = v;
        }
        if let Some(s) = self.repl_backlog_size {
            c.repl_backlog_size =
                parse_bytes(&s).ok_or(CliError::BadBytes("--repl-backlog-size", s))?;
        }
        if let Some(s) = self.repl_resync_buffer {
            c.repl_resync_buffer =
                parse_bytes(&s).ok_or(CliError::BadBytes("--repl-resync-buffer", s))?;
        }
        if let Some(s) = self.log_file_size {
            c.log_file_size = parse_bytes(&s).ok_or(CliError::BadBytes("--log-file-size", s))?;
        }
        if let Some(s) = self.snapshot_log_size {
            c.snapshot_log_size =
                parse_bytes(&s).ok_or(CliError::BadBytes("--snapshot-log-size", s))?;
        }
        if let Some(v) = self.snapshot_interval {
            c.snapshot_interval = v;
        }
        if let Some(v) = self.log_max_lag {
            c.log_max_lag = v;
        }
        if let Some(s) = self.log_max_lag_bytes {
            c.log_max_lag_bytes =
                parse_bytes(&s).ok_or(CliError::BadBytes("--log-max-lag-bytes", s))?;
        }
        if let Some(v) = self.metrics_listen {
            c.metrics_listen = Some(v);
        }
        for t in self.table {
            c.tables.push(t.parse().map_err(CliError::Table)?);
        }
        for (flag, given) in [
            ("-f", self.slab_growth_factor.is_some()),
            ("-n", self.slab_min_size.is_some()),
            ("-D", self.prefix_delimiter.is_some()),
        ] {
            if given {
                warnings.push(format!(
                    "{flag} tunes memcached's slab allocator or prefix stats; kura ignores it"
                ));
            }
        }
        for opt in self
            .extended
            .iter()
            .flat_map(|o| o.split(','))
            .filter(|o| !o.is_empty())
        {
            let (name, value) = opt.split_once('=').unwrap_or((opt, ""));
            match name {
                "idle_timeout" => {
                    c.idle_timeout = value
                        .parse()
                        .map_err(|_| CliError::BadSuboption(name.into(), value.into()))?;
                }
                "worker_loop" => {
                    c.worker_loop = match value {
                        "direct" => crate::config::WorkerLoop::Direct,
                        "tasks" => crate::config::WorkerLoop::Tasks,
                        _ => return Err(CliError::BadSuboption(name.into(), value.into())),
                    };
                }
                "log_format" => {
                    c.log_format = value
                        .parse()
                        .map_err(|_| CliError::BadSuboption(name.into(), value.into()))?;
                }
                "worker_cpulist" => {
                    c.worker_cpulist = kura_sched::parse_cpulist(value)
                        .map_err(|_| CliError::BadSuboption(name.into(), value.into()))?;
                }
                "worker_slice_us" => {
                    c.worker_slice_us = match value.parse() {
                        Ok(us) if kura_sched::valid_setting(us) => us,
                        _ => return Err(CliError::BadSuboption(name.into(), value.into())),
                    };
                }
                n if n.starts_with("ssl_") => ssl_suboption(&mut c, n, value, &mut warnings)?,
                n if n.starts_with("ext_") => {
                    return Err(CliError::Unsupported("external storage (-o ext_*)"))
                }
                n if IGNORED_SUBOPTIONS.contains(&n) => {
                    warnings.push(format!("-o {n} tunes memcached internals; kura ignores it"));
                }
                other => return Err(CliError::IllegalSuboption(other.to_string())),
            }
        }
        let tls_files = [&c.tls.chain_cert, &c.tls.key, &c.tls.ca_cert];
        if !c.tls.enabled && tls_files.iter().any(|f| f.is_some()) {
            warnings.push("-o ssl_* options have no effect without -Z".into());
        }
        if c.tls.enabled && c.unix_socket.is_some() {
            warnings.push("-Z does not apply to the Unix socket (-s): it stays plain".into());
        }
        if c.tls.enabled && c.udp_port != 0 {
            warnings.push("-Z does not apply to UDP (-U): it stays plain".into());
        }
        let process = ProcessOptions {
            daemonize: self.daemon,
            enable_coredumps: self.enable_coredumps,
            lock_memory: self.lock_memory,
        };
        Ok((c, process, warnings))
    }
}

/// A byte count with an optional k, m or g suffix (powers of 1024).
fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 10),
        (i, 'm' | 'M') => (&t[..i], 20),
        (i, 'g' | 'G') => (&t[..i], 30),
        _ => (t, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WorkerLoop;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        args: ServerArgs,
    }

    fn parse(args: &[&str]) -> Result<ServerConfig, String> {
        let cmd = Cmd::try_parse_from(std::iter::once("kura").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cmd.args
            .into_config()
            .map(|(c, _, _)| c)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn memcached_flags() {
        let c = parse(&[
            "-p",
            "22122",
            "-m",
            "128",
            "-c",
            "10",
            "-t",
            "2",
            "-vv",
            "-A",
            "-I",
            "2m",
            "-l",
            "0.0.0.0,::1",
        ])
        .unwrap();
        assert_eq!(c.port, 22122);
        assert_eq!(c.memory_limit, 128);
        assert_eq!(c.max_connections, 10);
        assert_eq!(c.threads, 2);
        assert_eq!(c.verbosity, 2);
        assert!(c.enable_shutdown);
        assert_eq!(c.item_size_max, 2 * 1024 * 1024);
        assert_eq!(c.listen, vec!["0.0.0.0", "::1"]);
    }

    #[test]
    fn large_pages_from_the_flag_and_the_file_reach_the_store() {
        assert!(!parse(&[]).unwrap().store_config().huge_pages);
        for args in [&["-L"][..], &["--enable-largepages"], &["-L", "-L"]] {
            assert!(parse(args).unwrap().store_config().huge_pages, "{args:?}");
        }
        let t: ServerConfig = toml::from_str("large_pages = true").unwrap();
        assert!(t.store_config().huge_pages);
        // -L is no longer among the flags kura accepts and ignores.
        let cmd = Cmd::try_parse_from(["kura", "-L"]).unwrap();
        let (_, _, warnings) = cmd.args.into_config().unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn repl_resync_buffer_takes_sizes_and_refuses_anything_else() {
        assert_eq!(parse(&[]).unwrap().repl_resync_buffer, 256 << 20);
        let c = parse(&["--repl-resync-buffer", "64m"]).unwrap();
        assert_eq!(c.resync_buffer_bytes(), 64 << 20);
        assert_eq!(
            parse(&["--repl-resync-buffer", "0"])
                .unwrap()
                .repl_resync_buffer,
            0
        );
        let e = parse(&["--repl-resync-buffer", "lots"]).unwrap_err();
        assert!(
            e.contains("--repl-resync-buffer") && e.contains("lots"),
            "{e}"
        );
        let t: ServerConfig = toml::from_str("repl_resync_buffer = 1048576").unwrap();
        assert_eq!(t.repl_resync_buffer, 1 << 20);
    }

    #[test]
    fn metrics_listen() {
        assert_eq!(parse(&[]).unwrap().metrics_listen, None);
        let c = parse(&["--metrics-listen", "127.0.0.1:9150"]).unwrap();
        assert_eq!(c.metrics_listen.as_deref(), Some("127.0.0.1:9150"));
        let t: ServerConfig = toml::from_str("metrics_listen = \"[::1]:9150\"").unwrap();
        assert_eq!(t.metrics_listen.as_deref(), Some("[::1]:9150"));
    }

    #[test]
    fn a_repeated_flag_takes_the_last_value() {
        let c = parse(&[
            "-m",
            "64",
            "-p",
            "1",
            "-c",
            "10",
            "-t",
            "1",
            "-I",
            "1m",
            "-R",
            "5",
            "-b",
            "10",
            "-B",
            "binary",
            "-a",
            "755",
            "-U",
            "7",
            "-P",
            "/a",
            "-u",
            "a",
            "--shards",
            "2",
            "--eviction",
            "lru",
            "-m",
            "4096",
            "-p",
            "22122",
            "-c",
            "20",
            "-t",
            "3",
            "-I",
            "2m",
            "-R",
            "6",
            "-b",
            "20",
            "-B",
            "ascii",
            "-a",
            "711",
            "-U",
            "0",
            "-P",
            "/b",
            "-u",
            "b",
            "--shards",
            "4",
            "--eviction",
            "sieve",
        ])
        .unwrap();
        assert_eq!(c.memory_limit, 4096);
        assert_eq!(c.port, 22122);
        assert_eq!(c.max_connections, 20);
        assert_eq!(c.threads, 3);
        assert_eq!(c.item_size_max, 2 * 1024 * 1024);
        assert_eq!(c.reqs_per_event, 6);
        assert_eq!(c.backlog, 20);
        assert_eq!(c.protocol, Protocol::Ascii);
        assert_eq!(c.unix_mask, 0o711);
        assert_eq!(c.udp_port, 0);
        assert_eq!(c.pidfile, Some(PathBuf::from("/b")));
        assert_eq!(c.user.as_deref(), Some("b"));
        assert_eq!(c.shards, 4);
        assert_eq!(c.eviction, "sieve");
        // Switches may be repeated too.
        let c = parse(&["-A", "-A", "-M", "-M", "-C", "-C", "-F", "-F", "-v", "-v"]).unwrap();
        assert!(c.enable_shutdown && c.disable_evictions && c.disable_cas);
        assert!(c.disable_flush_all);
        assert_eq!(c.verbosity, 2);
        let c = parse(&["-X", "-W"]).unwrap();
        assert!(c.disable_dumping && c.disable_watch);
    }

    #[test]
    fn listen_addresses_and_extended_options_accumulate() {
        let c = parse(&[
            "-l",
            "127.0.0.1",
            "-l",
            "::1,127.0.0.2",
            "-o",
            "idle_timeout=5",
        ])
        .unwrap();
        assert_eq!(c.listen, vec!["127.0.0.1", "::1", "127.0.0.2"]);
        let c = parse(&["-o", "idle_timeout=5", "-o", "idle_timeout=7,modern"]).unwrap();
        assert_eq!(c.idle_timeout, 7);
    }

    #[test]
    fn extended_options() {
        let c = parse(&["-o", "idle_timeout=5,modern", "-o", "hashpower=20"]).unwrap();
        assert_eq!(c.idle_timeout, 5);
        let e = parse(&["-o", "bogus"]).unwrap_err();
        assert!(e.contains("Illegal suboption \"bogus\""), "{e}");
        assert!(parse(&["-o", "idle_timeout=x"]).is_err());
        // The workers' time slice: 100 us by default, 0 for the kernel's,
        // else within what the kernel takes.
        assert_eq!(parse(&[]).unwrap().worker_slice_us, 100);
        assert_eq!(
            parse(&["-o", "worker_slice_us=0"]).unwrap().worker_slice_us,
            0
        );
        assert_eq!(
            parse(&["-o", "worker_slice_us=250"])
                .unwrap()
                .worker_slice_us,
            250
        );
        assert_eq!(parse(&[]).unwrap().worker_loop, WorkerLoop::Direct);
        assert_eq!(
            parse(&["-o", "worker_loop=tasks"]).unwrap().worker_loop,
            WorkerLoop::Tasks
        );
        // Pinning: none by default; a list as taskset -c takes it.
        assert!(parse(&[]).unwrap().worker_cpulist.is_empty());
        assert_eq!(
            parse(&["-o", "worker_cpulist=0-1:0"])
                .unwrap()
                .worker_cpulist,
            vec![0, 1, 0]
        );
        for bad in [
            "worker_cpulist=",
            "worker_cpulist=x",
            "worker_cpulist=2-1",
            "worker_loop=epoll",
            "worker_slice_us=50",
            "worker_slice_us=200000",
            "worker_slice_us=x",
        ] {
            let e = parse(&["-o", bad]).unwrap_err();
            assert!(e.contains(bad.split('=').next().unwrap_or(bad)), "{e}");
        }
    }

    #[test]
    fn tls_options() {
        let c = parse(&[
            "-Z",
            "-o",
            "ssl_chain_cert=/c.pem,ssl_key=/k.pem",
            "-o",
            "ssl_ca_cert=/ca.pem,ssl_verify_mode=3,ssl_min_version=3,ssl_session_cache",
            "-l",
            "127.0.0.1,notls:127.0.0.1:11212",
        ])
        .unwrap();
        assert!(c.tls.enabled);
        assert_eq!(c.tls.chain_cert, Some(PathBuf::from("/c.pem")));
        assert_eq!(c.tls.key, Some(PathBuf::from("/k.pem")));
        assert_eq!(c.tls.ca_cert, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.tls.verify_mode, VerifyMode::Once);
        assert_eq!(c.tls.min_version, MinVersion::Tls13);
        assert_eq!(c.listen, vec!["127.0.0.1", "notls:127.0.0.1:11212"]);
        for (args, want) in [
            (
                "ssl_verify_mode=4",
                "invalid value for -o ssl_verify_mode: 4",
            ),
            (
                "ssl_min_version=tlsv1.2",
                "invalid value for -o ssl_min_version",
            ),
            ("ssl_ciphers=HIGH", "-o ssl_ciphers is not supported"),
            ("ssl_keyformat=2", "-o ssl_keyformat is not supported"),
            ("ssl_key=", "invalid value for -o ssl_key"),
        ] {
            let e = parse(&["-Z", "-o", args]).unwrap_err();
            assert!(e.contains(want), "{args}: {e}");
        }
    }

    #[test]
    fn port_minus_one_is_a_free_port() {
        assert_eq!(parse(&["-p", "-1"]).unwrap().port, 0);
        assert_eq!(parse(&["--port=-1"]).unwrap().port, 0);
        assert!(parse(&["-p", "-1"]).unwrap().tcp);
        assert!(parse(&["-p", "-2"]).is_err());
    }

    /// memcached 1.6.18: `-p 0` listens on no TCP port; `-U N` without
    /// `-p` moves TCP to N too; `-U -1` is a free UDP port (and, alone, a
    /// free TCP port); `-U 0` is off.
    #[test]
    fn ports_zero_and_minus_one_as_memcached() {
        let c = parse(&["-p", "0", "-U", "11311"]).unwrap();
        assert!(!c.tcp);
        assert_eq!(c.udp_port, 11311);
        let c = parse(&["-U", "11311"]).unwrap();
        assert!(c.tcp);
        assert_eq!((c.port, c.udp_port), (11311, 11311));
        let c = parse(&["-U", "11311", "-p", "11411"]).unwrap();
        assert_eq!((c.port, c.udp_port), (11411, 11311));
        let c = parse(&["-U", "-1"]).unwrap();
        assert!(c.tcp && c.udp_free);
        assert_eq!((c.port, c.udp_port), (0, 0));
        let c = parse(&["-U", "0"]).unwrap();
        assert_eq!((c.port, c.udp_port, c.udp_free), (11211, 0, false));
        assert!(parse(&["-U", "-2"]).is_err());
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(parse(&["-p", "99999"]).is_err());
        assert!(parse(&["-B", "foo"]).is_err());
        assert!(parse(&["-I", "1g"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("512k"), Some(512 * 1024));
        assert_eq!(parse_size("1m"), Some(1024 * 1024));
        assert_eq!(parse_size("x"), None);
    }
}
