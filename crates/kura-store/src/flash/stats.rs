//! The flash tier's figures: its counters, and the snapshot `stats`
//! shows (memcached's `extstore_*` lines and kura's own).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::Tier;

/// The tier's counters, memcached's `extstore_*` names without the prefix.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub page_allocs: AtomicU64,
    pub page_evictions: AtomicU64,
    pub page_reclaims: AtomicU64,
    pub objects_evicted: AtomicU64,
    pub objects_read: AtomicU64,
    pub objects_written: AtomicU64,
    pub bytes_evicted: AtomicU64,
    pub bytes_written: AtomicU64,
    pub bytes_read: AtomicU64,
    pub compact_lost: AtomicU64,
    pub compact_rescues: AtomicU64,
    pub compact_skipped: AtomicU64,
    pub get_extstore: AtomicU64,
    pub recache_from_extstore: AtomicU64,
    pub miss_from_extstore: AtomicU64,
    pub badcrc_from_extstore: AtomicU64,
    pub write_errors: AtomicU64,
    pub writes_dropped: AtomicU64,
    pub recache_tick: AtomicU64,
    pub rebuild_records: AtomicU64,
    pub rebuild_damaged: AtomicU64,
    pub rebuild_reads: AtomicU64,
    pub read_queue_full: AtomicU64,
}

/// A snapshot of the tier for `stats` (memcached's extstore lines, and
/// kura's own after them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlashStats {
    pub page_allocs: u64,
    pub page_evictions: u64,
    pub page_reclaims: u64,
    pub pages_free: u64,
    pub pages_used: u64,
    pub objects_evicted: u64,
    pub objects_read: u64,
    pub objects_written: u64,
    pub objects_used: u64,
    pub bytes_evicted: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub bytes_used: u64,
    pub bytes_fragmented: u64,
    pub limit_maxbytes: u64,
    pub io_queue: u64,
    pub compact_lost: u64,
    pub compact_rescues: u64,
    pub compact_skipped: u64,
    pub get_extstore: u64,
    pub recache_from_extstore: u64,
    pub miss_from_extstore: u64,
    pub badcrc_from_extstore: u64,
    /// Write buffers the device refused (their records became misses).
    pub write_errors: u64,
    /// Evicted values not written: the writer was `write_queue` buffers
    /// behind, or the record was larger than a write buffer.
    pub writes_dropped: u64,
    /// RAM the shards' maps of flash records take.
    pub index_bytes: u64,
    /// Records indexed again when a persistent tier was opened.
    pub rebuild_records: u64,
    /// Records skipped then: damaged (CRC, length) or cut off.
    pub rebuild_damaged: u64,
    /// Device reads that scan made (at most two a write buffer's worth of
    /// each page: bounded by the files' size, not by what they hold).
    pub rebuild_reads: u64,
    /// Reads waiting for a reader thread.
    pub reads_waiting: u64,
    /// Bytes of records in write buffers, not yet handed to the device
    /// (what a SIGKILL now would lose).
    pub bytes_buffered: u64,
    /// Reads answered as misses because `read_queue` reads were waiting.
    pub read_queue_full: u64,
}

impl Tier {
    /// The tier's figures; `index_bytes` is the caller's.
    pub(crate) fn stats(&self) -> FlashStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Relaxed);
        let (free, io_queue, buffered) = {
            let st = self.st.lock();
            let open = st.open.iter().map(|(_, b)| b.data.len());
            let waiting = st.pending.iter().map(|b| b.data.len());
            let buffered = open.chain(waiting).sum::<usize>() as u64;
            (st.free.len() as u64, st.pending.len() as u64, buffered)
        };
        let n = self.pages.len() as u64;
        let (mut live, mut objects, mut filled) = (0, 0, 0);
        for p in self.pages.iter() {
            live += l(&p.live);
            objects += l(&p.objects);
            filled += l(&p.filled);
        }
        FlashStats {
            page_allocs: l(&c.page_allocs),
            page_evictions: l(&c.page_evictions),
            page_reclaims: l(&c.page_reclaims),
            pages_free: free,
            pages_used: n - free,
            objects_evicted: l(&c.objects_evicted),
            objects_read: l(&c.objects_read),
            objects_written: l(&c.objects_written),
            objects_used: objects,
            bytes_evicted: l(&c.bytes_evicted),
            bytes_written: l(&c.bytes_written),
            bytes_read: l(&c.bytes_read),
            bytes_used: live,
            bytes_fragmented: filled.saturating_sub(live),
            limit_maxbytes: n * self.config.page_size,
            io_queue,
            compact_lost: l(&c.compact_lost),
            compact_rescues: l(&c.compact_rescues),
            compact_skipped: l(&c.compact_skipped),
            get_extstore: l(&c.get_extstore),
            recache_from_extstore: l(&c.recache_from_extstore),
            miss_from_extstore: l(&c.miss_from_extstore),
            badcrc_from_extstore: l(&c.badcrc_from_extstore),
            write_errors: l(&c.write_errors),
            writes_dropped: l(&c.writes_dropped),
            index_bytes: 0,
            rebuild_records: l(&c.rebuild_records),
            rebuild_damaged: l(&c.rebuild_damaged),
            rebuild_reads: l(&c.rebuild_reads),
            reads_waiting: self.pool.waiting() as u64,
            bytes_buffered: buffered,
            read_queue_full: l(&c.read_queue_full),
        }
    }
}
