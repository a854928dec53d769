//! Size classes: what a shard counts per class of block size, for
//! memcached's per-class `stats items` and `stats slabs` and for tools that
//! read them. A class is one of the arena allocator's first-level classes
//! (arena.rs: TLSF keeps its free blocks by these): class 1 holds blocks
//! below 64 bytes, class `c` above it blocks of `2^(c+4)` to `2^(c+5) - 1`
//! bytes, up to class 25. These are the only size classes kura's memory
//! has; unlike memcached's slab classes they own no pages of their own (one
//! arena per shard serves every class).

use crate::arena::UNIT;

/// The highest class (blocks are below 2^28 units).
pub const MAX_CLASS: usize = 25;

/// The class of a block of `units` units.
#[inline]
pub(crate) fn class_of_units(units: u32) -> usize {
    if units < 16 {
        1
    } else {
        (31 - units.leading_zeros()) as usize - 2
    }
}

/// The class of a block of `bytes` bytes (an item's
/// [`heap_size`](crate::Item::heap_size)).
pub fn size_class(bytes: usize) -> usize {
    class_of_units(u32::try_from(bytes / UNIT).unwrap_or(u32::MAX)).min(MAX_CLASS)
}

/// The bound of class `class`: its blocks are smaller than this many bytes
/// (and, above class 1, at least half of it).
pub fn class_bound(class: usize) -> u64 {
    1u64 << (class.clamp(1, MAX_CLASS) + 5)
}

/// What a shard (or, summed, the store) counts for one size class.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ClassStats {
    /// Entries held (as `curr_items`: flushed ones until reclaimed).
    pub items: u64,
    /// Bytes of their blocks.
    pub bytes: u64,
    pub evicted: u64,
    pub evicted_nonzero: u64,
    pub evicted_unfetched: u64,
    /// Seconds between the last eviction's entry's last access and its
    /// eviction.
    pub evicted_time: u32,
    pub reclaimed: u64,
    pub expired_unfetched: u64,
    pub crawler_reclaimed: u64,
    pub out_of_memory: u64,
}

impl ClassStats {
    /// Adds `other`'s counts to these (`evicted_time`: the larger).
    pub fn add(&mut self, other: &ClassStats) {
        self.items += other.items;
        self.bytes += other.bytes;
        self.evicted += other.evicted;
        self.evicted_nonzero += other.evicted_nonzero;
        self.evicted_unfetched += other.evicted_unfetched;
        self.evicted_time = self.evicted_time.max(other.evicted_time);
        self.reclaimed += other.reclaimed;
        self.expired_unfetched += other.expired_unfetched;
        self.crawler_reclaimed += other.crawler_reclaimed;
        self.out_of_memory += other.out_of_memory;
    }

    /// Zeroes the counters, keeping what is held (`stats reset`).
    pub(crate) fn reset(&mut self) {
        *self = ClassStats {
            items: self.items,
            bytes: self.bytes,
            ..ClassStats::default()
        };
    }
}

/// A shard's counts, by class (index 0 unused).
#[derive(Debug, Default, Clone)]
pub(crate) struct Classes([ClassStats; MAX_CLASS + 1]);

impl Classes {
    /// The counts of the class of a block of `units` units.
    #[inline]
    pub(crate) fn of(&mut self, units: u32) -> &mut ClassStats {
        &mut self.0[class_of_units(units).min(MAX_CLASS)]
    }

    /// A block of `units` units is now held.
    #[inline]
    pub(crate) fn held(&mut self, units: u32) {
        let c = self.of(units);
        c.items += 1;
        c.bytes += u64::from(units) * UNIT as u64;
    }

    /// A block of `units` units is let go.
    #[inline]
    pub(crate) fn released(&mut self, units: u32) {
        let c = self.of(units);
        c.items -= 1;
        c.bytes -= u64::from(units) * UNIT as u64;
    }

    pub(crate) fn all(&self) -> &[ClassStats; MAX_CLASS + 1] {
        &self.0
    }

    pub(crate) fn reset(&mut self) {
        self.0.iter_mut().for_each(ClassStats::reset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_the_allocators_first_level() {
        assert_eq!(size_class(16), 1);
        assert_eq!(size_class(63), 1);
        assert_eq!(size_class(64), 2);
        assert_eq!(size_class(127), 2);
        assert_eq!(size_class(128), 3);
        assert_eq!(size_class(1 << 20), 16);
        assert_eq!(size_class(usize::MAX), MAX_CLASS);
        for class in 1..=MAX_CLASS {
            let bound = class_bound(class) as usize;
            assert_eq!(size_class(bound - UNIT), class);
            if class < MAX_CLASS {
                assert_eq!(size_class(bound), class + 1);
            }
        }
    }
}
