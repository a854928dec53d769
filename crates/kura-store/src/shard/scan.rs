//! Walking a shard's entries a bounded step at a time, by index position
//! (`Store::scan`).

use crate::changes::Entry;
use crate::expiry::is_expired;
use crate::item::{KEY_BINARY, STALE};

use super::Shard;

impl Shard {
    /// The live entries at index positions `from..from + budget` and the
    /// position after them (`None`: the walk reached the end).
    pub(crate) fn scan(&self, from: usize, budget: usize, now: u32) -> (Vec<Entry>, Option<usize>) {
        let end = self.index.positions();
        let stop = from.saturating_add(budget).min(end);
        let mut out = Vec::new();
        for pos in from..stop {
            let Some(off) = self.index.at(pos) else {
                continue;
            };
            let m = self.meta(off);
            if is_expired(m.exptime(), now) {
                continue;
            }
            out.push(Entry {
                item: m.handle(),
                cas: m.cas(),
                exptime: m.exptime(),
                stale: m.marks() & STALE != 0,
                binary_key: m.marks() & KEY_BINARY != 0,
            });
        }
        (out, (stop < end).then_some(stop))
    }

    /// The range of index positions (`Index::positions`).
    pub(crate) fn positions(&self) -> usize {
        self.index.positions()
    }

    /// The block offset at index position `pos`, if an entry is there.
    pub(crate) fn offset_at(&self, pos: usize) -> Option<u32> {
        self.index.at(pos)
    }

    pub(crate) fn arena(&self) -> &crate::arena::Arena {
        &self.arena
    }

    /// Changes whenever entries may have moved between index positions.
    pub(crate) fn index_moves(&self) -> u64 {
        self.index.moves()
    }
}
