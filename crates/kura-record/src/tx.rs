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

use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, Transaction};

use crate::cache::{Cached, RecordCache, TableInfo};
use crate::error::{Error, Result};
use crate::index::row_values;
use crate::sql;
use crate::table::{index_key, record_key};

/// A database transaction whose changes expire their cache entries once
/// it commits.
pub struct RecordTx {
    cache: RecordCache,
    tx: Transaction<'static, Any>,
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
        let tx = self.inner.pool.begin().await.map_err(Error::db("begin"))?;
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
    ///     sqlx::query("UPDATE items SET user_id = 2 WHERE id = 7")
    ///         .execute(tx.conn()).await.map_err(kura_record::Error::write)?;
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
                let _ = tx.tx.rollback().await;
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
    /// The connection to run the application's statements on.
    pub fn conn(&mut self) -> &mut AnyConnection {
        &mut self.tx
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
        let mut q = sqlx::query(&text);
        for id in ids {
            q = q.bind(*id);
        }
        let rows: Vec<AnyRow> = q
            .fetch_all(&mut *self.tx)
            .await
            .map_err(Error::db("read index values"))?;
        let cols = t.indexed_columns();
        for row in &rows {
            let all = row_values(t, &cols, row, 1)?;
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
            let id = rand::random::<i64>() & i64::MAX;
            let text = format!(
                "INSERT INTO {} (id, cache_keys) VALUES ({})",
                cfg.outbox_table,
                cache.backend().params(0, 2)
            );
            sqlx::query(&text)
                .bind(id)
                .bind(keys.join(" "))
                .execute(&mut *self.tx)
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
