//! `kura server`'s command line: memcached's flags with memcached's
//! meanings, plus kura's own long options. Flags override `--config`.
//! The flags are declared here; they are applied to the settings by
//! section: the network and the limits (net.rs), the keyspace: data dir,
//! replication, tables (keyspace.rs), and `-o` sub-options with memcached's
//! flags kura ignores (suboptions.rs).

mod keyspace;
mod net;
mod suboptions;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use clap::{ArgAction, Args};

use crate::config::ServerConfig;

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
    /// tlsv1.2); ext_path=<file:size> and memcached's other ext_* options
    /// (the flash tier, docs/server.md); memcached's tuning options for its
    /// slab allocator and LRU maintainer are accepted and ignored
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
    /// a flash tier (memcached's extstore): values of evicted items of
    /// ext_item_size bytes or more (512) go to FILE, of SIZE with a unit,
    /// 64m, 1g...; repeat for more files (as -o ext_path=FILE:SIZE; see
    /// docs/server.md for the other ext_* options)
    #[arg(long = "ext-path", value_name = "FILE:SIZE")]
    pub ext_path: Vec<String>,
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
    #[error(transparent)]
    Table(#[from] kura_keyspace::config::TableSpecError),
    #[error("invalid unix socket mask '{0}': expected an octal number")]
    BadMask(String),
    #[error(transparent)]
    Protocol(#[from] crate::config::UnknownProtocol),
    #[error("{0} is not available yet in kura")]
    Unsupported(&'static str),
    #[error("{0}")]
    ExtPath(String),
    #[error("-o {0}: {1}")]
    UnsupportedExt(String, &'static str),
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
    pub fn into_config(mut self) -> Result<(ServerConfig, ProcessOptions, Vec<String>), CliError> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| CliError::ConfigRead(path.clone(), e))?;
                toml::from_str(&text).map_err(|e| CliError::ConfigParse(path.clone(), e))?
            }
            None => ServerConfig::default(),
        };
        let mut warnings = Vec::new();
        self.apply_net(&mut c)?;
        self.apply_limits(&mut c)?;
        self.apply_keyspace(&mut c)?;
        for p in &self.ext_path {
            crate::config::parse_ext_path(p).map_err(CliError::ExtPath)?;
            c.flash.paths.push(p.clone());
        }
        self.apply_suboptions(&mut c, &mut warnings)?;
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
