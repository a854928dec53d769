//! The keyspace's settings, in three sections: the durable mode
//! (`--data-dir` and the log's settings), replication (which primary to
//! follow, how much to keep for replicas, how writes wait for them) and the
//! fixed-length tables. kura-server builds them from its flags and TOML
//! (its `config/keyspace.rs`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use crate::durable::{DurableConfig, LagLimits};
use crate::reload::Reloadable;

/// Everything a [`Keyspace`](crate::Keyspace) is opened with.
#[derive(Debug, Default)]
pub struct KeyspaceConfig {
    /// The update log and snapshots (`--data-dir`); none: in memory only.
    pub durable: Option<DurableConfig>,
    pub replication: ReplicationConfig,
    pub tables: TablesConfig,
}

/// Replication's settings.
#[derive(Debug, Default)]
pub struct ReplicationConfig {
    /// The primary to follow from the start (`--replica-of HOST:PORT`).
    pub replica_of: Option<String>,
    /// Bytes of the newest records kept in memory for replicas
    /// (`--repl-backlog-size`), and of the log's files kept for a
    /// replica's full resync beyond it (`--repl-resync-buffer`).
    pub backlog_bytes: u64,
    pub resync_buffer_bytes: u64,
    /// Writes wait until this many replicas have their records
    /// (`--min-replicas-ack`; 0: they do not wait), this long at most.
    pub min_replicas_ack: usize,
    pub min_replicas_timeout: Duration,
    /// What this server, as a replica, authenticates with
    /// (`--replica-auth-file`), over binary SASL rather than ASCII
    /// (`--replica-sasl`).
    pub login: Option<Reloadable<Option<Login>>>,
    pub sasl: bool,
    /// TLS to the primary (`--replica-tls-ca`), and the name its
    /// certificate must carry when not the primary's host.
    pub tls: Option<Reloadable<tokio_rustls::rustls::ClientConfig>>,
    pub tls_name: Option<String>,
}

impl ReplicationConfig {
    /// `--repl-backlog-size` as a size in memory.
    pub fn backlog_size(&self) -> usize {
        usize::try_from(self.backlog_bytes).unwrap_or(usize::MAX)
    }

    /// `--repl-resync-buffer` as a size in memory.
    pub fn resync_buffer_size(&self) -> usize {
        usize::try_from(self.resync_buffer_bytes).unwrap_or(usize::MAX)
    }
}

/// A user name and password a replica authenticates with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub user: Vec<u8>,
    pub pass: Vec<u8>,
}

/// The fixed-length tables' settings.
#[derive(Debug, Clone)]
pub struct TablesConfig {
    pub specs: Vec<TableSpec>,
    /// How their files are synced (from `--fsync`).
    pub durability: kura_table::Durability,
}

impl Default for TablesConfig {
    fn default() -> Self {
        TablesConfig {
            specs: Vec::new(),
            durability: kura_table::Durability::No,
        }
    }
}

/// A fixed-length table: `--table NAME:width=W:max=N[:path=FILE]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// Its keys are `NAME:ID`.
    pub name: String,
    /// Bytes per record.
    pub width: u32,
    /// The largest id (ids are 1 to max).
    pub max: u64,
    /// Its file; default `DATA_DIR/NAME.ktbl` with `--data-dir`, else in
    /// memory.
    pub path: Option<PathBuf>,
}

/// A `--table` argument that does not say what a table is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableSpecError {
    #[error("invalid table '{0}': expected NAME:width=BYTES:max=ID[:path=FILE]")]
    Form(String),
    #[error(
        "invalid table '{0}': unknown setting '{1}'; expected NAME:width=BYTES:max=ID[:path=FILE]"
    )]
    Setting(String, String),
}

impl std::str::FromStr for TableSpec {
    type Err = TableSpecError;

    fn from_str(s: &str) -> Result<Self, TableSpecError> {
        let mut parts = s.split(':');
        let name = parts.next().unwrap_or_default().to_string();
        let (mut width, mut max, mut path) = (None, None, None);
        for p in parts {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| TableSpecError::Form(s.to_string()))?;
            match k {
                "width" => width = v.parse::<u32>().ok(),
                "max" => max = v.parse::<u64>().ok(),
                "path" => path = Some(PathBuf::from(v)),
                _ => return Err(TableSpecError::Setting(s.to_string(), k.to_string())),
            }
        }
        match (width, max) {
            (Some(width), Some(max)) => Ok(TableSpec {
                name,
                width,
                max,
                path,
            }),
            _ => Err(TableSpecError::Form(s.to_string())),
        }
    }
}
