//! Writes: a transaction that knows which rows it changes. Before a row
//! is changed, [`RecordTx::touch`] locks it (`FOR UPDATE`) and notes its
//! indexed values; at commit the rows are read again for the new values,
//! every affected key (records, old and new index entries) goes into the
//! outbox in the same transaction, the transaction commits, the keys are
//! tombstoned and the outbox row is deleted. A process that dies after
//! the commit leaves the outbox row, which the next start-up (or any
//! [`RecordCache::drain_outbox`]) expires.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::cache::{Cached, RecordCache, TableInfo};
use crate::db::{Conn, DbTx};
use crate::error::{Error, Result};
use crate::index::row_values;
use crate::sql;
use crate::table::{index_key, record_key, IndexValue};
use crate::value::Value;

/// A database transaction whose changes expire their cache entries once
/// it commits.
pub struct RecordTx {
    cache: RecordCache,
    tx: DbTx,
    touched: Vec<(Arc<TableInfo>, Vec<i64>)>,
    keys: BTreeSet<String>,
}

/// What a commit did to the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Keys tombstoned (records and index entries).
    pub keys: usize,
    /// Whether the cache took every tombstone; when not, the outbox keeps
    /// the keys until a drain succeeds.
    pub expired: bool,
}

/// The future a [`RecordCache::transaction`] body returns.
pub type TxFuture<'t, R> = Pin<Box<dyn Future<Output = Result<R>> + Send + 't>>;

impl RecordCache {
    /// Begins a transaction.
    ///
    /// # Errors
    /// The database's error.
    pub async fn begin(&self) -> Result<RecordTx> {
        let tx = self.inner.db.begin().await.map_err(Error::db("begin"))?;
        Ok(RecordTx {
            cache: self.clone(),
            tx,
            touched: Vec::new(),
            keys: BTreeSet::new(),
        })
    }

    /// Runs `body` in a transaction and commits it (rolls back when
    /// `body` fails), then expires what it touched.
    ///
    /// ```text
    /// cache.transaction(|tx| Box::pin(async move {
    ///     tx.touch(&items, &[7]).await?;
    ///     tx.execute("UPDATE items SET user_id = ? WHERE id = ?", &[2.into(), 7.into()]).await?;
    ///     Ok(())
    /// })).await?;
    /// ```
    ///
    /// # Errors
    /// `body`'s error, or the database's.
    pub async fn transaction<R, F>(&self, body: F) -> Result<(R, Committed)>
    where
        F: for<'t> FnOnce(&'t mut RecordTx) -> TxFuture<'t, R>,
    {
        let mut tx = self.begin().await?;
        match body(&mut tx).await {
            Ok(r) => Ok((r, tx.commit().await?)),
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
}

impl Error {
    /// Wraps an application's error in a transaction body.
    pub fn write(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::Write(e.into())
    }
}

impl RecordTx {
    /// The transaction's connection, for the driver's own API (sqlx's
    /// `MySqlConnection` or `PgConnection`).
    pub fn conn(&mut self) -> Conn<'_> {
        self.tx.conn()
    }

    /// Runs the application's statement in the transaction, with `?`
    /// placeholders on both databases ([`crate::translate`]); returns the
    /// rows it affected.
    ///
    /// # Errors
    /// [`Error::Write`] with the database's error.
    pub async fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        let sql = sql::translate(sql, self.cache.backend());
        self.tx.execute(&sql, args).await.map_err(Error::write)
    }

    /// Expires rows `ids` of `table` when this transaction commits: their
    /// records, and their index entries as the rows are at commit (no row
    /// lock: for an indexed column changed here, [`RecordTx::touch`] first,
    /// or name the old values with [`RecordTx::expire_moved`]).
    pub fn expire<T>(&mut self, table: &Cached<T>, ids: &[i64]) {
        for &id in ids {
            self.keys.insert(record_key(&table.info.prefix, id));
        }
        self.touched.push((table.info.clone(), ids.to_vec()));
    }

    /// Expires one index entry when this transaction commits.
    ///
    /// # Errors
    /// As [`Cached::index_key`].
    pub fn expire_index<T>(
        &mut self,
        table: &Cached<T>,
        columns: &[&str],
        values: &[IndexValue],
    ) -> Result<()> {
        self.keys.insert(table.index_key(columns, values)?);
        Ok(())
    }

    /// Expires row `id` and the index entries of its `old` and `new`
    /// values of indexed columns (`(column, value)`, as the outbox does:
    /// every index whose columns are all given gets its entry expired).
    ///
    /// # Errors
    /// As [`Cached::index_key`].
    pub fn expire_moved<T>(
        &mut self,
        table: &Cached<T>,
        id: i64,
        old: &[(&str, IndexValue)],
        new: &[(&str, IndexValue)],
    ) -> Result<()> {
        self.keys.extend(table.moved_keys(id, old, new)?);
        Ok(())
    }

    /// Declares that rows `ids` of `table` are changed (updated, deleted
    /// or inserted) by this transaction. Call it before changing an
    /// indexed column: it locks the rows and notes their index values so
    /// that both the old and the new index entries are expired. For rows
    /// being inserted, call it after the insert.
    ///
    /// # Errors
    /// The database's error.
    pub async fn touch<T>(&mut self, table: &Cached<T>, ids: &[i64]) -> Result<()> {
        for &id in ids {
            self.keys.insert(record_key(&table.info.prefix, id));
        }
        self.index_keys(&table.info, ids, true).await?;
        self.touched.push((table.info.clone(), ids.to_vec()));
        Ok(())
    }

    /// Adds the index entries of rows `ids` as they are now.
    async fn index_keys(&mut self, info: &TableInfo, ids: &[i64], lock: bool) -> Result<()> {
        let t = &info.table;
        if t.indexes.is_empty() || ids.is_empty() {
            return Ok(());
        }
        let backend = self.cache.backend();
        let text = sql::select_index_values(backend, t, ids.len(), lock);
        let args: Vec<Value> = ids.iter().map(|id| Value::Int(*id)).collect();
        let rows = self
            .tx
            .rows(&text, &args)
            .await
            .map_err(Error::db("read index values"))?;
        let rows = rows
            .values()
            .map_err(|e| Error::decode(format!("index values of {}", t.name), e))?;
        let cols = t.indexed_columns();
        for row in &rows {
            let (_, all) = row_values(t, &cols, row)?;
            for (i, idx) in t.indexes.iter().enumerate() {
                let values: Vec<_> = idx
                    .iter()
                    .map(|c| all[cols.iter().position(|x| x == c).unwrap_or(0)].clone())
                    .collect();
                self.keys.insert(index_key(&info.prefix, i, &values)?);
            }
        }
        Ok(())
    }

    /// Rolls back: nothing is expired.
    ///
    /// # Errors
    /// The database's error.
    pub async fn rollback(self) -> Result<()> {
        self.tx.rollback().await.map_err(Error::db("rollback"))
    }

    /// Commits: the new index values are read, the keys written to the
    /// outbox, the transaction committed, the keys tombstoned and the
    /// outbox row removed. A cache failure does not fail the commit (the
    /// outbox keeps the keys; `expired` is false).
    ///
    /// # Errors
    /// The database's error; then nothing was committed.
    pub async fn commit(mut self) -> Result<Committed> {
        for (info, ids) in std::mem::take(&mut self.touched) {
            self.index_keys(&info, &ids, false).await?;
        }
        let keys: Vec<String> = std::mem::take(&mut self.keys).into_iter().collect();
        let cache = self.cache.clone();
        let cfg = &cache.inner.cfg;
        let outbox_id = if keys.is_empty() {
            None
        } else {
            let id = crate::outbox::outbox_id();
            let text = format!(
                "INSERT INTO {} (id, cache_keys) VALUES ({})",
                cfg.outbox_table,
                cache.backend().params(0, 2)
            );
            self.tx
                .execute(&text, &[Value::Int(id), Value::Text(keys.join(" "))])
                .await
                .map_err(Error::db("write the outbox"))?;
            Some(id)
        };
        self.tx.commit().await.map_err(Error::db("commit"))?;
        let s = &cache.inner.stats;
        s.add(&s.commits, 1);
        if let Some(hook) = &cache.inner.hooks.after_commit {
            hook();
        }
        let expired = cache.tombstone(&keys).await;
        if let (true, Some(id)) = (expired, outbox_id) {
            cache.remove_outbox(&[id]).await;
        }
        Ok(Committed {
            keys: keys.len(),
            expired,
        })
    }
}
