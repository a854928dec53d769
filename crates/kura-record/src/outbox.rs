//! The outbox: the keys a committed transaction must expire, written in
//! that transaction, removed once the cache took the tombstones. Whatever
//! is left (the process died after the commit, or the cache was down) is
//! expired by [`RecordCache::drain_outbox`], which start-up runs.

use std::time::Duration;

use sqlx::any::AnyRow;
use sqlx::Row;
use tokio::task::JoinHandle;

use crate::cache::RecordCache;
use crate::error::{Error, Result};

/// Outbox rows read per round of a drain.
const DRAIN_BATCH: usize = 500;

impl RecordCache {
    /// Expires the keys of every outbox row and removes the rows the cache
    /// took. Returns how many rows were drained; stops at the first round
    /// the cache refused (those rows stay for the next drain).
    ///
    /// # Errors
    /// The database's error.
    pub async fn drain_outbox(&self) -> Result<usize> {
        let table = &self.inner.cfg.outbox_table;
        let mut drained = 0;
        let mut after = -1i64;
        loop {
            let text = format!(
                "SELECT id, cache_keys FROM {table} WHERE id > {} ORDER BY id LIMIT {DRAIN_BATCH}",
                self.backend().params(0, 1)
            );
            let rows: Vec<AnyRow> = sqlx::query(&text)
                .bind(after)
                .fetch_all(self.pool())
                .await
                .map_err(Error::db("read the outbox"))?;
            if rows.is_empty() {
                return Ok(drained);
            }
            let mut ids = Vec::with_capacity(rows.len());
            let mut keys = Vec::new();
            for row in &rows {
                let id: i64 = row.try_get(0).map_err(Error::db("read the outbox"))?;
                // MariaDB's LONGTEXT reaches sqlx's Any driver as a BLOB.
                let text: String = row
                    .try_get::<String, _>(1)
                    .or_else(|_| {
                        row.try_get::<Vec<u8>, _>(1)
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                    })
                    .map_err(Error::db("read the outbox"))?;
                ids.push(id);
                keys.extend(
                    text.split(' ')
                        .filter(|k| !k.is_empty())
                        .map(str::to_string),
                );
                after = after.max(id);
            }
            keys.sort_unstable();
            keys.dedup();
            if !self.tombstone(&keys).await {
                return Ok(drained);
            }
            self.remove_outbox(&ids).await;
            drained += ids.len();
            let s = &self.inner.stats;
            s.add(&s.outbox_drained, ids.len() as u64);
            if rows.len() < DRAIN_BATCH {
                return Ok(drained);
            }
        }
    }

    /// Deletes outbox rows whose keys were expired. A failure leaves them
    /// for a later drain, which only tombstones the keys again.
    pub(crate) async fn remove_outbox(&self, ids: &[i64]) {
        let text = format!(
            "DELETE FROM {} WHERE id IN ({})",
            self.inner.cfg.outbox_table,
            self.backend().params(0, ids.len())
        );
        let mut q = sqlx::query(&text);
        for id in ids {
            q = q.bind(*id);
        }
        if let Err(e) = q.execute(self.pool()).await {
            tracing::warn!(%e, "removing drained outbox rows failed; a later drain repeats them");
        }
    }

    /// Drains the outbox every `every` in a task of its own, for the
    /// invalidations a down cache refused at commit time.
    pub fn spawn_drainer(&self, every: Duration) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = cache.drain_outbox().await {
                    tracing::warn!(%e, "draining the outbox failed");
                }
            }
        })
    }
}
