//! S3-FIFO (Yang et al., SOSP '23), without links in the entries. New
//! entries go to a small queue (a tenth of the entries); one that is read
//! twice before it leaves the small queue moves on to the main queue, the
//! others are evicted and remembered in a ghost queue of key fingerprints.
//! A key that comes back while its ghost is remembered goes straight to
//! the main queue. Reads only bump a two-bit counter in the entry's byte.
//!
//! The small queue is a FIFO of ids outside the entries (4 bytes for each
//! of its entries). An entry deleted or replaced while in it leaves its id
//! behind, and the id is counted stale, in a table of stale ids; its block
//! may be free or another entry's by the time it comes to the front, even
//! an entry of the small queue with a later id in the ring. An id comes to
//! the front before any later copy of it, so the front's id is stale
//! exactly when the table counts that id: it is skipped, the count
//! lowered, without reading its block. (An id carried its key hash's low
//! half before, to be checked against the index: 8 bytes, not 4.)
//!
//! The main queue is a CLOCK whose hand walks the index's positions (hash
//! order): an entry whose counter is not zero when the hand reaches it has
//! the counter lowered and stays, one at zero is the victim. FIFO order is
//! approximated by age: an entry entering the main queue is stamped with
//! where the hand is (the sweep and which eighth of the index, modulo 32,
//! in five bits of its byte), and the hand passes over it until it has
//! gone a whole sweep further. On the ARC traces this keeps S3-FIFO's hit
//! ratios (bench/results/history.md); without the age rule, P3 at 262,144 entries
//! falls two points, below ARC. So an entry costs its byte, no links.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::ghost::Ghost;
use super::list::NIL;
use super::slots::Slots;
use super::{fingerprint, push_back_sparing, Entries, EvictionPolicy};

/// The small queue's share of the entries, in percent.
const SMALL_PERCENT: usize = 10;
/// Keys the ghost queue remembers, in percent of the main queue's share.
/// Measured on the ARC traces (bench/results/history.md): 100% (the paper's choice)
/// falls short of ARC on P3 at 262,144 entries, 200% on P6 at 65,536.
const GHOST_PERCENT: usize = 160;
/// The entry's byte: its read count (two bits, up to [`FREQ_MAX`]), since
/// it was linked or last passed over; atomic so reads under a shared lock
/// can count.
const FREQ: u8 = 3;
const FREQ_MAX: u8 = 3;
/// The entry's byte: it is in the main queue.
const MAIN: u8 = 4;
/// The entry's byte, from this bit: where the hand was when it entered the
/// main queue, in eighths of a sweep, modulo 32.
const STAMP_SHIFT: u32 = 3;
/// Parts of a sweep; an entry is old enough for eviction this many parts
/// after its stamp.
const PARTS: usize = 8;
/// Reads an entry needs while in the small queue to move to the main one.
const PROMOTE_READS: u8 = 2;
/// The byte of an entry the policy no longer tracks, though it may still
/// be in the index a moment (a shard takes the entry it is replacing out
/// of the policy while it makes room for the new version): outside the
/// main queue, with a stamp no small-queue entry has.
const UNTRACKED: u8 = 31 << STAMP_SHIFT;
/// The byte's stamp for an entry of the small queue that has no id in the
/// ring (it overflowed the ring while the cache filled); 0 for the others.
const COLD: u8 = 1 << STAMP_SHIFT;
const STAMP: u8 = !0 << STAMP_SHIFT;

/// S3-FIFO eviction.
#[derive(Debug)]
pub struct S3Fifo {
    /// The small queue's ids, oldest first; some stale.
    small: VecDeque<u32>,
    /// The stale ids in `small`, each once for every stale copy (stored
    /// plus one: the table holds no 0).
    stale: Slots,
    /// Live entries in the small queue (with an id in the ring or cold),
    /// the cold ones among them, and live entries in the main queue.
    small_len: usize,
    cold_len: usize,
    main_len: usize,
    ghost: Ghost,
    /// The victim last returned from the small queue: when the shard
    /// removes it, it was evicted (not deleted) and leaves a ghost.
    pending: u32,
    /// The main queue's hand: the next index position it looks at, how
    /// many sweeps it has finished, and the index's positions when it last
    /// moved (a rebuilt index has the same hash order over another number
    /// of positions, and the hand keeps its place in that order).
    hand: usize,
    sweeps: usize,
    seen: usize,
    /// The position where the search for cold entries goes on.
    cold_hand: usize,
    /// Whether a victim has been asked for since the policy was new or
    /// cleared: until then the ring keeps to the small queue's share.
    evicting: bool,
}

impl Default for S3Fifo {
    fn default() -> Self {
        S3Fifo {
            small: VecDeque::new(),
            stale: Slots::new(0),
            small_len: 0,
            cold_len: 0,
            main_len: 0,
            ghost: Ghost::default(),
            pending: NIL,
            hand: 0,
            sweeps: 0,
            seen: 0,
            cold_hand: 0,
            evicting: false,
        }
    }
}

fn byte<E: Entries>(e: &E, id: u32) -> u8 {
    e.byte(id).load(Ordering::Relaxed)
}

fn set_byte<E: Entries>(e: &E, id: u32, b: u8) {
    e.byte(id).store(b, Ordering::Relaxed);
}

/// Whether `id`, a live entry, is in the small queue with its id in the
/// ring.
fn ringed<E: Entries>(e: &E, id: u32) -> bool {
    byte(e, id) & (MAIN | STAMP) == 0
}

impl S3Fifo {
    fn len(&self) -> usize {
        self.small_len + self.main_len
    }

    /// The small queue's share of the entries there are.
    fn small_target(&self) -> usize {
        (self.len() * SMALL_PERCENT / 100).max(1)
    }

    /// Where the hand is among the index's `positions`, in parts of a
    /// sweep, modulo 32.
    fn now(&self, positions: usize) -> u8 {
        let part = self.hand * PARTS / positions.max(1);
        ((self.sweeps * PARTS + part) % 32) as u8
    }

    /// Moves `id` (byte `b`) from the small queue to the main one, with its
    /// read count, stamped with where the hand is.
    fn promote<E: Entries>(&mut self, e: &E, id: u32, b: u8) {
        if b & STAMP == COLD {
            self.cold_len -= 1;
        }
        self.small_len -= 1;
        self.main_len += 1;
        set_byte(
            e,
            id,
            MAIN | self.now(e.positions()) << STAMP_SHIFT | b & FREQ,
        );
    }

    /// Adds an id at the ring's back (sparing: when few entries are read
    /// twice it holds an id for most entries of the cache).
    fn ring_push(&mut self, id: u32) {
        push_back_sparing(&mut self.small, id);
    }

    /// Takes a stale copy of `id` off the count, if it has one.
    fn take_stale(&mut self, id: u32) -> bool {
        let Some(i) = self.stale.find(id.wrapping_add(1)) else {
            return false;
        };
        self.stale.remove_at(i);
        true
    }

    /// The oldest entry with an id in the ring, dropping stale ids.
    fn ring_front<E: Entries>(&mut self, e: &E) -> Option<u32> {
        while let Some(&id) = self.small.front() {
            if !self.take_stale(id) {
                debug_assert!(ringed(e, id), "{id} at the ring's front, not in it");
                return Some(id);
            }
            self.small.pop_front();
        }
        None
    }

    /// Entry `id`, with its id in the ring, leaves it (it is removed or
    /// replaced): off the front if it is there, else counted stale.
    fn leave_ring(&mut self, id: u32) {
        if self.small.front() == Some(&id) && self.stale.find(id.wrapping_add(1)).is_none() {
            self.small.pop_front();
        } else {
            self.stale.insert(id.wrapping_add(1));
        }
    }

    /// Drops every stale id from the ring: of each id's copies, the stale
    /// ones are the first.
    fn drop_stale(&mut self) {
        let mut stale = std::mem::take(&mut self.stale);
        self.small
            .retain(|&id| match stale.find(id.wrapping_add(1)) {
                Some(i) => {
                    stale.remove_at(i);
                    false
                }
                None => true,
            });
        debug_assert_eq!(stale.len(), 0, "stale ids not in the ring");
        stale.clear();
        self.stale = stale;
    }

    /// Keeps the ring's ids to the small queue's share until the first
    /// eviction, so they cost 8 bytes for a tenth of the entries while a
    /// cache fills, not for all of them: the oldest entries stay in the
    /// small queue, cold, without an id. (After that the small queue is a
    /// tenth of the entries, unless few are read twice: then it is more,
    /// and so is the ring, to keep its arrival order.) Stale ids go as they
    /// come to the front, or all at once when as many as the live ones and
    /// the share have piled up behind it.
    fn trim_ring<E: Entries>(&mut self, e: &E) {
        let target = self.small_target();
        while !self.evicting && self.small_len - self.cold_len > target {
            let Some(id) = self.ring_front(e) else {
                debug_assert!(false, "{} entries without their id", self.small_len);
                break;
            };
            self.small.pop_front();
            set_byte(e, id, COLD | byte(e, id) & FREQ);
            self.cold_len += 1;
        }
        let ringed = self.small_len - self.cold_len;
        if self.small.len() > 2 * (ringed + target) + 64 {
            self.drop_stale();
        }
        if self.small.capacity() > 4 * self.small.len().max(64) {
            self.small.shrink_to(2 * self.small.len().max(64));
        }
    }

    /// The next cold entry of the small queue, in index order: the cold
    /// entries are the small queue's oldest (they overflowed its ring while
    /// the cache filled), so they leave it first. At most a sweep of the
    /// index is searched; the search goes on from there next time.
    fn cold_front<E: Entries>(&mut self, e: &E) -> Option<u32> {
        let positions = e.positions();
        for _ in 0..positions {
            if self.cold_hand >= positions {
                self.cold_hand = 0;
            }
            if let Some(id) = e.at(self.cold_hand) {
                if byte(e, id) & (MAIN | STAMP) == COLD {
                    return Some(id);
                }
            }
            self.cold_hand += 1;
        }
        None
    }

    /// The main queue's next victim: the first entry the hand finds in the
    /// main queue, at least a sweep old, with its read count spent; the
    /// entries it passes have their count lowered. Stamps are rounded to
    /// eighths of a sweep, so a whole sweep is more than eight of them.
    fn main_victim<E: Entries>(&mut self, e: &E) -> Option<u32> {
        let positions = e.positions();
        if self.main_len == 0 || positions == 0 {
            return None;
        }
        if positions != self.seen {
            if let Some(hand) = (self.hand * positions).checked_div(self.seen) {
                self.hand = hand;
            }
            self.seen = positions;
        }
        // Every main entry is in the index. Age holds the hand back for at
        // most two sweeps; then an entry needs up to three visits to spend
        // its count and a fourth to be taken: six sweeps at most.
        for step in 0..positions * 7 {
            if self.hand >= positions {
                self.hand = 0;
                self.sweeps += 1;
            }
            let at = e.at(self.hand);
            self.hand += 1;
            let Some(id) = at else {
                continue;
            };
            let b = byte(e, id);
            if b & MAIN == 0 {
                continue;
            }
            let age = (self.now(positions) + 32 - (b >> STAMP_SHIFT)) % 32;
            if (age as usize) <= PARTS && step < positions * 2 {
                continue;
            }
            if b & FREQ == 0 {
                return Some(id);
            }
            set_byte(e, id, b - 1);
        }
        debug_assert!(false, "{} main entries not in the index", self.main_len);
        None
    }
}

impl EvictionPolicy for S3Fifo {
    fn insert<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        if self.ghost.contains(fingerprint(hash)) {
            self.main_len += 1;
            set_byte(e, id, MAIN | self.now(e.positions()) << STAMP_SHIFT);
            return;
        }
        set_byte(e, id, 0);
        self.ring_push(id);
        self.small_len += 1;
        self.trim_ring(e);
    }

    #[inline]
    fn touch<E: Entries>(&mut self, e: &mut E, id: u32, _hash: u64) {
        self.touch_shared(e, id);
    }

    #[inline]
    fn touch_shared<E: Entries>(&self, e: &E, id: u32) -> bool {
        // A load and a store, not a read-modify-write: two readers racing
        // may count one read instead of two, which the policy tolerates.
        let b = byte(e, id);
        if b & FREQ < FREQ_MAX {
            set_byte(e, id, b + 1);
        }
        true
    }

    fn remove<E: Entries>(&mut self, e: &mut E, id: u32, hash: u64) {
        // Its id leaves the ring's front, or stays in the ring, counted
        // stale, until it comes round.
        let b = byte(e, id);
        set_byte(e, id, UNTRACKED);
        if b & MAIN != 0 {
            self.main_len -= 1;
        } else {
            if b & STAMP == 0 {
                self.leave_ring(id);
            }
            self.small_len -= 1;
            if b & STAMP == COLD {
                self.cold_len -= 1;
            }
            if self.pending == id {
                let main_share = self.len() * (100 - SMALL_PERCENT) / 100;
                let limit = self.main_len.max(main_share) * GHOST_PERCENT / 100;
                self.ghost.push(fingerprint(hash), limit);
            }
        }
        if self.pending == id {
            self.pending = NIL;
        }
    }

    fn replace<E: Entries>(&mut self, e: &mut E, old: u32, new: u32) {
        // The new version takes the old one's byte and its place in the
        // index (so in the main queue and among the cold entries it keeps
        // its place); with an id in the ring, it joins the ring's back.
        let b = byte(e, old);
        set_byte(e, new, b);
        set_byte(e, old, UNTRACKED);
        if b & (MAIN | STAMP) == 0 {
            self.leave_ring(old);
            self.ring_push(new);
            self.trim_ring(e);
        }
        if self.pending == old {
            self.pending = new;
        }
    }

    fn victim<E: Entries>(&mut self, e: &mut E) -> Option<u32> {
        self.evicting = true;
        // Ends: each turn either returns or moves an entry from the small
        // queue to the main one (at most once per entry).
        loop {
            if self.small_len >= self.small_target() || self.main_len == 0 {
                let front = match self.cold_len {
                    0 => None,
                    _ => self.cold_front(e),
                };
                if let Some(id) = front.or_else(|| self.ring_front(e)) {
                    let b = byte(e, id);
                    if b & FREQ >= PROMOTE_READS {
                        if b & STAMP == 0 {
                            self.small.pop_front();
                        }
                        self.promote(e, id, b);
                        continue;
                    }
                    self.pending = id;
                    return Some(id);
                }
            }
            self.pending = NIL;
            return self.main_victim(e);
        }
    }

    fn clear(&mut self) {
        *self = S3Fifo::default();
    }

    fn outside_bytes(&self) -> usize {
        self.small.capacity() * std::mem::size_of::<u32>() + self.stale.bytes() + self.ghost.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::VecEntries;
    use super::*;

    fn filled(n: u32, hash: impl Fn(u32) -> u64) -> (S3Fifo, VecEntries) {
        let mut s = S3Fifo::default();
        let mut e = VecEntries::default();
        for i in 0..n {
            e.reset(i, hash(i));
            s.insert(&mut e, i, hash(i));
        }
        (s, e)
    }

    fn in_main(e: &VecEntries, id: u32) -> bool {
        byte(e, id) & MAIN != 0
    }

    #[test]
    fn entries_read_twice_outlast_one_time_entries() {
        let (mut s, mut e) = filled(10, |i| u64::from(i) << 40);
        s.touch(&mut e, 0, 0);
        s.touch(&mut e, 0, 0);
        s.touch(&mut e, 1, 0);
        // 0 was read twice: it moves to the main queue; 1, read once, is
        // evicted like the others.
        assert_eq!(s.victim(&mut e), Some(1));
        s.remove(&mut e, 1, 1 << 40);
        assert!(in_main(&e, 0));
    }

    #[test]
    fn reads_under_a_shared_lock_count_too() {
        let (mut s, mut e) = filled(10, |i| u64::from(i) << 40);
        assert!(s.touch_shared(&e, 0));
        assert!(s.touch_shared(&e, 0));
        assert_eq!(s.victim(&mut e), Some(1));
        assert!(in_main(&e, 0));
    }

    #[test]
    fn an_evicted_key_that_returns_goes_to_the_main_queue() {
        let hash = |i: u32| u64::from(i) * 0x9e37_79b9;
        let (mut s, mut e) = filled(10, hash);
        let v = s.victim(&mut e).unwrap();
        assert_eq!(v, 0);
        s.remove(&mut e, v, hash(0));
        e.reset(0, hash(0));
        s.insert(&mut e, 0, hash(0));
        assert!(in_main(&e, 0));
        // A deleted key leaves no ghost.
        s.remove(&mut e, 5, hash(5));
        e.reset(5, hash(5));
        s.insert(&mut e, 5, hash(5));
        assert!(!in_main(&e, 5));
    }

    #[test]
    fn a_replacement_keeps_queue_and_count() {
        let (mut s, mut e) = filled(10, |i| u64::from(i) << 40);
        s.touch(&mut e, 0, 0);
        s.touch(&mut e, 0, 0);
        e.relink(0, 20, 0);
        s.replace(&mut e, 0, 20);
        // 20 is where 0 was, with its two reads: promoted, not evicted.
        assert_eq!(s.victim(&mut e), Some(1));
        assert!(in_main(&e, 20));
    }

    /// Victims until the policy has none, each removed and unlinked.
    fn drain(s: &mut S3Fifo, e: &mut VecEntries) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(v) = s.victim(e) {
            s.remove(e, v, e.hash(v));
            e.unlink(v);
            out.push(v);
        }
        out
    }

    #[test]
    fn while_a_cache_fills_the_ring_keeps_to_a_tenth_and_the_oldest_go_first() {
        // Equal low halves: the index keeps the ids in the order they came.
        let (mut s, mut e) = filled(1000, |i| u64::from(i) << 40);
        assert_eq!((s.small_len, s.main_len), (1000, 0));
        assert!(s.small.len() <= 101, "{} ids in the ring", s.small.len());
        assert_eq!(s.cold_len, 1000 - s.small.len());
        // As S3-FIFO's small queue: oldest first, whether cold or not.
        assert_eq!(drain(&mut s, &mut e), (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn a_cache_nobody_reads_evicts_in_arrival_order_once_the_cold_are_gone() {
        // Nothing is promoted, so the small queue is the whole cache. The
        // entries that went cold while it filled go first (in index order),
        // then the others strictly oldest first, as in S3-FIFO.
        let h = |i: u32| u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let (mut s, mut e) = filled(1000, h);
        let cold = s.cold_len;
        assert_eq!(cold, 900);
        let mut order: std::collections::VecDeque<u32> = (0..1000).collect();
        // The n-th victim's id is reused at once by key `next`.
        for (n, next) in (0..crate::testing::size(20_000, 1_000)).zip(1000u32..) {
            let v = s.victim(&mut e).unwrap();
            let hv = e.hash(v);
            s.remove(&mut e, v, hv);
            e.unlink(v);
            let at = order.iter().position(|&k| k == v).unwrap();
            if n < cold {
                assert!(at < cold - n, "victim {v} was {at}th oldest");
            } else {
                assert_eq!(at, 0, "victim {v} after {n}");
            }
            order.remove(at);
            e.reset(v, h(next));
            s.insert(&mut e, v, h(next));
            order.push_back(v);
            assert!(s.small.len() <= 1000 + 100 + 64, "{} ids", s.small.len());
        }
    }

    #[test]
    fn replacements_leave_no_pile_of_stale_ids() {
        // A key set again and again with a value of another size: each
        // version has another id, the old ones go stale in the ring.
        let h = |i: u32| u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let (mut s, mut e) = filled(100, h);
        let key = *s.small.back().unwrap();
        let (mut cur, mut other) = (key, 10_000);
        for _ in 0..crate::testing::size(10_000, 300) {
            e.relink(cur, other, h(key));
            s.replace(&mut e, cur, other);
            (cur, other) = (other, cur);
            assert!(s.small.len() <= 2 * 20 + 64 + 1, "{} ids", s.small.len());
        }
        // The key's latest version is still the one the ring holds.
        assert!(s.small.iter().any(|&id| id == cur));
        assert_eq!(drain(&mut s, &mut e).len(), 100);
    }

    #[test]
    fn a_stale_id_in_the_ring_is_never_taken_for_the_entry_that_reuses_it() {
        let mut s = S3Fifo::default();
        let mut e = VecEntries::default();
        let h = |i: u32| u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        e.reset(0, h(0));
        s.insert(&mut e, 0, h(0));
        // Evicting from now on: the ring keeps every new entry's id.
        assert_eq!(s.victim(&mut e), Some(0));
        for i in 1..4 {
            e.reset(i, h(i));
            s.insert(&mut e, i, h(i));
        }
        // 1 is deleted; its id (a block offset in a shard) is reused at
        // once by another key.
        s.remove(&mut e, 1, h(1));
        e.unlink(1);
        e.reset(1, h(100));
        s.insert(&mut e, 1, h(100));
        // The new 1 leaves after 2 and 3, from its own place in the ring.
        assert_eq!(drain(&mut s, &mut e), [0, 2, 3, 1]);
        assert!(s.small.is_empty());
    }

    #[test]
    fn an_entry_taken_out_while_still_indexed_is_not_offered() {
        // A shard takes the entry it replaces out of the policy while it
        // makes room, then puts it back.
        for n in [1, 10, 200] {
            let (mut s, mut e) = filled(n, |i| u64::from(i) << 40);
            // Read three times: promoted with a full count, all stamped as
            // young (the hand's worst case: six sweeps for a victim).
            for i in 0..n {
                for _ in 0..3 {
                    s.touch(&mut e, i, 0);
                }
            }
            let parked = s.victim(&mut e).unwrap();
            s.remove(&mut e, parked, 0);
            for _ in 0..n - 1 {
                let v = s.victim(&mut e).unwrap();
                assert_ne!(v, parked);
                s.remove(&mut e, v, 0);
                e.unlink(v);
            }
            assert_eq!(s.victim(&mut e), None);
            s.insert(&mut e, parked, 0);
            assert_eq!(s.victim(&mut e), Some(parked));
        }
    }

    #[test]
    fn every_entry_is_eventually_a_victim() {
        let mut s = S3Fifo::default();
        let mut e = VecEntries::default();
        for i in 0..50 {
            e.reset(i, u64::from(i));
            s.insert(&mut e, i, u64::from(i));
            for _ in 0..i % 5 {
                s.touch(&mut e, i, 0);
            }
        }
        let mut seen = Vec::new();
        while let Some(v) = s.victim(&mut e) {
            s.remove(&mut e, v, u64::from(v));
            seen.push(v);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..50).collect::<Vec<_>>());
    }
}
