//! The disk tier's figures (`--disk-cache`), on /stats and /metrics only when there is one.
//! Names follow kura http's own (`objects`, `bytes`, `limit_bytes`) with a `disk_` prefix;
//! where memcached's extstore has a figure of the same meaning, docs/http.md names it.

use super::{Figure, Kind};
use crate::cache::Cache;

/// The disk tier's figures, none without one.
pub(super) fn figures(cache: &Cache) -> Vec<Figure> {
    use Kind::{Counter, Gauge};
    let Some(f) = cache.store().flash_stats() else {
        return Vec::new();
    };
    let kept = cache.bans().disk().map_or(0, |d| d.len() as u64);
    vec![
        // extstore_objects_used, extstore_bytes_used, extstore_limit_maxbytes
        ("disk_objects", Gauge, f.objects_used),
        ("disk_bytes", Gauge, f.bytes_used),
        ("disk_limit_bytes", Gauge, f.limit_maxbytes),
        // extstore_objects_written, extstore_bytes_written
        ("disk_writes", Counter, f.objects_written),
        ("disk_written_bytes", Counter, f.bytes_written),
        ("disk_writes_dropped", Counter, f.writes_dropped),
        ("disk_write_errors", Counter, f.write_errors),
        ("disk_buffered_bytes", Gauge, f.bytes_buffered),
        // get_extstore, miss_from_extstore, badcrc_from_extstore
        ("disk_reads", Counter, f.get_extstore),
        ("disk_read_misses", Counter, f.miss_from_extstore),
        ("disk_read_badcrc", Counter, f.badcrc_from_extstore),
        ("disk_read_queue_full", Counter, f.read_queue_full),
        ("disk_reads_waiting", Gauge, f.reads_waiting),
        // recache_from_extstore
        ("disk_recached", Counter, f.recache_from_extstore),
        // extstore_objects_evicted, extstore_page_evictions
        ("disk_evicted_objects", Counter, f.objects_evicted),
        ("disk_page_evictions", Counter, f.page_evictions),
        ("disk_rebuilt_objects", Counter, f.rebuild_records),
        ("disk_rebuild_damaged", Counter, f.rebuild_damaged),
        ("disk_index_bytes", Gauge, f.index_bytes),
        ("disk_bans_kept", Gauge, kept),
        (
            "disk_ban_floor",
            Gauge,
            cache.bans().disk().map_or(0, |d| u64::from(d.floor())),
        ),
    ]
}
