//! The fill lock for hot records: of many readers that miss the same
//! record at once, one takes a lock entry (ADD where the key is absent,
//! CAS over the tombstone where it was just invalidated), reads the row
//! and stores it under the lock's CAS; the others see the lock and poll
//! briefly for the record instead of all reading the database.
//!
//! kura-client's `get_or_fill` is the same idea, with the server making
//! the placeholder (`mg ... N`); it cannot serve here because a
//! tombstone is a present item, which `N` does not replace, and right
//! after an invalidation is exactly when a hot key stampedes.

use std::time::{Duration, Instant};

use kura_client::{SetOptions, StoreStatus};

use crate::cache::{Cached, Record};
use crate::error::Result;
use crate::fill::{Slot, FLAG_LOCK, FLAG_RECORD, FLAG_TOMBSTONE};

/// Longest pause between two polls of a waiting reader.
const POLL_MAX: Duration = Duration::from_millis(50);

impl<T: Record> Cached<T> {
    /// [`Cached::fetch`] with a fill lock: on a miss only one reader reads
    /// the database; the others wait up to `Config::fill_lock_wait` for
    /// its value, then read the database themselves without storing.
    ///
    /// # Errors
    /// As [`Cached::fetch`].
    pub async fn fetch_locked(&self, id: i64) -> Result<Option<T>> {
        let cache = &self.cache;
        let cfg = &cache.inner.cfg;
        let s = &cache.inner.stats;
        let client = &cache.inner.client;
        let key = self.record_key(id);
        let keys = [key.clone()];
        let deadline = Instant::now() + cfg.fill_lock_wait;
        let mut delay = Duration::from_millis(2);
        let mut waited = false;
        loop {
            let (mut slots, fence) = cache.read_slots(&keys, FLAG_RECORD).await;
            let slot = slots.pop().unwrap_or(Slot::Unknown);
            let lock_opts = SetOptions::new(cfg.fill_lock_ttl, FLAG_LOCK);
            let token = rand::random::<u64>().to_be_bytes();
            let took = match &slot {
                Slot::Hit(data, cas) => {
                    if data.is_empty() {
                        s.add(&s.record_hits, 1);
                        return Ok(None);
                    }
                    if let Ok(row) = postcard::from_bytes::<Vec<crate::value::Value>>(data) {
                        if row.len() == self.info.names.len() {
                            s.add(&s.record_hits, 1);
                            return self.record(&row).map(Some);
                        }
                    }
                    // Not a row of this declaration: lock over it.
                    matches!(
                        client.cas(&key, token, *cas, lock_opts).await,
                        Ok(StoreStatus::Stored)
                    )
                }
                Slot::Unknown => false,
                Slot::Empty => matches!(client.add(&key, token, lock_opts).await, Ok(true)),
                Slot::Tomb(cas) => matches!(
                    client.cas(&key, token, *cas, lock_opts).await,
                    Ok(StoreStatus::Stored)
                ),
                Slot::Locked if Instant::now() + delay < deadline => {
                    if !waited {
                        s.add(&s.fill_lock_waits, 1);
                        waited = true;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(POLL_MAX);
                    continue;
                }
                Slot::Locked => false,
            };
            if !took {
                if matches!(slot, Slot::Empty | Slot::Tomb(_)) && Instant::now() < deadline {
                    // Another reader locked it or filled it first.
                    continue;
                }
                s.add(&s.record_misses, 1);
                return self.load_one(id).await;
            }
            s.add(&s.record_misses, 1);
            // The lock's CAS, to store over it: only ours if the token is.
            let lock_cas = match client.get(&key).await {
                Ok(Some(v)) if v.flags == FLAG_LOCK && v.data[..] == token[..] => Some(v.cas),
                _ => None,
            };
            let row = self.load(&[id]).await?.pop().map(|(_, r)| r);
            let record = row.as_deref().map(|r| self.record(r)).transpose()?;
            let Some(cas) = lock_cas else {
                return Ok(record);
            };
            // Over the lock (fenced, as fills are): the row, or its
            // absence (a tombstone when absence is not cached), so waiting
            // readers stop waiting.
            let (value, opts) = match &row {
                Some(r) => match postcard::to_stdvec(r) {
                    Ok(v) => (v, SetOptions::new(self.info.ttl, FLAG_RECORD)),
                    Err(_) => return Ok(record),
                },
                None if cfg.cache_absence => {
                    (Vec::new(), SetOptions::new(self.info.ttl, FLAG_RECORD))
                }
                None => (
                    Vec::new(),
                    SetOptions::new(cfg.tombstone_ttl, FLAG_TOMBSTONE),
                ),
            };
            match client.cas_fenced(&key, value, cas, opts, &fence).await {
                Ok(StoreStatus::Stored) => s.add(&s.fills_stored, 1),
                Ok(_) => s.add(&s.fills_refused, 1),
                Err(kura_client::Error::Fenced(_)) => s.add(&s.fills_fenced, 1),
                Err(_) => s.add(&s.cache_errors, 1),
            }
            return Ok(record);
        }
    }
}

impl<T: Record> Cached<T> {
    /// One record from the database, not stored.
    async fn load_one(&self, id: i64) -> Result<Option<T>> {
        match self.load(&[id]).await?.pop() {
            Some((_, r)) => self.record(&r).map(Some),
            None => Ok(None),
        }
    }
}
