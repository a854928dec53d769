//! Cached indexes: an index entry is the list of primary keys of the rows
//! with that index value, read and filled as records are (ADD or CAS over
//! a tombstone); the records then come from [`Cached::fetch_multi`].

use std::collections::HashMap;
use std::time::Instant;

use sqlx::any::AnyRow;
use sqlx::Row;

use crate::cache::{Cached, Record};
use crate::error::{Error, Result};
use crate::fill::{Slot, FLAG_INDEX};
use crate::sql;
use crate::table::{index_key, IndexValue, Kind, Table};

impl<T: Record> Cached<T> {
    /// The rows whose `columns` equal `values`, in primary key order: the
    /// index entry (one get), then the records (one multi-get, misses in
    /// one query, written back in one batch per server).
    ///
    /// # Errors
    /// [`Error::Declaration`] when no cached index is on `columns` or a
    /// value does not fit, [`Error::KeyTooLong`], or as [`Cached::fetch`].
    pub async fn fetch_by_index(&self, columns: &[&str], values: &[IndexValue]) -> Result<Vec<T>> {
        let mut all = self
            .fetch_multi_by_index(columns, std::slice::from_ref(&values.to_vec()))
            .await?;
        Ok(all.pop().unwrap_or_default())
    }

    /// [`Cached::fetch_by_index`] for many values at once: one multi-get of
    /// the index entries, one query for the missed ones, then one
    /// [`Cached::fetch_multi`] of all their records.
    ///
    /// # Errors
    /// As [`Cached::fetch_by_index`].
    pub async fn fetch_multi_by_index(
        &self,
        columns: &[&str],
        values: &[Vec<IndexValue>],
    ) -> Result<Vec<Vec<T>>> {
        let lists = self.ids_by_index(columns, values).await?;
        let all: Vec<i64> = lists.iter().flatten().copied().collect();
        let mut rows: HashMap<i64, T> = self
            .fetch_multi(&all)
            .await?
            .into_iter()
            .map(|r| (r.id(), r))
            .collect();
        let mut out = Vec::with_capacity(lists.len());
        for ids in lists {
            // A row has one value per index: an id is under one list (a
            // value asked for twice gets its rows the first time).
            out.push(ids.iter().filter_map(|id| rows.remove(id)).collect());
        }
        Ok(out)
    }

    /// An index entry as the cache holds it now, without the database.
    ///
    /// # Errors
    /// As [`Cached::fetch_by_index`], for the key.
    pub async fn peek_index(
        &self,
        columns: &[&str],
        values: &[IndexValue],
    ) -> Result<Option<Vec<i64>>> {
        let keys = [self.index_key(columns, values)?];
        Ok(match self.cache.read_slots(&keys, FLAG_INDEX).await.pop() {
            Some(Slot::Hit(data, _)) => postcard::from_bytes(&data).ok(),
            _ => None,
        })
    }

    /// The primary keys under each index value, from the cache or the
    /// database (filled as [`Cached::fetch_by_index`] fills).
    ///
    /// # Errors
    /// As [`Cached::fetch_by_index`].
    pub async fn ids_by_index(
        &self,
        columns: &[&str],
        values: &[Vec<IndexValue>],
    ) -> Result<Vec<Vec<i64>>> {
        let t = &self.info.table;
        let idx = t.index_of(columns)?;
        for v in values {
            check_values(t, &t.indexes[idx], v)?;
        }
        // A value asked for twice is read and filled once: two fills of
        // one key in one batch would race each other.
        let mut uniq: Vec<Vec<IndexValue>> = Vec::with_capacity(values.len());
        let mut seen: HashMap<&Vec<IndexValue>, usize> = HashMap::with_capacity(values.len());
        let mut at = Vec::with_capacity(values.len());
        for v in values {
            let i = *seen.entry(v).or_insert_with(|| {
                uniq.push(v.clone());
                uniq.len() - 1
            });
            at.push(i);
        }
        let lists = self.ids_by_index_uniq(idx, &uniq).await?;
        Ok(at.into_iter().map(|i| lists[i].clone()).collect())
    }

    async fn ids_by_index_uniq(
        &self,
        idx: usize,
        values: &[Vec<IndexValue>],
    ) -> Result<Vec<Vec<i64>>> {
        if values.is_empty() {
            return Ok(Vec::new());
        }
        let cache = &self.cache;
        let s = &cache.inner.stats;
        let started = Instant::now();
        let keys = values
            .iter()
            .map(|v| index_key(&self.info.prefix, idx, v))
            .collect::<Result<Vec<_>>>()?;
        let slots = cache.read_slots(&keys, FLAG_INDEX).await;
        let mut out: Vec<Option<Vec<i64>>> = vec![None; values.len()];
        let mut missed = Vec::new();
        for (i, slot) in slots.into_iter().enumerate() {
            match slot {
                Slot::Hit(data, cas) => match postcard::from_bytes::<Vec<i64>>(&data) {
                    Ok(ids) => out[i] = Some(ids),
                    Err(_) => missed.push((i, Slot::Tomb(cas))),
                },
                other => missed.push((i, other)),
            }
        }
        s.add(&s.index_hits, (values.len() - missed.len()) as u64);
        s.add(&s.index_misses, missed.len() as u64);
        if missed.is_empty() {
            return Ok(out.into_iter().map(Option::unwrap_or_default).collect());
        }
        let wanted: Vec<&Vec<IndexValue>> = missed.iter().map(|(i, _)| &values[*i]).collect();
        let mut lists = self.load_index(idx, &wanted).await?;
        let mut back = Vec::new();
        for ((i, slot), ids) in missed.iter().zip(lists.iter_mut()) {
            if let (Some(how), Ok(bytes)) = (slot.fill(), postcard::to_stdvec(&*ids)) {
                back.push((keys[*i].clone(), bytes, how));
            }
            out[*i] = Some(std::mem::take(ids));
        }
        cache.write_back(started, back, FLAG_INDEX).await;
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// The primary keys under each of `wanted` from the database, in one
    /// query.
    async fn load_index(&self, idx: usize, wanted: &[&Vec<IndexValue>]) -> Result<Vec<Vec<i64>>> {
        let cache = &self.cache;
        let t = &self.info.table;
        let cols = &t.indexes[idx];
        let text = sql::select_ids_by_index(cache.backend(), t, cols, wanted.len());
        let mut q = sqlx::query(&text);
        for v in wanted {
            for x in v.iter() {
                q = sql::bind_value(q, x);
            }
        }
        let rows: Vec<AnyRow> = cache
            .db_read("read an index", q.fetch_all(cache.pool()))
            .await?;
        let s = &cache.inner.stats;
        s.add(&s.db_rows, rows.len() as u64);
        let mut lists = vec![Vec::new(); wanted.len()];
        let position: HashMap<&Vec<IndexValue>, usize> =
            wanted.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        for row in &rows {
            let id: i64 = row.try_get(0).map_err(Error::db("decode a row"))?;
            let got = row_values(t, cols, row, 1)?;
            let at = position.get(&got).copied().or_else(|| {
                // A case-insensitive collation matched a differently
                // written text value.
                wanted.iter().position(|w| loosely_equal(w, &got))
            });
            if let Some(at) = at {
                lists[at].push(id);
            }
        }
        Ok(lists)
    }
}

/// The index columns' values of a row, read from column `from` on.
pub(crate) fn row_values(
    t: &Table,
    cols: &[String],
    row: &AnyRow,
    from: usize,
) -> Result<Vec<IndexValue>> {
    let mut out = Vec::with_capacity(cols.len());
    for (j, c) in cols.iter().enumerate() {
        let v = match t.kind_of(c) {
            Some(Kind::Text) => IndexValue::Text(
                row.try_get::<String, _>(from + j)
                    .map_err(Error::db("decode an index value"))?,
            ),
            _ => IndexValue::Int(
                row.try_get::<i64, _>(from + j)
                    .map_err(Error::db("decode an index value"))?,
            ),
        };
        out.push(v);
    }
    Ok(out)
}

fn loosely_equal(a: &[IndexValue], b: &[IndexValue]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (IndexValue::Text(x), IndexValue::Text(y)) => x.eq_ignore_ascii_case(y),
            _ => x == y,
        })
}

fn check_values(t: &Table, cols: &[String], v: &[IndexValue]) -> Result<()> {
    if v.len() != cols.len() {
        return Err(Error::Declaration(format!(
            "{} values for an index on {} columns",
            v.len(),
            cols.len()
        )));
    }
    for (c, x) in cols.iter().zip(v) {
        let fits = matches!(
            (t.kind_of(c), x),
            (Some(Kind::Int), IndexValue::Int(_)) | (Some(Kind::Text), IndexValue::Text(_))
        );
        if !fits {
            return Err(Error::Declaration(format!(
                "value {x:?} does not fit column {c}"
            )));
        }
    }
    Ok(())
}
