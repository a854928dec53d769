//! A shard's index: key hash to block offset, in a table of its own
//! (`table.rs`: 5 bytes a slot, any number of 16-slot groups). A table is
//! replaced when it is 7/8 full, by entries or by tombstones, with one
//! sized to be 7/10 full: it grows by about a quarter at a time, not by
//! doubling, so an entry costs 5.7 to 7.2 bytes of index at any size (a
//! table that doubles costs up to 11.4 just after it has), and a table
//! mostly of tombstones is rebuilt at its own size or smaller.
//!
//! A full table is not rehashed in one go (every entry's hash comes from
//! its key, in its block: a cache miss each). Instead the new table takes
//! the new entries, and every change to the index moves a group or more of
//! the old table over, as memcached and Redis grow theirs; until the old
//! table is empty, lookups look in both.

mod table;

use table::{groups_for, Place, Table, WIDTH};

/// A table is replaced when this share of its slots is in use.
const MAX_LOAD: (usize, usize) = (7, 8);
/// The share of its slots a new table starts with in use.
const FRESH_LOAD: (usize, usize) = (7, 10);

/// The block offsets of a shard's linked entries, by key hash.
pub(crate) struct Index {
    table: Table,
    /// The table being emptied into `table`.
    old: Option<Old>,
    /// Bumped whenever entries may change position (a new table, a step of
    /// moving groups into it): a walk by position that saw it change may
    /// have missed entries.
    moves: u64,
    /// Tables are advised for huge pages (`pages.rs`).
    huge: bool,
}

struct Old {
    table: Table,
    /// The next group to move.
    next: usize,
    /// Groups moved per change: enough that the old table is empty before
    /// the new one is full.
    per_change: usize,
}

impl Default for Index {
    fn default() -> Self {
        Index::new(false)
    }
}

fn limit(t: &Table) -> usize {
    t.groups() * WIDTH * MAX_LOAD.0 / MAX_LOAD.1
}

impl Index {
    /// An empty index whose tables are on huge pages if `huge`.
    pub(crate) fn new(huge: bool) -> Index {
        Index {
            table: Table::new(0, huge),
            old: None,
            moves: 0,
            huge,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len() + self.old.as_ref().map_or(0, |o| o.table.len())
    }

    /// Bytes of the tables' memory.
    pub(crate) fn bytes(&self) -> usize {
        self.table.bytes() + self.old.as_ref().map_or(0, |o| o.table.bytes())
    }

    /// Slots of the table new entries go to.
    pub(crate) fn slots(&self) -> usize {
        self.table.groups() * WIDTH
    }

    /// Slots of both tables while one is emptied into the other: the range
    /// of [`at`](Self::at).
    pub(crate) fn positions(&self) -> usize {
        self.slots() + self.old.as_ref().map_or(0, |o| o.table.groups() * WIDTH)
    }

    /// The offset in slot `pos` of the table new entries go to, or past its
    /// end, of the one being emptied: a walk over `0..positions()` meets
    /// every entry in hash order (once, or twice or not at all if it moves
    /// meanwhile).
    #[inline]
    pub(crate) fn at(&self, pos: usize) -> Option<u32> {
        match pos.checked_sub(self.slots()) {
            None => self.table.at(pos),
            Some(p) => self.old.as_ref()?.table.at(p),
        }
    }

    /// A count that changes whenever entries may have changed position
    /// (see [`at`](Self::at)).
    pub(crate) fn moves(&self) -> u64 {
        self.moves
    }

    /// Whether an old table is still being emptied into a new one.
    pub(crate) fn is_growing(&self) -> bool {
        self.old.is_some()
    }

    /// The offset whose entry `eq` recognises, among those with `hash`.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if let Some(p) = self.table.find(hash, &mut eq) {
            return Some(self.table.get(p));
        }
        let old = &self.old.as_ref()?.table;
        old.find(hash, eq).map(|p| old.get(p))
    }

    /// As [`find`](Self::find), among the positions (as [`at`](Self::at)
    /// numbers them) from `from` on only: `eq` is never asked of an offset
    /// before it (a flushed index whose entries before `from` are already
    /// reclaimed, their blocks gone).
    pub(crate) fn find_from(
        &self,
        hash: u64,
        from: usize,
        mut eq: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        if let Some(p) = self
            .table
            .find_where(hash, |pos, off| pos >= from && eq(off))
        {
            return Some(self.table.get(p));
        }
        let slots = self.slots();
        let old = &self.old.as_ref()?.table;
        old.find_where(hash, |pos, off| slots + pos >= from && eq(off))
            .map(|p| old.get(p))
    }

    /// As [`find_from`](Self::find_from), and the entry found leaves its
    /// slot, which no later walk by position meets; no other entry moves
    /// (unlike [`remove`](Self::remove), which may move groups between
    /// tables).
    pub(crate) fn take_from(
        &mut self,
        hash: u64,
        from: usize,
        mut eq: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        if let Some(p) = self
            .table
            .find_where(hash, |pos, off| pos >= from && eq(off))
        {
            return Some(self.table.remove(p));
        }
        let slots = self.slots();
        let old = &mut self.old.as_mut()?.table;
        let p = old.find_where(hash, |pos, off| slots + pos >= from && eq(off))?;
        Some(old.remove(p))
    }

    /// Adds `off`, whose key is not in the index; `hash_of` gives the hash
    /// of any offset's key (for entries moved to a new table).
    pub(crate) fn insert(&mut self, hash: u64, off: u32, hash_of: impl Fn(u32) -> u64) {
        self.step(&hash_of);
        if self.table.used() + 1 > limit(&self.table) {
            // A table being emptied is always done by now (`per_change`);
            // finishing it here only guards the arithmetic.
            while self.old.is_some() {
                self.step(&hash_of);
            }
            self.replace_table(&hash_of);
        }
        self.table.insert(hash, off);
    }

    /// Starts moving every entry to a new table sized for the entries
    /// there are (and one more) at [`FRESH_LOAD`].
    fn replace_table(&mut self, hash_of: &impl Fn(u32) -> u64) {
        let live = self.table.len() + 1;
        let want = (live * FRESH_LOAD.1).div_ceil(WIDTH * FRESH_LOAD.0);
        let full = std::mem::replace(&mut self.table, Table::new(groups_for(want), self.huge));
        self.moves += 1;
        if full.len() == 0 {
            return;
        }
        // Each change adds at most one entry: spread the move over at most
        // half of the changes the new table has room for.
        let room = limit(&self.table).saturating_sub(live) / 2;
        let per_change = full.groups().div_ceil(room.max(1));
        self.old = Some(Old {
            table: full,
            next: 0,
            per_change,
        });
        self.step(hash_of);
    }

    /// Removes `off` (with key hash `hash`); false when it is not there.
    pub(crate) fn remove(&mut self, hash: u64, off: u32, hash_of: impl Fn(u32) -> u64) -> bool {
        self.step(&hash_of);
        self.locate(hash, off).map(|(t, p)| t.remove(p)).is_some()
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
        if let Some((t, p)) = self.locate(hash, old_off) {
            t.set(p, new);
        }
    }

    /// The table holding `off` (under `hash`), and where in it.
    fn locate(&mut self, hash: u64, off: u32) -> Option<(&mut Table, Place)> {
        if let Some(p) = self.table.find(hash, |o| o == off) {
            return Some((&mut self.table, p));
        }
        let old = &mut self.old.as_mut()?.table;
        let p = old.find(hash, |o| o == off)?;
        Some((old, p))
    }

    /// Moves the next groups of the old table to the new one.
    fn step(&mut self, hash_of: &impl Fn(u32) -> u64) {
        let Some(old) = self.old.as_mut() else {
            return;
        };
        let end = (old.next + old.per_change).min(old.table.groups());
        self.moves += 1;
        for g in old.next..end {
            let table = &mut self.table;
            old.table
                .take_group(g, |off| table.insert(hash_of(off), off));
        }
        old.next = end;
        if end == old.table.groups() {
            self.old = None;
        }
    }

    /// Every offset in the index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let old = self.old.iter().flat_map(|o| o.table.iter());
        self.table.iter().chain(old)
    }

    /// Takes the whole index out, leaving an empty one with room for as
    /// many entries as it had (a flushed cache usually fills up again). No
    /// entry is touched: a new table is a mapping the system fills with
    /// zeros as it is used.
    pub(crate) fn take(&mut self) -> Index {
        let groups = self.table.groups();
        std::mem::replace(
            self,
            Index {
                table: Table::new(groups, self.huge),
                old: None,
                moves: self.moves + 1,
                huge: self.huge,
            },
        )
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
        #![proptest_config(crate::testing::config(64))]

        #[test]
        fn the_index_is_a_set_while_it_grows(
            ops in prop::collection::vec(prop_oneof![
                6 => (1u32..3000).prop_map(Op::Insert),
                2 => (1u32..3000).prop_map(Op::Remove),
                1 => (1u32..3000, 1u32..3000).prop_map(|(a, b)| Op::Replace(a, b)),
            ], 1..crate::testing::size(3000, 600))
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
        let old_len = ix.old.as_ref().map_or(0, |o| o.table.len());
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
        assert!(limit(&ix.table) >= ix.len());
    }

    /// A well-mixed hash (splitmix64's finaliser).
    fn mixed(off: u32) -> u64 {
        let mut z = u64::from(off).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Index bytes an entry costs, by design: 5 bytes a slot in a table
    /// between 7/10 and 7/8 full, plus the last page's rounding.
    fn bytes_per_entry(ix: &Index) -> f64 {
        (ix.bytes() - 4096) as f64 / ix.len() as f64
    }

    #[test]
    #[cfg_attr(miri, ignore = "the kernel's advice, read from /proc: Miri has none")]
    fn every_table_of_an_index_on_huge_pages_is_advised_for_them() {
        if !crate::pages::kernel_has_them() {
            eprintln!("this kernel has no transparent huge pages: nothing to check");
            return;
        }
        for huge in [true, false] {
            let mut ix = Index::new(huge);
            let mut seen = 0;
            let mut last = 0;
            for n in 1..=50_000u32 {
                ix.insert(mixed(n), n, mixed);
                if ix.table.addr() != last {
                    last = ix.table.addr();
                    seen += 1;
                    assert_eq!(crate::pages::advised(last), Some(huge), "table {seen}");
                }
            }
            assert!(seen > 3, "the index grew through {seen} tables");
            let taken = ix.take();
            assert_eq!(taken.len(), 50_000);
            assert_eq!(
                crate::pages::advised(ix.table.addr()),
                Some(huge),
                "after take"
            );
        }
    }

    #[test]
    fn an_entry_costs_at_most_a_quarter_more_than_a_full_table_slot_at_any_size() {
        let mut ix = Index::default();
        let mut worst: f64 = 0.0;
        // Under Miri 20,000 entries: the table is replaced some ten times.
        let most = crate::testing::size(300_000, 20_000) as u32;
        for n in 1..=most {
            ix.insert(mixed(n), n, mixed);
            if ix.old.is_none() && n >= 10_000 {
                worst = worst.max(bytes_per_entry(&ix));
            }
        }
        // A table that doubles would be at 11.4 just after doing so.
        assert!(
            worst <= 5.0 * 10.0 / 7.0 + 0.01,
            "{worst:.2} bytes an entry"
        );
        assert!(bytes_per_entry(&ix) >= 5.0 * 8.0 / 7.0 - 0.01);
        for n in (1..=most).step_by(97) {
            assert_eq!(ix.find(mixed(n), |o| o == n), Some(n));
        }
    }

    #[test]
    fn churn_at_a_steady_size_does_not_grow_the_index() {
        // A full cache: every new entry comes with an eviction. Deletions
        // in full groups leave tombstones, which must not make the table
        // grow for ever.
        let live = crate::testing::size(20_000, 2_000) as u32;
        let rounds = crate::testing::size(30, 6) as u32;
        let mut ix = Index::default();
        for n in 1..=live {
            ix.insert(mixed(n), n, mixed);
        }
        let mut most = 0;
        for n in live + 1..=live * rounds {
            assert!(ix.remove(mixed(n - live), n - live, mixed));
            ix.insert(mixed(n), n, mixed);
            most = most.max(ix.bytes());
        }
        assert_eq!(ix.len(), live as usize);
        // Both tables while one is emptied: at most about 2.3 tables' worth.
        assert!(
            most <= live as usize * 16 + 8192,
            "{most} bytes for {live} entries"
        );
        for n in (live * (rounds - 1) + 1..=live * rounds).step_by(13) {
            assert_eq!(ix.find(mixed(n), |o| o == n), Some(n));
        }
        for n in (1..live * (rounds - 1)).step_by(101) {
            assert_eq!(ix.find(mixed(n), |o| o == n), None);
        }
    }

    #[test]
    fn take_takes_everything_and_keeps_the_room() {
        // Taken while a table is being emptied into another, too: a walk
        // over the positions of what was taken meets every entry once.
        for growing in [false, true] {
            let mut ix = Index::default();
            let mut n = 0u32;
            while n < 5_000 || ix.is_growing() != growing {
                assert!(n < 100_000, "the index never grew");
                n += 1;
                ix.insert(mixed(n), n, mixed);
            }
            let groups = ix.table.groups() + ix.old.as_ref().map_or(0, |o| o.table.groups());
            let taken = ix.take();
            let mut all: Vec<u32> = (0..taken.positions()).filter_map(|p| taken.at(p)).collect();
            all.sort_unstable();
            assert_eq!(all, (1..=n).collect::<Vec<_>>(), "growing: {growing}");
            assert_eq!((ix.len(), taken.len()), (0, n as usize));
            assert!(ix.table.groups() > 0 && ix.table.groups() <= groups);
            assert_eq!(ix.find(mixed(7), |o| o == 7), None);
        }
    }
}
