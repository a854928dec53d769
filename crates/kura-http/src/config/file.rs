//! The TOML file as read (every key optional), with the byte spans of the values that are
//! checked after parsing, so that an error can name the line it comes from.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::TlsListener;

/// The file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) backend: Option<Spanned<String>>,
    pub(super) backends: Option<BTreeMap<String, Spanned<toml::Value>>>,
    pub(super) backend_tls_ca: Option<Spanned<String>>,
    pub(super) rule: Option<Vec<Spanned<RuleFile>>>,
    pub(super) listen: Option<Vec<SocketAddr>>,
    pub(super) listen_unix: Option<Vec<PathBuf>>,
    pub(super) listen_proxy: Option<Spanned<Vec<SocketAddr>>>,
    pub(super) trusted_proxies: Option<Vec<Spanned<String>>>,
    pub(super) tls: Option<Vec<TlsListener>>,
    pub(super) memory_mb: Option<usize>,
    pub(super) disk_cache: Option<Spanned<String>>,
    pub(super) disk_cache_all: Option<Spanned<bool>>,
    pub(super) admin_listen: Option<SocketAddr>,
    pub(super) access_log: Option<String>,
    pub(super) access_log_format: Option<Spanned<String>>,
    pub(super) do_esi: Option<bool>,
    pub(super) esi: Option<super::esi_logs::EsiFile>,
    pub(super) threads: Option<usize>,
    pub(super) default_ttl: Option<u64>,
    pub(super) grace: Option<u64>,
    pub(super) stale_if_error: Option<u64>,
    pub(super) keep: Option<u64>,
    pub(super) hit_for_miss: Option<u64>,
    pub(super) honour_client_directives: Option<bool>,
    pub(super) set_cookie: Option<Spanned<String>>,
    pub(super) cdn_cache_control: Option<bool>,
    pub(super) surrogate_control: Option<bool>,
    pub(super) cache_status: Option<Spanned<String>>,
    pub(super) cookie: Option<Spanned<String>>,
    pub(super) authorization: Option<Spanned<String>>,
    pub(super) cookie_ignore: Option<Vec<Spanned<String>>>,
    pub(super) heuristic_with_credentials: Option<bool>,
    pub(super) strip_unkeyed: Option<Vec<Spanned<String>>>,
    pub(super) key_headers: Option<Vec<Spanned<String>>>,
    pub(super) key_headers_always: Option<Vec<Spanned<String>>>,
    pub(super) key_device_class: Option<bool>,
    pub(super) key_cookies: Option<Vec<Spanned<String>>>,
    pub(super) max_object_mb: Option<usize>,
    pub(super) max_in_flight_mb: Option<usize>,
    pub(super) max_header_kb: Option<usize>,
    pub(super) max_headers: Option<usize>,
    pub(super) max_url_bytes: Option<usize>,
    pub(super) max_connections: Option<usize>,
    pub(super) max_pipes: Option<usize>,
    pub(super) pipe_idle_timeout: Option<Spanned<f64>>,
    pub(super) via_name: Option<Spanned<String>>,
    pub(super) max_via_hops: Option<usize>,
    pub(super) connect_timeout: Option<Spanned<f64>>,
    pub(super) first_byte_timeout: Option<Spanned<f64>>,
    pub(super) between_bytes_timeout: Option<Spanned<f64>>,
    pub(super) probe: Option<ProbeFile>,
    pub(super) normalize: Option<super::keys::NormalizeFile>,
    pub(super) device: Option<super::keys::DeviceFile>,
    pub(super) compression: Option<CompressionFile>,
    pub(super) purge: Option<super::bans::PurgeFile>,
    pub(super) bans: Option<super::bans::BansFile>,
}

/// `[compression]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CompressionFile {
    pub(super) enabled: Option<bool>,
    pub(super) level: Option<Spanned<u32>>,
    pub(super) types: Option<Vec<Spanned<String>>>,
    pub(super) min_size: Option<u64>,
    pub(super) backend_accept: Option<Vec<Spanned<String>>>,
    pub(super) max_decoded_mb: Option<u64>,
    pub(super) coding: Option<Spanned<String>>,
    pub(super) brotli_level: Option<Spanned<u32>>,
}

/// `[probe]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProbeFile {
    pub(super) path: Option<Spanned<String>>,
    pub(super) interval: Option<Spanned<f64>>,
    pub(super) timeout: Option<Spanned<f64>>,
    pub(super) threshold: Option<u32>,
}

/// One `[[rule]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleFile {
    pub(super) host: Option<Spanned<String>>,
    pub(super) path_prefix: Option<Spanned<String>>,
    pub(super) path: Option<Spanned<String>>,
    pub(super) backend: Option<Spanned<String>>,
    pub(super) default_ttl: Option<u64>,
    pub(super) grace: Option<u64>,
    pub(super) stale_if_error: Option<u64>,
    pub(super) pass: Option<bool>,
    pub(super) do_esi: Option<bool>,
    pub(super) cookie: Option<Spanned<String>>,
    pub(super) authorization: Option<Spanned<String>>,
    pub(super) cookie_ignore: Option<Vec<Spanned<String>>>,
    pub(super) heuristic_with_credentials: Option<bool>,
    pub(super) strip_unkeyed: Option<Vec<Spanned<String>>>,
    pub(super) key_headers: Option<Vec<Spanned<String>>>,
    pub(super) key_headers_always: Option<Vec<Spanned<String>>>,
    pub(super) key_device_class: Option<bool>,
    pub(super) key_cookies: Option<Vec<Spanned<String>>>,
    pub(super) normalize_remove: Option<Vec<Spanned<String>>>,
    pub(super) normalize_also_remove: Option<Vec<Spanned<String>>>,
    pub(super) normalize_sort: Option<bool>,
    pub(super) normalize_forward_removed: Option<bool>,
    pub(super) request_set: Option<Spanned<BTreeMap<String, String>>>,
    pub(super) request_unset: Option<Spanned<Vec<String>>>,
    pub(super) request_append: Option<Spanned<BTreeMap<String, String>>>,
    pub(super) response_set: Option<Spanned<BTreeMap<String, String>>>,
    pub(super) response_unset: Option<Spanned<Vec<String>>>,
    pub(super) response_append: Option<Spanned<BTreeMap<String, String>>>,
    pub(super) synthetic: Option<Spanned<super::edits::SyntheticFile>>,
}

/// Where a value came from, to name it in an error: the file's text and its name.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub(super) name: &'a str,
    pub(super) text: &'a str,
}

impl Source<'_> {
    /// "FILE line N: " for a value at byte `offset` of the file; "" for values from flags.
    pub(super) fn at(&self, offset: Option<usize>) -> String {
        match offset {
            Some(offset) if !self.text.is_empty() => {
                let before = &self.text.as_bytes()[..offset.min(self.text.len())];
                let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
                format!("{} line {line}: ", self.name)
            }
            _ => String::new(),
        }
    }
}
