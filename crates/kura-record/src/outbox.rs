//! The outbox: the keys a committed transaction must expire, written in
//! that transaction, removed once the cache took the tombstones. Whatever
//! is left (the process died after the commit, or the cache was down) is
//! expired by [`RecordCache::drain_outbox`], which start-up runs.
//!
//! An outbox row's id starts with the time it was written (milliseconds
//! since the Unix epoch, shifted left 20 bits, then 20 random bits), so
//! the periodic drainer can leave alone the rows of commits still in
//! flight: those whose committer is about to tombstone their keys and
//! delete them itself.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;

use crate::cache::RecordCache;
use crate::error::{Error, Result};
use crate::value::Value;

/// Outbox rows read per round of a drain.
const DRAIN_BATCH: usize = 500;

/// Bits of randomness below an outbox id's time.
const ID_RANDOM_BITS: u32 = 20;

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| {
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX >> ID_RANDOM_BITS)
    })
}

/// A new outbox row's id: its time, then random bits.
pub(crate) fn outbox_id() -> i64 {
    let r = rand::random::<i64>() & ((1 << ID_RANDOM_BITS) - 1);
    ((millis(SystemTime::now()) << ID_RANDOM_BITS) | r) & i64::MAX
}

impl RecordCache {
    /// Expires the keys of every outbox row and removes the rows the cache
    /// took. Returns how many rows were drained; stops at the first round
    /// the cache refused (those rows stay for the next drain).
    ///
    /// # Errors
    /// The database's error.
    pub async fn drain_outbox(&self) -> Result<usize> {
        self.drain_before(i64::MAX).await
    }

    /// [`RecordCache::drain_outbox`] of the rows written more than `grace`
    /// ago: a commit still in flight (committed, its own tombstones not
    /// yet sent) is left to its committer.
    ///
    /// # Errors
    /// The database's error.
    pub async fn drain_outbox_older_than(&self, grace: Duration) -> Result<usize> {
        let before = millis(SystemTime::now() - grace).max(0) << ID_RANDOM_BITS;
        self.drain_before(before).await
    }

    async fn drain_before(&self, before: i64) -> Result<usize> {
        let table = &self.inner.cfg.outbox_table;
        let mut drained = 0;
        let mut after = -1i64;
        let p = |i| self.backend().params(i, 1);
        loop {
            let text = format!(
                "SELECT id, cache_keys FROM {table} WHERE id > {} AND id < {} ORDER BY id LIMIT {DRAIN_BATCH}",
                p(0),
                p(1)
            );
            let rows = self
                .inner
                .db
                .rows(&text, &[Value::Int(after), Value::Int(before)])
                .await
                .map_err(Error::db("read the outbox"))?;
            let rows = rows.values().map_err(|e| Error::decode("the outbox", e))?;
            if rows.is_empty() {
                return Ok(drained);
            }
            let mut ids = Vec::with_capacity(rows.len());
            let mut keys = Vec::new();
            for row in &rows {
                let (Some(id), Some(text)) = (
                    row.first().and_then(Value::as_i64),
                    row.get(1).and_then(Value::as_text),
                ) else {
                    return Err(Error::decode("the outbox", "a row of another shape"));
                };
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

    /// Writes an outbox row of its own (outside any transaction) for keys
    /// whose tombstones the cache did not take: the drainer retries them.
    pub(crate) async fn outbox_later(&self, keys: &[String]) -> Result<()> {
        let text = format!(
            "INSERT INTO {} (id, cache_keys) VALUES ({})",
            self.inner.cfg.outbox_table,
            self.backend().params(0, 2)
        );
        self.inner
            .db
            .execute(
                &text,
                &[Value::Int(outbox_id()), Value::Text(keys.join(" "))],
            )
            .await
            .map_err(Error::db("write the outbox"))?;
        Ok(())
    }

    /// Deletes outbox rows whose keys were expired. A failure leaves them
    /// for a later drain, which only tombstones the keys again.
    pub(crate) async fn remove_outbox(&self, ids: &[i64]) {
        let text = format!(
            "DELETE FROM {} WHERE id IN ({})",
            self.inner.cfg.outbox_table,
            self.backend().params(0, ids.len())
        );
        let args: Vec<Value> = ids.iter().map(|id| Value::Int(*id)).collect();
        if let Err(e) = self.inner.db.execute(&text, &args).await {
            tracing::warn!(%e, "removing drained outbox rows failed; a later drain repeats them");
        }
    }

    /// Drains the outbox every `every` in a task of its own, for the
    /// invalidations a down cache refused at commit time. Rows younger
    /// than `Config::outbox_grace` are left to the commits that wrote them.
    pub fn spawn_drainer(&self, every: Duration) -> JoinHandle<()> {
        let cache = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let grace = cache.inner.cfg.outbox_grace;
                if let Err(e) = cache.drain_outbox_older_than(grace).await {
                    tracing::warn!(%e, "draining the outbox failed");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outbox_ids_start_with_their_time() {
        let before = millis(SystemTime::now()) << ID_RANDOM_BITS;
        let id = outbox_id();
        let after = (millis(SystemTime::now()) + 1) << ID_RANDOM_BITS;
        assert!(before <= id && id < after, "{before} {id} {after}");
    }
}
