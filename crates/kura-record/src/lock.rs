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
            let started = Instant::now();
            let slot = cache.read_slots(&keys, FLAG_RECORD).await.remove(0);
            let lock_opts = SetOptions::new(cfg.fill_lock_ttl, FLAG_LOCK);
            let token = rand::random::<u64>().to_be_bytes();
            let took = match &slot {
                Slot::Hit(data, _) => {
                    if let Ok(r) = postcard::from_bytes::<T>(data) {
                        s.add(&s.record_hits, 1);
                        return Ok(Some(r));
                    }
                    false
                }
                Slot::Unknown => false,
                Slot::Absent => matches!(client.add(&key, token, lock_opts).await, Ok(true)),
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
                if matches!(slot, Slot::Absent | Slot::Tomb(_)) && Instant::now() < deadline {
                    // Another reader locked it or filled it first.
                    continue;
                }
                s.add(&s.record_misses, 1);
                return Ok(self.load(&[id]).await?.pop());
            }
            s.add(&s.record_misses, 1);
            // The lock's CAS, to store over it: only ours if the token is.
            let lock_cas = match client.get(&key).await {
                Ok(Some(v)) if v.flags == FLAG_LOCK && v.data[..] == token[..] => Some(v.cas),
                _ => None,
            };
            let row = self.load(&[id]).await?.pop();
            let Some(cas) = lock_cas else { return Ok(row) };
            if started.elapsed() * 2 > Duration::from_secs(u64::from(cfg.tombstone_ttl)) {
                s.add(&s.fills_skipped, 1);
                return Ok(row);
            }
            // Over the lock: the record, or a tombstone when there is no
            // row, so waiting readers stop waiting.
            let (value, opts) = match &row {
                Some(r) => (
                    postcard::to_stdvec(r).unwrap_or_default(),
                    SetOptions::new(cfg.ttl, FLAG_RECORD),
                ),
                None => (
                    Vec::new(),
                    SetOptions::new(cfg.tombstone_ttl, FLAG_TOMBSTONE),
                ),
            };
            match client.cas(&key, value, cas, opts).await {
                Ok(StoreStatus::Stored) => s.add(&s.fills_stored, 1),
                Ok(_) => s.add(&s.fills_refused, 1),
                Err(_) => s.add(&s.cache_errors, 1),
            }
            return Ok(row);
        }
    }
}
