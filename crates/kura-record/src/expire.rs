//! Expiring entries for writes made outside [`crate::RecordTx`]: a
//! console, a migration, another service, a batch job. Call these after
//! the write commits. The keys are tombstoned at once; when the cache does
//! not take them, they go into the outbox (a row of their own) for the
//! drainer to retry.
//!
//! The window this leaves, and how the outbox closes it: between the
//! write's commit and the expire, readers are served the old entry; a
//! process that dies in between leaves it until its TTL. A fill racing
//! the expire is refused as for any invalidation (the tombstone). Writing
//! the keys into the outbox in the write's own transaction closes the
//! window against crashes: [`crate::RecordTx::expire`] and its siblings do
//! that, or another service can insert the row itself (`id`: any unique
//! positive BIGINT, best the milliseconds since the epoch shifted left 20
//! bits; `cache_keys`: the keys, space-separated, from
//! [`Cached::record_key`] and [`Cached::index_key`]).

use std::collections::BTreeSet;

use crate::cache::{Cached, Record, RecordCache};
use crate::error::{Error, Result};
use crate::index::row_values;
use crate::sql;
use crate::table::{index_key, IndexValue};
use crate::tx::Committed;
use crate::value::Value;

impl RecordCache {
    /// Tombstones `keys` now, or hands them to the outbox.
    async fn expire_keys(&self, keys: Vec<String>) -> Result<Committed> {
        let s = &self.inner.stats;
        s.add(&s.expires, 1);
        let expired = self.tombstone(&keys).await;
        if !expired {
            self.outbox_later(&keys).await?;
        }
        Ok(Committed {
            keys: keys.len(),
            expired,
        })
    }
}

impl<T: Record> Cached<T> {
    /// Expires rows `ids`: their records, the index entries of the rows as
    /// the database has them now, and those of the copies the cache holds
    /// (the values before the write, when they were cached).
    ///
    /// # Errors
    /// The database's error (reading the rows' index values, or writing
    /// the outbox when the cache refused).
    pub async fn expire(&self, ids: &[i64]) -> Result<Committed> {
        let mut keys: BTreeSet<String> = ids.iter().map(|&id| self.record_key(id)).collect();
        let t = &self.info.table;
        if !t.indexes.is_empty() && !ids.is_empty() {
            let cols = t.indexed_columns();
            let text = sql::select_index_values(self.cache.backend(), t, ids.len(), false);
            let args: Vec<Value> = ids.iter().map(|id| Value::Int(*id)).collect();
            let rows = self
                .cache
                .db_read("read index values", self.cache.inner.db.rows(&text, &args))
                .await?;
            let rows = rows
                .values()
                .map_err(|e| Error::decode(format!("index values of {}", t.name), e))?;
            for row in &rows {
                let (_, values) = row_values(t, &cols, row)?;
                let named: Vec<(&str, IndexValue)> =
                    cols.iter().map(String::as_str).zip(values).collect();
                keys.extend(self.entry_keys(&named)?);
            }
            // The cached copies' values: where the rows were before.
            let cached = self
                .cache
                .peek_slots(
                    &ids.iter()
                        .map(|&id| self.record_key(id))
                        .collect::<Vec<_>>(),
                    crate::fill::FLAG_RECORD,
                )
                .await;
            for slot in cached {
                if let crate::fill::Slot::Hit(data, _) = slot {
                    if let Ok(row) = postcard::from_bytes::<Vec<Value>>(&data) {
                        keys.extend(self.entry_keys(&self.named_values(&row))?);
                    }
                }
            }
        }
        self.cache.expire_keys(keys.into_iter().collect()).await
    }

    /// Expires one index entry (the list of ids under `values`).
    ///
    /// # Errors
    /// As [`Cached::index_key`], or writing the outbox.
    pub async fn expire_index(&self, columns: &[&str], values: &[IndexValue]) -> Result<Committed> {
        let key = self.index_key(columns, values)?;
        self.cache.expire_keys(vec![key]).await
    }

    /// Expires row `id` and the index entries of its `old` and `new`
    /// values of indexed columns, given as `(column, value)`: every index
    /// whose columns are all given has its entry expired (what a commit
    /// through [`crate::RecordTx`] expires, for a write made elsewhere).
    ///
    /// # Errors
    /// As [`Cached::index_key`], or writing the outbox.
    pub async fn expire_moved(
        &self,
        id: i64,
        old: &[(&str, IndexValue)],
        new: &[(&str, IndexValue)],
    ) -> Result<Committed> {
        let keys = self.moved_keys(id, old, new)?;
        self.cache.expire_keys(keys).await
    }
}

impl<T> Cached<T> {
    /// The record key of `id` and the entries of `old` and `new`.
    pub(crate) fn moved_keys(
        &self,
        id: i64,
        old: &[(&str, IndexValue)],
        new: &[(&str, IndexValue)],
    ) -> Result<Vec<String>> {
        let mut keys = BTreeSet::new();
        keys.insert(self.record_key(id));
        keys.extend(self.entry_keys(old)?);
        keys.extend(self.entry_keys(new)?);
        Ok(keys.into_iter().collect())
    }

    /// The entry of every index whose columns `values` all name.
    fn entry_keys(&self, values: &[(&str, IndexValue)]) -> Result<Vec<String>> {
        let t = &self.info.table;
        let mut keys = Vec::new();
        for (i, idx) in t.indexes.iter().enumerate() {
            let vs: Option<Vec<IndexValue>> = idx
                .iter()
                .map(|c| values.iter().find(|(n, _)| n == c).map(|(_, v)| v.clone()))
                .collect();
            if let Some(vs) = vs {
                keys.push(index_key(&self.info.prefix, i, &vs)?);
            }
        }
        Ok(keys)
    }

    /// A cached row's indexed columns' values, by name.
    fn named_values(&self, row: &[Value]) -> Vec<(&str, IndexValue)> {
        let t = &self.info.table;
        self.info
            .names
            .iter()
            .zip(row)
            .filter_map(|(n, v)| {
                let iv = match t.kind_of(n)? {
                    crate::table::Kind::Int => IndexValue::Int(v.as_i64()?),
                    crate::table::Kind::Text => IndexValue::Text(v.as_text()?.to_string()),
                    crate::table::Kind::Other => return None,
                };
                Some((n.as_str(), iv))
            })
            .collect()
    }
}
