//! Going over an arena's blocks: the eviction walk's cursor, the next
//! block, large free blocks, the stack of blocks freed by handles on other
//! threads, and the consistency check the tests run.

#[cfg(test)]
use super::tlsf::mapping;
use super::*;

impl Arena {
    /// The next used block from the walking cursor on, advancing it; `None`
    /// (and the cursor back at the start) once the end is reached.
    pub(crate) fn walk(&mut self) -> Option<u32> {
        loop {
            let at = self.cursor;
            if at >= self.end {
                self.cursor = FIRST;
                return None;
            }
            let w = self.word(at);
            self.cursor = at + (w & SIZE_MASK);
            if w & FREE == 0 {
                return Some(at);
            }
        }
    }

    /// Whether the walking cursor is at the start (a pass is beginning).
    pub(crate) fn walk_at_start(&self) -> bool {
        self.cursor == FIRST
    }

    /// The block after the one at `off`, or `None` at the end.
    pub(crate) fn next_block(&self, off: u32) -> Option<u32> {
        let n = off + self.units(off);
        (n < self.end).then_some(n)
    }

    /// Whether the block at `off` is free.
    pub(crate) fn is_free(&self, off: u32) -> bool {
        self.word(off) & FREE != 0
    }

    /// Free blocks from the largest size class down, at most `limit` of
    /// them: where to clear a run of neighbours when no free block is large
    /// enough.
    pub(crate) fn large_free_blocks(&self, limit: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut fl_map = self.fl_bitmap;
        while fl_map != 0 && out.len() < limit {
            let fl = 31 - fl_map.leading_zeros() as usize;
            fl_map &= !(1 << fl);
            let mut sl_map = u32::from(self.sl_bitmap[fl]);
            while sl_map != 0 && out.len() < limit {
                let sl = 31 - sl_map.leading_zeros() as usize;
                sl_map &= !(1 << sl);
                let mut at = self.heads[fl][sl];
                while at != 0 && out.len() < limit {
                    out.push(at);
                    at = self.word(at + 1);
                }
            }
        }
        out
    }

    /// Takes the blocks handles pushed back since the last call.
    pub(crate) fn take_deferred(&mut self) -> Vec<u32> {
        let mut at = self.shared().deferred.swap(0, Ordering::Acquire);
        let mut out = Vec::new();
        while at != 0 {
            out.push(at);
            at = self.word(at + 1);
        }
        out
    }

    /// Whether handles have pushed blocks back.
    #[inline]
    pub(crate) fn has_deferred(&self) -> bool {
        self.shared().deferred.load(Ordering::Relaxed) != 0
    }

    /// The shard is letting go of a block that handles still hold: the last
    /// of them will push it back (see [`release_detached`]).
    pub(crate) fn note_detached(&self) {
        self.shared().outstanding.fetch_add(1, Ordering::AcqRel);
    }

    /// The shard took back a block it had noted as detached.
    pub(crate) fn unnote_detached(&self) {
        self.shared().outstanding.fetch_sub(1, Ordering::AcqRel);
    }

    /// Checks the allocator's structure (tests): blocks tile the arena,
    /// flags agree with neighbours, free blocks are merged and listed.
    #[cfg(test)]
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut at = FIRST;
        let mut prev_free = false;
        let mut used = 0usize;
        let mut free_blocks = std::collections::HashSet::new();
        while at < self.end {
            let w = self.word(at);
            let size = w & SIZE_MASK;
            if size < MIN_UNITS {
                return Err(format!("block {at} of {size} units"));
            }
            if (w & PREV_FREE != 0) != prev_free {
                return Err(format!("block {at}: previous-free flag wrong"));
            }
            let free = w & FREE != 0;
            if free {
                if prev_free {
                    return Err(format!("block {at}: two free blocks in a row"));
                }
                if self.word(at + size - 1) != size {
                    return Err(format!("block {at}: footer wrong"));
                }
                free_blocks.insert(at);
            } else {
                used += size as usize;
            }
            prev_free = free;
            at += size;
        }
        if at != self.end {
            return Err(format!("blocks end at {at}, not {}", self.end));
        }
        if (self.word(self.end) & PREV_FREE != 0) != prev_free {
            return Err("sentinel's previous-free flag wrong".into());
        }
        if used != self.used_units {
            return Err(format!("{used} units used, {} counted", self.used_units));
        }
        let mut listed = 0;
        for fl in 0..FL {
            for sl in 0..SL {
                let mut at = self.heads[fl][sl];
                let bit = self.sl_bitmap[fl] & (1 << sl) != 0;
                if bit != (at != 0) {
                    return Err(format!("bitmap wrong for class {fl}/{sl}"));
                }
                let mut prev = 0;
                while at != 0 {
                    if !free_blocks.contains(&at) || mapping(self.units(at)) != (fl, sl) {
                        return Err(format!("block {at} listed in class {fl}/{sl}"));
                    }
                    if self.word(at + 2) != prev {
                        return Err(format!("block {at}: back link wrong"));
                    }
                    listed += 1;
                    prev = at;
                    at = self.word(at + 1);
                }
            }
            if (self.fl_bitmap & (1 << fl) != 0) != (self.sl_bitmap[fl] != 0) {
                return Err(format!("first-level bitmap wrong for {fl}"));
            }
        }
        if listed != free_blocks.len() {
            return Err(format!(
                "{listed} blocks listed, {} free",
                free_blocks.len()
            ));
        }
        Ok(())
    }
}
