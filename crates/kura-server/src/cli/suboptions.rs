//! `-o` sub-options (kura's own, TLS's `ssl_*` with memcached's names and
//! values, and memcached's internals kura ignores with a warning), and the
//! warnings about flags that have no effect.

use std::path::PathBuf;

use super::{CliError, ServerArgs};
use crate::config::ServerConfig;
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

impl ServerArgs {
    /// Applies `-o` to `c`; adds the warnings about flags and sub-options
    /// kura ignores or that have no effect.
    pub(super) fn apply_suboptions(
        &self,
        c: &mut ServerConfig,
        warnings: &mut Vec<String>,
    ) -> Result<(), CliError> {
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
            suboption(c, name, value, warnings)?;
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
        Ok(())
    }
}

/// `-o NAME=VALUE`'s value as a `T`, or the sub-option refused as bad.
fn parsed<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, CliError> {
    value
        .parse()
        .map_err(|_| CliError::BadSuboption(name.into(), value.into()))
}

/// Applies one `-o NAME=VALUE`.
fn suboption(
    c: &mut ServerConfig,
    name: &str,
    value: &str,
    warnings: &mut Vec<String>,
) -> Result<(), CliError> {
    let bad = || CliError::BadSuboption(name.into(), value.into());
    match name {
        "idle_timeout" => c.idle_timeout = parsed(name, value)?,
        "worker_loop" => {
            c.worker_loop = match value {
                "direct" => crate::config::WorkerLoop::Direct,
                "tasks" => crate::config::WorkerLoop::Tasks,
                _ => return Err(bad()),
            };
        }
        "log_format" => c.log_format = parsed(name, value)?,
        "worker_cpulist" => {
            c.worker_cpulist = kura_sched::parse_cpulist(value).map_err(|_| bad())?;
        }
        "worker_slice_us" => {
            c.worker_slice_us = match value.parse() {
                Ok(us) if kura_sched::valid_setting(us) => us,
                _ => return Err(bad()),
            };
        }
        n if n.starts_with("ssl_") => ssl_suboption(c, n, value, warnings)?,
        n if n.starts_with("ext_") => ext_suboption(c, n, value, warnings)?,
        n if IGNORED_SUBOPTIONS.contains(&n) => {
            warnings.push(format!("-o {n} tunes memcached internals; kura ignores it"));
        }
        other => return Err(CliError::IllegalSuboption(other.to_string())),
    }
    Ok(())
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
            let n: u8 = parsed(name, value)?;
            c.tls.verify_mode = VerifyMode::try_from(n).map_err(|_| bad())?;
        }
        "ssl_min_version" => {
            let n: u8 = parsed(name, value)?;
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
            parsed::<u32>(name, value)?;
            warnings.push("-o ssl_wbuf_size tunes memcached's TLS buffers; kura ignores it".into());
        }
        other => return Err(CliError::UnsupportedSsl(other.to_string())),
    }
    Ok(())
}

/// Applies one `-o ext_*` sub-option (the flash tier), with memcached's
/// meaning and units, or refuses it with the reason.
fn ext_suboption(
    c: &mut ServerConfig,
    name: &str,
    value: &str,
    warnings: &mut Vec<String>,
) -> Result<(), CliError> {
    let f = &mut c.flash;
    match name {
        "ext_path" => {
            crate::config::parse_ext_path(value).map_err(CliError::ExtPath)?;
            f.paths.push(value.to_string());
        }
        "ext_item_size" => f.item_size = parsed(name, value)?,
        "ext_page_size" => f.page_size_mb = parsed(name, value)?,
        "ext_wbuf_size" => f.wbuf_size_mb = parsed(name, value)?,
        "ext_compact_under" => f.compact_under = parsed(name, value)?,
        "ext_drop_under" => f.drop_under = parsed(name, value)?,
        "ext_max_frag" => f.max_frag = parsed(name, value)?,
        "ext_recache_rate" => f.recache_rate = parsed(name, value)?,
        // memcached takes the flag alone (and ignores a value).
        "ext_drop_unread" => f.drop_unread = true,
        "ext_threads" => f.threads = parsed(name, value)?,
        "ext_io_depth" | "ext_max_sleep" => {
            parsed::<u32>(name, value)?;
            warnings.push(format!(
                "-o {name} tunes memcached's extstore threads; kura's flash tier has reader threads (ext_threads) and a maintenance thread of its own and ignores it"
            ));
        }
        "ext_item_age" => f.item_age = parsed(name, value)?,
        "ext_low_ttl" if value == "0" => {}
        "ext_low_ttl" => {
            return Err(CliError::UnsupportedExt(
                name.into(),
                "kura's flash pages are one pool; values with short TTLs are not kept apart",
            ))
        }
        _ => {
            return Err(CliError::UnsupportedExt(
                name.into(),
                "not an extstore option kura knows",
            ))
        }
    }
    Ok(())
}
