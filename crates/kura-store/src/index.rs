//! A shard's index: key hash to block offset, in a hashbrown table that
//! grows without stopping the shard. A full table is not rehashed in one
//! go (every entry's hash comes from its key, in its block: a cache miss
//! each, 170 ms for two million entries here). Instead a table twice as
//! large takes the new entries, and every change to the index moves a few
//! buckets of the old table over, as memcached and Redis grow theirs; until
//! the old table is empty, lookups look in both.

use hashbrown::HashTable;

/// Buckets of the old table moved per change to the index: enough that the
/// old table is empty before the new one fills (it has twice the room, and
/// each change adds at most one entry).
const STEP: usize = 16;

/// The block offsets of a shard's linked entries, by key hash.
#[derive(Default)]
pub(crate) struct Index {
    table: HashTable<u32>,
    /// The table being emptied into `table`, and its next bucket to move.
    old: Option<(HashTable<u32>, usize)>,
}

impl Index {
    pub(crate) fn len(&self) -> usize {
        self.table.len() + self.old.as_ref().map_or(0, |(t, _)| t.len())
    }

    /// The offset whose entry `eq` recognises, among those with `hash`.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if let Some(&off) = self.table.find(hash, |&o| eq(o)) {
            return Some(off);
        }
        let (old, _) = self.old.as_ref()?;
        old.find(hash, |&o| eq(o)).copied()
    }

    /// Adds `off`, whose key is not in the index; `hash_of` gives the hash
    /// of any offset's key (for entries moved to a new table).
    pub(crate) fn insert(&mut self, hash: u64, off: u32, hash_of: impl Fn(u32) -> u64) {
        self.step(&hash_of);
        if self.old.is_none() && self.table.len() >= self.table.capacity() {
            let room = (self.table.capacity() * 2).max(16);
            let full = std::mem::replace(&mut self.table, HashTable::with_capacity(room));
            self.old = Some((full, 0));
            self.step(&hash_of);
        }
        self.table.insert_unique(hash, off, |&o| hash_of(o));
    }

    /// Removes `off` (with key hash `hash`); false when it is not there.
    pub(crate) fn remove(&mut self, hash: u64, off: u32, hash_of: impl Fn(u32) -> u64) -> bool {
        self.step(&hash_of);
        if let Ok(e) = self.table.find_entry(hash, |&o| o == off) {
            e.remove();
            return true;
        }
        if let Some((old, _)) = self.old.as_mut() {
            if let Ok(e) = old.find_entry(hash, |&o| o == off) {
                e.remove();
                return true;
            }
        }
        false
    }

    /// Puts `new` where `old_off` is (a new version of the same key).
    pub(crate) fn replace(
        &mut self,
        hash: u64,
        old_off: u32,
        new: u32,
        hash_of: impl Fn(u32) -> u64,
    ) {
        self.step(&hash_of);
        if let Ok(mut e) = self.table.find_entry(hash, |&o| o == old_off) {
            *e.get_mut() = new;
            return;
        }
        if let Some((old, _)) = self.old.as_mut() {
            if let Ok(mut e) = old.find_entry(hash, |&o| o == old_off) {
                *e.get_mut() = new;
            }
        }
    }

    /// Moves up to [`STEP`] buckets of the old table to the new one.
    fn step(&mut self, hash_of: &impl Fn(u32) -> u64) {
        let Some((old, next)) = self.old.as_mut() else {
            return;
        };
        let end = (*next + STEP).min(old.num_buckets());
        for i in *next..end {
            if let Ok(e) = old.get_bucket_entry(i) {
                let (off, _) = e.remove();
                self.table.insert_unique(hash_of(off), off, |&o| hash_of(o));
            }
        }
        *next = end;
        if end == old.num_buckets() {
            self.old = None;
        }
    }

    /// Every offset in the index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let old = self.old.iter().flat_map(|(t, _)| t.iter());
        self.table.iter().chain(old).copied()
    }

    /// Takes every offset out, leaving the index empty.
    pub(crate) fn drain(&mut self) -> Vec<u32> {
        let mut out: Vec<u32> = self.table.drain().collect();
        if let Some((mut old, _)) = self.old.take() {
            out.extend(old.drain());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// Offsets stand for keys; their hash is a mix of the offset, with
    /// collisions made likely by keeping few bits.
    fn h(off: u32) -> u64 {
        u64::from(off % 97).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(off >> 20)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Remove(u32),
        Replace(u32, u32),
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn the_index_is_a_set_while_it_grows(
            ops in prop::collection::vec(prop_oneof![
                6 => (1u32..3000).prop_map(Op::Insert),
                2 => (1u32..3000).prop_map(Op::Remove),
                1 => (1u32..3000, 1u32..3000).prop_map(|(a, b)| Op::Replace(a, b)),
            ], 1..3000)
        ) {
            let mut ix = Index::default();
            let mut model: HashSet<u32> = HashSet::new();
            let mut grew = false;
            for op in ops {
                match op {
                    Op::Insert(o) if !model.contains(&o) => {
                        ix.insert(h(o), o, h);
                        model.insert(o);
                    }
                    Op::Remove(o) => {
                        prop_assert_eq!(ix.remove(h(o), o, h), model.remove(&o));
                    }
                    // A replacement keeps the key (hence the hash): the new
                    // offset stands for the same key here.
                    Op::Replace(a, b) if model.contains(&a) && !model.contains(&b) && h(a) == h(b) => {
                        ix.replace(h(a), a, b, h);
                        model.remove(&a);
                        model.insert(b);
                    }
                    _ => {}
                }
                grew |= ix.old.is_some();
                prop_assert_eq!(ix.len(), model.len());
                for &o in model.iter().take(20) {
                    prop_assert_eq!(ix.find(h(o), |x| x == o), Some(o));
                }
            }
            let mut all: Vec<u32> = ix.iter().collect();
            all.sort_unstable();
            let mut want: Vec<u32> = model.iter().copied().collect();
            want.sort_unstable();
            prop_assert_eq!(all, want);
            let _ = grew;
        }
    }

    #[test]
    fn a_full_table_moves_over_a_few_buckets_at_a_time() {
        let mut ix = Index::default();
        let mut n = 1u32;
        while ix.old.is_none() {
            ix.insert(h(n), n, h);
            n += 1;
        }
        let old_len = ix.old.as_ref().map_or(0, |(t, _)| t.len());
        assert!(old_len > 0, "the full table was kept to be moved");
        // Later changes move it bit by bit; everything stays findable.
        while ix.old.is_some() {
            ix.insert(h(n), n, h);
            n += 1;
            for o in (1..n).step_by(7) {
                assert_eq!(ix.find(h(o), |x| x == o), Some(o));
            }
        }
        assert_eq!(ix.len(), n as usize - 1);
        assert!(ix.table.capacity() >= ix.len());
    }
}
