//! Cached indexes: an index entry is the list of primary keys of the rows
//! with that index value, read and filled as records are (a CAS over a
//! placeholder or tombstone); the records then come from the same path as
//! [`Cached::fetch_multi`].
//!
//! A member whose row no longer has the asked value (a write made outside
//! [`crate::RecordTx`] and not expired) is not returned: the entry is read
//! again from the database and replaced under the CAS it was read with
//! (so an invalidation meanwhile still wins), as second_level_cache does.

use std::collections::HashMap;
use std::time::Instant;

use kura_client::Fence;

use crate::cache::{Cached, Record};
use crate::error::{Error, Result};
use crate::fetch::Row;
use crate::fill::{Fill, Slot, FLAG_INDEX};
use crate::sql;
use crate::table::{index_key, IndexValue, Kind, Table};
use crate::value::Value;

/// An index entry: its ids, and the CAS it was read with from the cache
/// (None: read from the database).
pub(crate) struct Entry {
    pub(crate) ids: Vec<i64>,
    pub(crate) cas: Option<u64>,
}

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

    /// The one row of a unique index (a user by email), or None.
    ///
    /// # Errors
    /// [`Error::Declaration`] when the index on `columns` is not declared
    /// with [`Table::unique_index`]; otherwise as [`Cached::fetch_by_index`].
    pub async fn fetch_by_unique(
        &self,
        columns: &[&str],
        values: &[IndexValue],
    ) -> Result<Option<T>> {
        let t = &self.info.table;
        let i = t.index_of(columns)?;
        if !t.unique.get(i).copied().unwrap_or(false) {
            return Err(Error::Declaration(format!(
                "the index on ({}) of {} is not unique",
                columns.join(", "),
                t.name
            )));
        }
        Ok(self
            .fetch_by_index(columns, values)
            .await?
            .into_iter()
            .next())
    }

    /// [`Cached::fetch_by_index`] for many values at once: one multi-get of
    /// the index entries, one query for the missed ones, then one
    /// multi-get of all their records.
    ///
    /// # Errors
    /// As [`Cached::fetch_by_index`].
    pub async fn fetch_multi_by_index(
        &self,
        columns: &[&str],
        values: &[Vec<IndexValue>],
    ) -> Result<Vec<Vec<T>>> {
        let t = &self.info.table;
        let idx = t.index_of(columns)?;
        let (uniq, at) = self.uniq(idx, values)?;
        let (mut entries, fence) = self.entries(idx, &uniq).await?;
        let all: Vec<i64> = entries.iter().flat_map(|e| e.ids.iter().copied()).collect();
        let mut rows: HashMap<i64, Row> = self.rows_multi(&all).await?.into_iter().collect();
        // Entries from the cache with a member whose row has another value.
        let cols = &t.indexes[idx];
        let stale: Vec<usize> = (0..uniq.len())
            .filter(|&i| {
                entries[i].cas.is_some()
                    && entries[i].ids.iter().any(|id| {
                        rows.get(id)
                            .is_some_and(|r| !self.row_matches(cols, r, &uniq[i]))
                    })
            })
            .collect();
        if !stale.is_empty() {
            self.refill(idx, &uniq, &stale, &mut entries, fence).await?;
            let more: Vec<i64> = stale
                .iter()
                .flat_map(|&i| entries[i].ids.iter().copied())
                .filter(|id| !rows.contains_key(id))
                .collect();
            rows.extend(self.rows_multi(&more).await?);
        }
        let mut lists = Vec::with_capacity(uniq.len());
        for e in &entries {
            let mut list = Vec::with_capacity(e.ids.len());
            for id in &e.ids {
                if let Some(r) = rows.get(id) {
                    list.push(self.record(r)?);
                }
            }
            lists.push(Some(list));
        }
        // A row has one value per index: a value asked for twice gets its
        // rows the first time.
        Ok(at
            .into_iter()
            .map(|i| lists[i].take().unwrap_or_default())
            .collect())
    }

    /// Reads the stale entries again from the database and replaces them
    /// under the CAS they were read with.
    async fn refill(
        &self,
        idx: usize,
        uniq: &[Vec<IndexValue>],
        stale: &[usize],
        entries: &mut [Entry],
        fence: Fence,
    ) -> Result<()> {
        let s = &self.cache.inner.stats;
        s.add(&s.index_stale, stale.len() as u64);
        let started = Instant::now();
        let wanted: Vec<&Vec<IndexValue>> = stale.iter().map(|&i| &uniq[i]).collect();
        let lists = self.load_index(idx, &wanted).await?;
        let mut back: Vec<Fill> = Vec::new();
        for (&i, ids) in stale.iter().zip(lists) {
            if let (Some(cas), Ok(bytes)) = (entries[i].cas, postcard::to_stdvec(&ids)) {
                back.push((
                    index_key(&self.info.prefix, idx, &uniq[i])?,
                    bytes,
                    Some(cas),
                ));
            }
            entries[i] = Entry { ids, cas: None };
        }
        self.cache
            .write_back(started, fence, back, FLAG_INDEX, self.info.ttl)
            .await;
        Ok(())
    }

    /// Whether a row's indexed columns hold `want` (text compared as a
    /// case-insensitive collation would).
    fn row_matches(&self, cols: &[String], row: &[Value], want: &[IndexValue]) -> bool {
        cols.iter().zip(want).all(|(c, w)| {
            let at = self.info.names.iter().position(|n| n == c);
            let v = at.and_then(|i| row.get(i));
            match (v, w) {
                (Some(v), IndexValue::Int(i)) => v.as_i64() == Some(*i),
                (Some(v), IndexValue::Text(t)) => v
                    .as_text()
                    .is_some_and(|s| s.trim_end().eq_ignore_ascii_case(t.trim_end())),
                (None, _) => true,
            }
        })
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
        Ok(match self.cache.peek_slots(&keys, FLAG_INDEX).await.pop() {
            Some(Slot::Hit(data, _)) => postcard::from_bytes(&data).ok(),
            _ => None,
        })
    }

    /// The primary keys under each index value, from the cache or the
    /// database (filled as [`Cached::fetch_by_index`] fills; members are not
    /// checked against their rows).
    ///
    /// # Errors
    /// As [`Cached::fetch_by_index`].
    pub async fn ids_by_index(
        &self,
        columns: &[&str],
        values: &[Vec<IndexValue>],
    ) -> Result<Vec<Vec<i64>>> {
        let idx = self.info.table.index_of(columns)?;
        let (uniq, at) = self.uniq(idx, values)?;
        let (entries, _) = self.entries(idx, &uniq).await?;
        Ok(at.into_iter().map(|i| entries[i].ids.clone()).collect())
    }

    /// The values checked, each once (a value asked for twice is read and
    /// filled once: two fills of one key in one batch would race), and
    /// where each asked value is among them.
    fn uniq(
        &self,
        idx: usize,
        values: &[Vec<IndexValue>],
    ) -> Result<(Vec<Vec<IndexValue>>, Vec<usize>)> {
        let t = &self.info.table;
        let mut uniq: Vec<Vec<IndexValue>> = Vec::with_capacity(values.len());
        let mut seen: HashMap<&Vec<IndexValue>, usize> = HashMap::with_capacity(values.len());
        let mut at = Vec::with_capacity(values.len());
        for v in values {
            check_values(t, &t.indexes[idx], v)?;
            let i = *seen.entry(v).or_insert_with(|| {
                uniq.push(v.clone());
                uniq.len() - 1
            });
            at.push(i);
        }
        Ok((uniq, at))
    }

    /// The entries of distinct values, from the cache or the database, and
    /// the fence of the read (for replacing them).
    pub(crate) async fn entries(
        &self,
        idx: usize,
        values: &[Vec<IndexValue>],
    ) -> Result<(Vec<Entry>, Fence)> {
        if values.is_empty() {
            return Ok((Vec::new(), Fence::default()));
        }
        let cache = &self.cache;
        let s = &cache.inner.stats;
        let started = Instant::now();
        let keys = values
            .iter()
            .map(|v| index_key(&self.info.prefix, idx, v))
            .collect::<Result<Vec<_>>>()?;
        let (slots, fence) = cache.read_slots(&keys, FLAG_INDEX).await;
        let mut out: Vec<Option<Entry>> = (0..values.len()).map(|_| None).collect();
        let mut missed = Vec::new();
        for (i, slot) in slots.into_iter().enumerate() {
            match slot {
                Slot::Hit(data, cas) => match postcard::from_bytes::<Vec<i64>>(&data) {
                    Ok(ids) => {
                        out[i] = Some(Entry {
                            ids,
                            cas: Some(cas),
                        })
                    }
                    Err(_) => missed.push((i, Slot::Tomb(cas))),
                },
                other => missed.push((i, other)),
            }
        }
        s.add(&s.index_hits, (values.len() - missed.len()) as u64);
        s.add(&s.index_misses, missed.len() as u64);
        if !missed.is_empty() {
            let wanted: Vec<&Vec<IndexValue>> = missed.iter().map(|(i, _)| &values[*i]).collect();
            let lists = self.load_index(idx, &wanted).await?;
            let mut back = Vec::new();
            for ((i, slot), ids) in missed.iter().zip(lists) {
                if let (Some(how), Ok(bytes)) = (slot.fill(), postcard::to_stdvec(&ids)) {
                    back.push((keys[*i].clone(), bytes, how));
                }
                out[*i] = Some(Entry { ids, cas: None });
            }
            cache
                .write_back(started, fence.clone(), back, FLAG_INDEX, self.info.ttl)
                .await;
        }
        let out = out
            .into_iter()
            .map(|e| {
                e.unwrap_or(Entry {
                    ids: Vec::new(),
                    cas: None,
                })
            })
            .collect();
        Ok((out, fence))
    }

    /// The primary keys under each of `wanted` from the database, in one
    /// query.
    async fn load_index(&self, idx: usize, wanted: &[&Vec<IndexValue>]) -> Result<Vec<Vec<i64>>> {
        let cache = &self.cache;
        let t = &self.info.table;
        let cols = &t.indexes[idx];
        let text = sql::select_ids_by_index(cache.backend(), t, cols, wanted.len());
        let args: Vec<Value> = wanted
            .iter()
            .flat_map(|v| v.iter().map(sql::bind_of))
            .collect();
        let rows = cache
            .db_read("read an index", cache.inner.db.rows(&text, &args))
            .await?;
        let s = &cache.inner.stats;
        s.add(&s.db_rows, rows.len() as u64);
        let rows = rows
            .values()
            .map_err(|e| Error::decode(format!("an index of {}", t.name), e))?;
        let mut lists = vec![Vec::new(); wanted.len()];
        let position: HashMap<&Vec<IndexValue>, usize> =
            wanted.iter().enumerate().map(|(i, v)| (*v, i)).collect();
        for row in &rows {
            let (id, got) = row_values(t, cols, row)?;
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

/// A row's primary key (its first value) and its `cols` values (the values
/// after it), as read by `SELECT pk, cols...`.
pub(crate) fn row_values(
    t: &Table,
    cols: &[String],
    row: &[Value],
) -> Result<(i64, Vec<IndexValue>)> {
    let bad = |what: &str| Error::decode(format!("an index of {}", t.name), what.to_string());
    let id = row
        .first()
        .and_then(Value::as_i64)
        .ok_or_else(|| bad("the primary key is not a 64-bit integer"))?;
    let mut out = Vec::with_capacity(cols.len());
    for (j, c) in cols.iter().enumerate() {
        let v = row.get(j + 1).ok_or_else(|| bad("a short row"))?;
        out.push(match t.kind_of(c) {
            Some(Kind::Text) => IndexValue::Text(
                v.as_text()
                    .ok_or_else(|| bad("an indexed text column is not text"))?
                    .to_string(),
            ),
            _ => IndexValue::Int(
                v.as_i64()
                    .ok_or_else(|| bad("an indexed integer column is not an integer"))?,
            ),
        });
    }
    Ok((id, out))
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
