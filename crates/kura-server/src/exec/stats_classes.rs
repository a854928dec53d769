//! `stats items` and `stats slabs` by size class: kura's classes are its
//! arena allocator's first-level classes (`kura_store::size_class`), each
//! shown under memcached's names so that `memcached-tool` and exporters
//! read them. docs/compatibility.md has the mapping: a class's chunks are
//! its entries' blocks, its pages the 1 MiB its blocks' bytes round up to;
//! what kura does not have (LRU segments, free chunks of a class, hits per
//! class) is 0.

use kura_proto::reply;
use kura_store::{class_bound, ClassStats};

use super::Session;

/// memcached's slab page (`slab_page_size`): a class's bytes are shown as
/// this many pages, rounded up.
const PAGE: u64 = 1024 * 1024;

fn held(all: &[ClassStats]) -> impl Iterator<Item = (usize, &ClassStats)> {
    all.iter().enumerate().filter(|(_, c)| c.items > 0)
}

/// `stats items`: each class holding entries.
pub(super) fn items(s: &mut Session<'_>) {
    let all = s.shared.store.class_stats();
    let o = &mut s.out;
    for (class, c) in held(&all) {
        let stat = |o: &mut Vec<u8>, name: &str, v: u64| {
            reply::stat(o, &format!("items:{class}:{name}"), v);
        };
        stat(o, "number", c.items);
        for name in [
            "number_hot",
            "number_warm",
            "number_cold",
            "age_hot",
            "age_warm",
            "age",
        ] {
            stat(o, name, 0);
        }
        stat(o, "mem_requested", c.bytes);
        stat(o, "evicted", c.evicted);
        stat(o, "evicted_nonzero", c.evicted_nonzero);
        stat(o, "evicted_time", u64::from(c.evicted_time));
        stat(o, "outofmemory", c.out_of_memory);
        stat(o, "tailrepairs", 0);
        stat(o, "reclaimed", c.reclaimed);
        stat(o, "expired_unfetched", c.expired_unfetched);
        stat(o, "evicted_unfetched", c.evicted_unfetched);
        stat(o, "evicted_active", 0);
        stat(o, "crawler_reclaimed", c.crawler_reclaimed);
        for name in [
            "crawler_items_checked",
            "lrutail_reflocked",
            "moves_to_cold",
            "moves_to_warm",
            "moves_within_lru",
            "direct_reclaims",
            "hits_to_hot",
            "hits_to_warm",
            "hits_to_cold",
            "hits_to_temp",
        ] {
            stat(o, name, 0);
        }
    }
}

/// `stats slabs`: each class holding entries, then the totals.
pub(super) fn slabs(s: &mut Session<'_>) {
    let all = s.shared.store.class_stats();
    let o = &mut s.out;
    let mut classes = 0;
    let mut malloced = 0;
    for (class, c) in held(&all) {
        let stat = |o: &mut Vec<u8>, name: &str, v: u64| {
            reply::stat(o, &format!("{class}:{name}"), v);
        };
        let bound = class_bound(class);
        stat(o, "chunk_size", bound);
        stat(o, "chunks_per_page", (PAGE / bound).max(1));
        stat(o, "total_pages", c.bytes.div_ceil(PAGE));
        stat(o, "total_chunks", c.items);
        stat(o, "used_chunks", c.items);
        stat(o, "free_chunks", 0);
        stat(o, "free_chunks_end", 0);
        for name in [
            "get_hits",
            "cmd_set",
            "delete_hits",
            "incr_hits",
            "decr_hits",
            "cas_hits",
            "cas_badval",
            "touch_hits",
        ] {
            stat(o, name, 0);
        }
        classes += 1;
        malloced += c.bytes;
    }
    reply::stat(o, "active_slabs", classes);
    reply::stat(o, "total_malloced", malloced);
}
