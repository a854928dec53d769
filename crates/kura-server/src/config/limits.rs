//! The limits' section of the settings: memory, items, threads and
//! connections, and the store and parser settings derived from them.

use super::{ConfigError, ServerConfig};

impl ServerConfig {
    /// Checks the limits.
    pub(super) fn validate_limits(&self) -> Result<(), ConfigError> {
        if self.item_size_max < 1024 {
            return Err(ConfigError::ItemSizeTooSmall);
        }
        if self.item_size_max > 1024 * 1024 * 1024 {
            return Err(ConfigError::ItemSizeTooLarge);
        }
        if self.memory_limit == 0 {
            return Err(ConfigError::NoMemory);
        }
        if self.item_size_max as u64 > self.memory_bytes() / 2 {
            return Err(ConfigError::ItemSizeOverHalfMemory);
        }
        if self.threads == 0 {
            return Err(ConfigError::NoThreads);
        }
        if !kura_sched::valid_setting(self.worker_slice_us) {
            return Err(ConfigError::WorkerSlice(self.worker_slice_us));
        }
        if !self.worker_cpulist.is_empty() {
            // Checked here, not when each worker starts: a list naming a CPU
            // the process cannot use is an operator's mistake to hear of at
            // once. (Should the kernel not tell, the workers' pinning logs.)
            if let Ok(allowed) = kura_sched::allowed_cpus() {
                if let Some(&cpu) = self.worker_cpulist.iter().find(|c| !allowed.contains(c)) {
                    let list = allowed.iter().map(|c| c.to_string()).collect::<Vec<_>>();
                    return Err(ConfigError::WorkerCpu(cpu, list.join(",")));
                }
            }
        }
        if self.max_connections == 0 {
            return Err(ConfigError::NoConnections);
        }
        Ok(())
    }

    /// The memory limit in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_limit.saturating_mul(1024 * 1024)
    }

    /// The store configuration these settings ask for.
    pub fn store_config(&self) -> kura_store::StoreConfig {
        kura_store::StoreConfig {
            capacity: usize::try_from(self.memory_bytes()).unwrap_or(usize::MAX),
            shards: if self.shards == 0 {
                kura_store::default_shards(self.threads)
            } else {
                self.shards
            },
            eviction: self.eviction.parse().unwrap_or_default(),
            // `--eviction none` makes a store, not a cache: full means
            // "out of memory" (memcached's -M).
            evict: !self.disable_evictions && self.eviction != "none",
            cas: !self.disable_cas,
            // Set by `Server::bind` from the data dir (durable mode).
            hash_seed: None,
            huge_pages: self.large_pages,
        }
    }

    /// The framing limits of the protocol parser.
    pub fn limits(&self) -> kura_proto::Limits {
        kura_proto::Limits {
            item_size_max: self.item_size_max,
            cas_enabled: !self.disable_cas,
            max_get_line: self.item_size_max.max(64 * 1024),
        }
    }
}
