//! Records by primary key: one multi-get, the misses in one
//! `WHERE pk IN (...)` query, written back with one quiet multi-add per
//! server.

use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use sqlx::any::AnyRow;

use crate::cache::{Cached, Record, RecordCache};
use crate::error::{Error, Result};
use crate::fill::{Slot, FLAG_RECORD};
use crate::sql;

/// Most primary keys in one `IN (...)` (PostgreSQL takes 65,535 binds).
const IN_CHUNK: usize = 10_000;

impl RecordCache {
    /// Runs a database read within the timeout, counting it.
    pub(crate) async fn db_read<R>(
        &self,
        what: &'static str,
        f: impl Future<Output = std::result::Result<R, sqlx::Error>>,
    ) -> Result<R> {
        let s = &self.inner.stats;
        s.add(&s.db_queries, 1);
        let after = self.inner.cfg.db_timeout;
        match tokio::time::timeout(after, f).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(source)) => {
                s.add(&s.db_errors, 1);
                Err(Error::Database { what, source })
            }
            Err(_) => {
                s.add(&s.db_errors, 1);
                Err(Error::DatabaseTimeout { what, after })
            }
        }
    }
}

impl<T: Record> Cached<T> {
    /// The record `id`, from the cache or the database.
    ///
    /// # Errors
    /// [`Error::Database`]/[`Error::DatabaseTimeout`] when the record is not
    /// cached and the database cannot be read. Cache failures are not
    /// errors: the record is read from the database.
    pub async fn fetch(&self, id: i64) -> Result<Option<T>> {
        Ok(self.fetch_multi(&[id]).await?.pop())
    }

    /// The records of `ids` that exist, in the order of `ids` (duplicates
    /// once): one multi-get, then one query for the misses, written back
    /// in one quiet batch per server.
    ///
    /// # Errors
    /// As [`Cached::fetch`].
    pub async fn fetch_multi(&self, ids: &[i64]) -> Result<Vec<T>> {
        let mut uniq = Vec::with_capacity(ids.len());
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        for &id in ids {
            if seen.insert(id) {
                uniq.push(id);
            }
        }
        if uniq.is_empty() {
            return Ok(Vec::new());
        }
        let cache = &self.cache;
        let s = &cache.inner.stats;
        let started = Instant::now();
        let keys: Vec<String> = uniq.iter().map(|&id| self.record_key(id)).collect();
        let slots = cache.read_slots(&keys, FLAG_RECORD).await;
        let mut found: HashMap<i64, T> = HashMap::with_capacity(uniq.len());
        let mut missed = Vec::new();
        for (i, slot) in slots.into_iter().enumerate() {
            let id = uniq[i];
            match slot {
                Slot::Hit(data, cas) => match postcard::from_bytes::<T>(&data) {
                    Ok(r) => {
                        found.insert(id, r);
                    }
                    // Not a value of this type: replace it under its CAS.
                    Err(_) => missed.push((id, Slot::Tomb(cas))),
                },
                other => missed.push((id, other)),
            }
        }
        s.add(&s.record_hits, found.len() as u64);
        s.add(&s.record_misses, missed.len() as u64);
        if !missed.is_empty() {
            let miss_ids: Vec<i64> = missed.iter().map(|(id, _)| *id).collect();
            let rows = self.load(&miss_ids).await?;
            let mut back = Vec::with_capacity(rows.len());
            let how: HashMap<i64, Option<u64>> = missed
                .iter()
                .filter_map(|(id, slot)| slot.fill().map(|h| (*id, h)))
                .collect();
            for row in rows {
                let id = row.id();
                if let (Some(h), Ok(bytes)) = (how.get(&id), postcard::to_stdvec(&row)) {
                    back.push((self.record_key(id), bytes, *h));
                }
                found.insert(id, row);
            }
            cache.write_back(started, back, FLAG_RECORD).await;
        }
        Ok(uniq
            .into_iter()
            .filter_map(|id| found.remove(&id))
            .collect())
    }

    /// The record `id` as the cache holds it now, without the database
    /// (None: absent, tombstoned, or the cache failed).
    pub async fn peek(&self, id: i64) -> Option<T> {
        let keys = [self.record_key(id)];
        match self.cache.read_slots(&keys, FLAG_RECORD).await.pop() {
            Some(Slot::Hit(data, _)) => postcard::from_bytes(&data).ok(),
            _ => None,
        }
    }

    /// Rows by primary key from the database: one query per
    /// [`IN_CHUNK`] keys.
    pub(crate) async fn load(&self, ids: &[i64]) -> Result<Vec<T>> {
        let cache = &self.cache;
        let mut out = Vec::with_capacity(ids.len());
        for part in ids.chunks(IN_CHUNK) {
            let text = sql::select_by_ids(cache.backend(), &self.info.table, part.len());
            let mut q = sqlx::query(&text);
            for id in part {
                q = q.bind(*id);
            }
            let rows: Vec<AnyRow> = cache
                .db_read("read records", q.fetch_all(cache.pool()))
                .await?;
            let s = &cache.inner.stats;
            s.add(&s.db_rows, rows.len() as u64);
            for row in &rows {
                out.push(T::from_row(row).map_err(Error::db("decode a row"))?);
            }
        }
        Ok(out)
    }
}
