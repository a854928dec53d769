//! Changing records with a hook under the record's lock: [`Table::edit`]
//! is what the other writes are made of, and what a server that logs its
//! table writes (kura's `--data-dir`) uses, so that the log numbers the
//! writes of one id in the order they happened. [`Table::clear`] empties a
//! table (a replica replacing what it holds).

use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use crate::{Table, TableError, STRIPES};

/// What [`Table::edit`] does with a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Leave it as it is (nothing is written, the hook is not called).
    Keep,
    /// Store these bytes and flags.
    Put(Vec<u8>, u32),
    /// Remove it (a record already absent stays so: nothing is written).
    Delete,
}

impl Table {
    /// Changes record `id` under its stripe's lock (readers go on): `f`
    /// gets the current value and flags (or `None`) and says what to do.
    /// When the record changed, `then` is called with its new value and
    /// flags (or `None`: deleted) while the lock is still held, so that
    /// whatever `then` numbers is numbered in the order of the writes to
    /// `id`. Returns whether the record changed.
    ///
    /// # Errors
    /// An id outside the table, a new value wider than the slots (nothing
    /// changes then, and `then` is not called).
    pub fn edit(
        &self,
        id: u64,
        f: impl FnOnce(Option<(&[u8], u32)>) -> Edit,
        then: impl FnOnce(Option<(&[u8], u32)>),
    ) -> Result<bool, TableError> {
        self.check_id(id)?;
        let inner = &*self.inner;
        let held = inner.stripes[(id as usize) & (STRIPES - 1)]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut old = Vec::new();
        let old_flags = inner.reader().read_locked(id, &mut old);
        let new = match f(old_flags.map(|fl| (&old[..], fl))) {
            Edit::Keep => return Ok(false),
            Edit::Delete if old_flags.is_none() => return Ok(false),
            Edit::Delete => None,
            Edit::Put(v, _) if v.len() > inner.layout.width as usize => {
                return Err(TableError::TooWide {
                    len: v.len(),
                    width: inner.layout.width,
                });
            }
            Edit::Put(v, fl) => Some((v, fl)),
        };
        let new = new.as_ref().map(|(v, fl)| (&v[..], *fl));
        inner.reader().write_locked(id, new);
        match (old_flags.is_some(), new.is_some()) {
            (false, true) => {
                inner.count.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                inner.count.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if new.is_some() {
            inner.low.fetch_min(id, Ordering::Relaxed);
            inner.high.fetch_max(id, Ordering::Relaxed);
        }
        then(new);
        drop(held);
        inner.wrote(id)?;
        Ok(true)
    }

    /// [`Table::rotate`] with a hook: `then` gets the record's new bytes
    /// and flags under the record's lock (see [`Table::edit`]). Returns the
    /// new length.
    ///
    /// # Errors
    /// An id outside the table.
    pub fn rotate_then(
        &self,
        id: u64,
        data: &[u8],
        max_len: usize,
        flags: u32,
        then: impl FnOnce(Option<(&[u8], u32)>),
    ) -> Result<usize, TableError> {
        let keep = max_len.min(self.inner.layout.width as usize);
        let mut len = 0;
        self.edit(
            id,
            |old| {
                let (old, flags) = old.unwrap_or((&[], flags));
                let mut v = Vec::with_capacity(old.len() + data.len());
                v.extend_from_slice(old);
                v.extend_from_slice(data);
                let cut = v.len().saturating_sub(keep);
                v.drain(..cut);
                len = v.len();
                Edit::Put(v, flags)
            },
            then,
        )?;
        Ok(len)
    }

    /// Removes every record; returns how many there were. Each removal is
    /// one write under its record's lock: a reader sees each record either
    /// there or gone, and writers meanwhile are not lost (a record written
    /// behind the sweep stays).
    ///
    /// # Errors
    /// A sync under `Always` failed.
    pub fn clear(&self) -> Result<u64, TableError> {
        let mut n = 0;
        let Some(high) = self.max_id() else {
            return Ok(0);
        };
        let from = self.min_id().unwrap_or(1);
        for id in from..=high {
            if self.reader().present(id) && self.edit(id, |_| Edit::Delete, |_| {})? {
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Durability, Edit, Table, TableOptions};

    fn table() -> Table {
        let options = TableOptions {
            width: 8,
            max: 100,
            durability: Durability::No,
        };
        Table::open(None, options).unwrap()
    }

    #[test]
    fn the_hook_sees_each_change_and_only_changes() {
        let t = table();
        let mut seen = Vec::new();
        let mut log = |new: Option<(&[u8], u32)>| seen.push(new.map(|(v, f)| (v.to_vec(), f)));
        assert!(t
            .edit(5, |_| Edit::Put(b"ab".to_vec(), 3), &mut log)
            .unwrap());
        assert!(!t.edit(5, |_| Edit::Keep, &mut log).unwrap());
        // Too wide: nothing changes, nothing is said.
        assert!(t.edit(5, |_| Edit::Put(vec![0; 9], 0), &mut log).is_err());
        assert_eq!(t.rotate_then(5, b"cdefgh", 6, 9, &mut log).unwrap(), 6);
        assert!(t.edit(5, |_| Edit::Delete, &mut log).unwrap());
        // Deleting what is absent changes nothing.
        assert!(!t.edit(5, |_| Edit::Delete, &mut log).unwrap());
        assert_eq!(
            seen,
            [
                Some((b"ab".to_vec(), 3)),
                Some((b"cdefgh".to_vec(), 3)),
                None
            ]
        );
        assert!(t.get(5).unwrap().is_none());
        assert!(t.edit(0, |_| Edit::Delete, |_| {}).is_err());
    }

    #[test]
    fn clear_removes_every_record() {
        let t = table();
        for id in [1, 7, 50, 100] {
            t.put(id, b"x", 0).unwrap();
        }
        assert_eq!(t.clear().unwrap(), 4);
        assert_eq!(t.len(), 0);
        assert_eq!(t.min_id(), None);
        assert_eq!(t.clear().unwrap(), 0);
        t.put(3, b"y", 1).unwrap();
        assert_eq!(t.get(3).unwrap(), Some((b"y".to_vec(), 1)));
    }
}
