//! The near cache: a kura-store in this process in front of the servers
//! (seed 001's local LRU in front of a remote store). Reads that hit it
//! never leave the process and share the stored bytes (no copy); values
//! read from a server are kept for at most the configured TTL; every write
//! through this client drops the key first.
//!
//! In front of kura servers the near cache is kept coherent: each
//! connection subscribes with `mt` (docs/protocol-extensions.md), and the
//! server's `IV <key>` lines drop entries (`IV *` every entry); when a
//! subscribed connection closes, invalidations may be lost, so the near
//! cache is emptied. A server that refuses `mt` (memcached) leaves its
//! keys bounded by the TTL only: a write by another client is seen here
//! once the entry expires.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kura_store::{Expiry, GetOptions, SetRequest, Store, StoreConfig};

use kura_proto::client::Value;

/// Settings of the near cache.
#[derive(Debug, Clone, Copy)]
pub struct NearConfig {
    /// Memory limit in bytes (keys, values and bookkeeping).
    pub capacity: usize,
    /// How long a value read from a server is served from the near cache;
    /// rounded up to whole seconds (kura-store's clock).
    pub ttl: Duration,
}

impl NearConfig {
    pub fn new(capacity: usize, ttl: Duration) -> NearConfig {
        NearConfig { capacity, ttl }
    }
}

pub(crate) struct NearCache {
    store: Store,
    expiry: Expiry,
    /// Bumped by every write through the client: a read that started
    /// before a write does not fill the near cache with what it read.
    writes: AtomicU64,
    /// Invalidations heard from servers (keys and flushes).
    invalidations: AtomicU64,
}

impl NearCache {
    pub fn new(cfg: NearConfig) -> NearCache {
        let store = Store::new(StoreConfig {
            shards: 0,
            ..StoreConfig::with_capacity(cfg.capacity)
        });
        NearCache {
            store,
            expiry: Expiry::after(cfg.ttl.max(Duration::from_secs(1))),
            writes: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
        }
    }

    /// The write count, read before a remote read.
    pub fn epoch(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    pub fn get(&self, key: &[u8]) -> Option<Value> {
        let hit = self.store.get_with(key, &GetOptions::default())?;
        Some(Value {
            data: hit.item.value_bytes(),
            flags: hit.item.flags(),
            cas: hit.cas,
        })
    }

    /// Keeps `v` unless a write happened since `epoch`.
    pub fn put(&self, key: &[u8], v: &Value, epoch: u64) {
        if self.epoch() != epoch {
            return;
        }
        self.store.set(&SetRequest {
            flags: v.flags,
            expiry: Some(self.expiry),
            new_cas: Some(v.cas),
            ..SetRequest::new(key, &v.data)
        });
        // A write may have slipped in between the check and the set.
        if self.epoch() != epoch {
            self.store.delete(key);
        }
    }

    pub fn remove(&self, key: &[u8]) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.store.delete(key);
    }

    /// A server said `key` changed (`None`: everything may have).
    ///
    /// The entry is dropped before the count rises (Release, read with
    /// Acquire): a caller that saw [`crate::Client::near_invalidations`]
    /// rise no longer reads the old value.
    pub fn invalidated(&self, key: Option<&[u8]>) {
        match key {
            Some(k) => self.remove(k),
            None => self.clear(),
        }
        self.invalidations.fetch_add(1, Ordering::Release);
    }

    /// Invalidations heard so far.
    pub fn invalidations(&self) -> u64 {
        self.invalidations.load(Ordering::Acquire)
    }

    /// Drops every entry (a lost invalidation stream, a flush).
    pub fn clear(&self) {
        self.writes.fetch_add(1, Ordering::AcqRel);
        self.store.flush(None);
    }
}
