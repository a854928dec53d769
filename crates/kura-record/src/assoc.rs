//! Cached associations. A parent's `has_many` is the index it is: the
//! children's cached index on their foreign key (done by
//! [`Cached::fetch_by_index`]). [`Cached::fetch_with`] embeds them: the
//! parents and their children's index entries are read at once, then the
//! children's records, so a login reads a user and their items in two
//! round trips per server, as `fetch_by_index` alone does.
//!
//! Embedding is by reference, not a copy: the parent's record, the
//! children's index entry and the children's records stay separate
//! entries. A child's write (through [`crate::RecordTx::touch`] or an
//! expire) expires the child's record and its entries, the parent's list
//! among them; nothing of the parent's needs expiring, and no parent entry
//! can hold a stale copy of a child.

use std::collections::HashMap;

use crate::cache::{Cached, Record};
use crate::error::{Error, Result};
use crate::table::{IndexValue, Kind};

/// The children of a parent: the rows of a child table whose foreign key
/// column holds the parent's primary key.
pub struct HasMany<C> {
    child: Cached<C>,
    foreign_key: String,
}

impl<C> Clone for HasMany<C> {
    fn clone(&self) -> HasMany<C> {
        HasMany {
            child: self.child.clone(),
            foreign_key: self.foreign_key.clone(),
        }
    }
}

impl<C: Record> Cached<C> {
    /// This table as the children of another: `foreign_key` holds the
    /// parent's primary key and is a cached index of this table.
    ///
    /// # Errors
    /// [`Error::Declaration`] when no cached index is on `foreign_key` alone
    /// or it is not an integer column.
    pub fn has_many(&self, foreign_key: &str) -> Result<HasMany<C>> {
        let t = &self.info.table;
        t.index_of(&[foreign_key])?;
        if t.kind_of(foreign_key) != Some(Kind::Int) {
            return Err(Error::Declaration(format!(
                "{foreign_key} of {} is not an integer column",
                t.name
            )));
        }
        Ok(HasMany {
            child: self.clone(),
            foreign_key: foreign_key.to_string(),
        })
    }
}

impl<P: Record> Cached<P> {
    /// The parents of `ids` that exist, in the order of `ids`, each with
    /// its children (in primary key order): the parents' records and the
    /// children's index entries in one concurrent read, then the children's
    /// records in one multi-get; misses filled as every read fills.
    ///
    /// # Errors
    /// As [`Cached::fetch_multi`] and [`Cached::fetch_multi_by_index`].
    pub async fn fetch_with<C: Record>(
        &self,
        ids: &[i64],
        children: &HasMany<C>,
    ) -> Result<Vec<(P, Vec<C>)>> {
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        let ids: Vec<i64> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
        let values: Vec<Vec<IndexValue>> =
            ids.iter().map(|&id| vec![IndexValue::Int(id)]).collect();
        let fk = [children.foreign_key.as_str()];
        let (parents, lists) = tokio::join!(
            self.rows_multi(&ids),
            children.child.fetch_multi_by_index(&fk, &values)
        );
        let mut lists: HashMap<i64, Vec<C>> = ids.iter().copied().zip(lists?).collect();
        parents?
            .into_iter()
            .map(|(id, row)| Ok((self.record(&row)?, lists.remove(&id).unwrap_or_default())))
            .collect()
    }
}
