//! Records by primary key: one multi-get, the misses in one
//! `WHERE pk IN (...)` query, written back with one quiet multi-add per
//! server. A record is cached as its row (the declared columns' values,
//! postcard); an id with no row is cached as an empty record, so a
//! missing id costs the database one query, not one per fetch.

use std::collections::HashMap;
use std::future::Future;
use std::time::Instant;

use crate::cache::{Cached, Record, RecordCache};
use crate::error::{Error, Result};
use crate::fill::{Slot, FLAG_RECORD};
use crate::sql;
use crate::value::Value;

/// Most primary keys in one `IN (...)` (PostgreSQL takes 65,535 binds).
const IN_CHUNK: usize = 10_000;

/// A row: the declared columns' values, in declaration order.
pub(crate) type Row = Vec<Value>;

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
    /// cached and the database cannot be read; [`Error::Decode`] when the
    /// row does not fit `T`. Cache failures are not errors: the record is
    /// read from the database.
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
        let rows = self.rows_multi(ids).await?;
        let mut out = Vec::with_capacity(rows.len());
        for (_, row) in rows {
            out.push(self.record(&row)?);
        }
        Ok(out)
    }

    /// The rows of `ids` that exist, in the order of `ids` (duplicates
    /// once), from the cache or the database.
    pub(crate) async fn rows_multi(&self, ids: &[i64]) -> Result<Vec<(i64, Row)>> {
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
        let (slots, fence) = cache.read_slots(&keys, FLAG_RECORD).await;
        let mut found: HashMap<i64, Option<Row>> = HashMap::with_capacity(uniq.len());
        let mut missed = Vec::new();
        for (i, slot) in slots.into_iter().enumerate() {
            let id = uniq[i];
            match slot {
                Slot::Hit(data, cas) => match self.decode_row(&data) {
                    Some(r) => {
                        found.insert(id, r);
                    }
                    // Not a row of this declaration: replace it under its CAS.
                    None => missed.push((id, Slot::Tomb(cas))),
                },
                other => missed.push((id, other)),
            }
        }
        s.add(&s.record_hits, found.len() as u64);
        s.add(&s.record_misses, missed.len() as u64);
        if !missed.is_empty() {
            let miss_ids: Vec<i64> = missed.iter().map(|(id, _)| *id).collect();
            let mut rows: HashMap<i64, Row> = self.load(&miss_ids).await?.into_iter().collect();
            let mut back = Vec::with_capacity(missed.len());
            let absence = cache.inner.cfg.cache_absence;
            for (id, slot) in &missed {
                let row = rows.remove(id);
                if let Some(how) = slot.fill() {
                    match &row {
                        Some(r) => {
                            if let Ok(bytes) = postcard::to_stdvec(r) {
                                back.push((self.record_key(*id), bytes, how));
                            }
                        }
                        // Cached absence: an empty record, filled as rows are.
                        None if absence => back.push((self.record_key(*id), Vec::new(), how)),
                        None => {}
                    }
                }
                found.insert(*id, row);
            }
            cache
                .write_back(started, fence, back, FLAG_RECORD, self.info.ttl)
                .await;
        }
        Ok(uniq
            .into_iter()
            .filter_map(|id| found.remove(&id).flatten().map(|r| (id, r)))
            .collect())
    }

    /// A cached record's row: Some(None) for a cached absence, None when
    /// the bytes are not a row of this declaration.
    fn decode_row(&self, data: &[u8]) -> Option<Option<Row>> {
        if data.is_empty() {
            return Some(None);
        }
        let row: Row = postcard::from_bytes(data).ok()?;
        (row.len() == self.info.names.len()).then_some(Some(row))
    }

    /// Builds the record type from a row.
    pub(crate) fn record(&self, row: &[Value]) -> Result<T> {
        let names: Vec<&str> = self.info.names.iter().map(String::as_str).collect();
        crate::de::from_row(&names, row).map_err(|e| {
            let s = &self.cache.inner.stats;
            s.add(&s.decode_errors, 1);
            Error::decode(format!("a row of {}", self.info.table.name), e)
        })
    }

    /// The record `id` as the cache holds it now, without the database
    /// (None: absent, tombstoned, cached as absent, or the cache failed).
    pub async fn peek(&self, id: i64) -> Option<T> {
        let keys = [self.record_key(id)];
        match self.cache.read_slots(&keys, FLAG_RECORD).await.0.pop() {
            Some(Slot::Hit(data, _)) => self.record(&self.decode_row(&data)??).ok(),
            _ => None,
        }
    }

    /// Whether the cache holds `id`'s absence (an empty record).
    pub async fn peek_absent(&self, id: i64) -> bool {
        let keys = [self.record_key(id)];
        matches!(
            self.cache.read_slots(&keys, FLAG_RECORD).await.0.pop(),
            Some(Slot::Hit(data, _)) if data.is_empty()
        )
    }

    /// Rows by primary key from the database: one query per
    /// [`IN_CHUNK`] keys.
    pub(crate) async fn load(&self, ids: &[i64]) -> Result<Vec<(i64, Row)>> {
        let cache = &self.cache;
        let mut out = Vec::with_capacity(ids.len());
        for part in ids.chunks(IN_CHUNK) {
            let text = sql::select_by_ids(cache.backend(), &self.info.table, part.len());
            let args: Vec<Value> = part.iter().map(|id| Value::Int(*id)).collect();
            let rows = cache
                .db_read("read records", cache.inner.db.rows(&text, &args))
                .await?;
            let s = &cache.inner.stats;
            s.add(&s.db_rows, rows.len() as u64);
            let rows = rows.values().map_err(|e| {
                s.add(&s.decode_errors, 1);
                Error::decode(format!("a row of {}", self.info.table.name), e)
            })?;
            for row in rows {
                let id = row.first().and_then(Value::as_i64).ok_or_else(|| {
                    Error::decode(
                        format!("a row of {}", self.info.table.name),
                        "the primary key is not a 64-bit integer",
                    )
                })?;
                out.push((id, row));
            }
        }
        Ok(out)
    }
}
