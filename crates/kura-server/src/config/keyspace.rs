//! The keyspace's section of the settings: the data dir and its log,
//! replication, the tables, and the [`kura_keyspace::KeyspaceConfig`] the
//! server opens its keyspace with.

use super::{defaults, ConfigError, ServerConfig};

impl ServerConfig {
    /// Checks the eviction policy, the data dir's, the log's and the
    /// tables' settings.
    pub(super) fn validate_keyspace(&self) -> Result<(), ConfigError> {
        // The store's policy, checked here to keep the checks' order.
        if self.eviction != "none" {
            self.eviction
                .parse::<kura_store::EvictionKind>()
                .map_err(|e| ConfigError::Eviction(format!("{e}, none")))?;
        }
        let fsync = self.fsync_policy()?;
        if self.data_dir.is_some() && fsync == kura_log::FsyncPolicy::Always && self.udp() {
            return Err(ConfigError::UdpWithFsyncAlways);
        }
        if self.log_file_size < 4096 {
            return Err(ConfigError::LogFileTooSmall);
        }
        if !(self.log_max_lag.is_finite() && (0.0..=3600.0).contains(&self.log_max_lag)) {
            return Err(ConfigError::LogMaxLag(self.log_max_lag.to_string()));
        }
        for (i, t) in self.tables.iter().enumerate() {
            let bad = |why: &str| Err(ConfigError::Table(t.name.clone(), why.to_string()));
            if t.name.is_empty() || t.name.bytes().any(|b| b == b':' || b <= b' ' || b == 0x7f) {
                return bad("a name is one or more characters without ':', spaces or controls");
            }
            if t.width == 0 || t.width > kura_table::MAX_WIDTH {
                return bad("width must be 1 to 1048576 bytes");
            }
            if t.max == 0 {
                return bad("max must be at least 1");
            }
            if self.tables[..i].iter().any(|o| o.name == t.name) {
                return bad("declared twice");
            }
        }
        Ok(())
    }

    /// The `--fsync` policy.
    ///
    /// # Errors
    /// An unknown policy name.
    pub fn fsync_policy(&self) -> Result<kura_log::FsyncPolicy, ConfigError> {
        self.fsync.parse().map_err(ConfigError::Fsync)
    }

    /// The durable mode's settings, when `--data-dir` is given.
    pub fn durable_config(&self) -> Option<kura_keyspace::config::DurableConfig> {
        Some(kura_keyspace::config::DurableConfig {
            dir: self.data_dir.clone()?,
            fsync: self.fsync_policy().unwrap_or_default(),
            segment_size: self.log_file_size,
            snapshot_log_bytes: self.snapshot_log_size,
            snapshot_interval: std::time::Duration::from_secs(self.snapshot_interval),
            lag: kura_keyspace::config::LagLimits {
                time: std::time::Duration::from_secs_f64(self.log_max_lag),
                bytes: self.log_max_lag_bytes(),
            },
            backlog_bytes: self.backlog_bytes(),
        })
    }

    /// The keyspace's settings: the durable mode, replication (without the
    /// replica's login and TLS, which the server reads from their files)
    /// and the tables.
    pub fn keyspace_config(&self) -> kura_keyspace::KeyspaceConfig {
        let durability = match self.fsync_policy().unwrap_or_default() {
            kura_log::FsyncPolicy::Always => kura_table::Durability::Always,
            kura_log::FsyncPolicy::EverySec => kura_table::Durability::EverySec,
            kura_log::FsyncPolicy::No => kura_table::Durability::No,
        };
        kura_keyspace::KeyspaceConfig {
            durable: self.durable_config(),
            replication: kura_keyspace::ReplicationConfig {
                replica_of: self.replica_of.clone(),
                backlog_bytes: self.repl_backlog_size,
                resync_buffer_bytes: self.repl_resync_buffer,
                min_replicas_ack: self.min_replicas_ack as usize,
                min_replicas_timeout: std::time::Duration::from_millis(
                    self.min_replicas_timeout_ms,
                ),
                login: None,
                sasl: self.replica_sasl,
                tls: None,
                tls_name: self.replica_tls.name.clone(),
            },
            tables: kura_keyspace::TablesConfig {
                specs: self.tables.clone(),
                durability,
            },
        }
    }

    /// `--repl-backlog-size` as a size in memory.
    pub fn backlog_bytes(&self) -> usize {
        usize::try_from(self.repl_backlog_size).unwrap_or(usize::MAX)
    }

    /// `--repl-resync-buffer` as a size in memory.
    pub fn resync_buffer_bytes(&self) -> usize {
        usize::try_from(self.repl_resync_buffer).unwrap_or(usize::MAX)
    }

    /// The update log's byte bound: as given, or derived from `-m`.
    pub fn log_max_lag_bytes(&self) -> u64 {
        if self.log_max_lag_bytes > 0 {
            return self.log_max_lag_bytes;
        }
        let shards = self.store_config().shards.max(1) as u64;
        (self.memory_bytes() / shards / 4).clamp(
            defaults::LOG_MAX_LAG_BYTES_MIN,
            defaults::LOG_MAX_LAG_BYTES_MAX,
        )
    }
}
