//! The flash tier's settings.

use std::path::PathBuf;
use std::time::Duration;

/// The flash tier's settings, memcached's `ext_*` options.
#[derive(Debug, Clone, PartialEq)]
pub struct FlashConfig {
    /// Files and their sizes in bytes (`ext_path=FILE:SIZE`, repeatable).
    pub files: Vec<(PathBuf, u64)>,
    /// Bytes a page (`ext_page_size`, memcached's default 64 MiB).
    pub page_size: u64,
    /// Bytes a write buffer (`ext_wbuf_size`, default 4 MiB): the largest
    /// record the tier takes, and the unit of writes.
    pub wbuf_size: usize,
    /// Values at least this long go to flash (`ext_item_size`, 512).
    pub item_size: usize,
    /// Entries not read or written for more than this many seconds go to
    /// flash before the cache needs their room (`ext_item_age`; `None`,
    /// memcached's default: only when evicted). A background walk of the
    /// shards looks for them, a slice of each shard every 200 ms.
    pub item_age: Option<u32>,
    /// Reader threads (`ext_threads`, 1).
    pub threads: usize,
    /// Compact when fewer pages than this are free (`ext_compact_under`;
    /// 0: 1% of the pages, at least 1).
    pub compact_under: usize,
    /// Under this many free pages, compaction drops records never read
    /// instead of rewriting them, when `drop_unread` is on
    /// (`ext_drop_under`; 0: as `compact_under`).
    pub drop_under: usize,
    /// Compact only pages whose live bytes are under this fraction of the
    /// page (`ext_max_frag`, 0.8).
    pub max_frag: f64,
    /// `ext_drop_unread`: see `drop_under`.
    pub drop_unread: bool,
    /// Full write buffers at most waiting for the writer thread (kura's;
    /// default 4): a value evicted while they are all waiting is dropped,
    /// not waited for.
    pub write_queue: usize,
    /// Read back into RAM one in this many repeated hits
    /// (`ext_recache_rate`, 2000; a record must have been read
    /// `recache_after` times; at most 3, what a record's slot counts).
    pub recache_rate: u32,
    /// Reads of a record before `recache_rate` applies to it (kura's;
    /// default 2, memcached's: a record is brought back on a repeated hit;
    /// kura http's disk tier: 1, every read brings it back into RAM).
    pub recache_after: u32,
    /// Hand the open page's buffer to the writer once it has held records
    /// this long without filling (kura's; `None`, the default: only when
    /// full). A persistent tier bounds what a SIGKILL loses with it.
    pub flush_after: Option<Duration>,
    /// Keep the files' records across a restart (re-indexed when opened)
    /// instead of emptying them (kura's; default false).
    pub persist: bool,
    /// Reads at most waiting for a reader thread ([`FlashRead`]); a read
    /// asked while they are all waiting is a miss (kura's; default 1024).
    pub read_queue: usize,
    /// Write every value a set stores to flash at once as well, not only
    /// when RAM evicts it (kura's; default false; kura http's
    /// `disk_cache_all`): a key is then in RAM and on flash, the record a
    /// copy of RAM's version. Any change to the entry forgets the copy
    /// before the change is visible; an eviction keeps it instead of
    /// writing the value again. With [`persist`](Self::persist), a crash
    /// keeps what RAM held too.
    pub write_through: bool,
}

impl Default for FlashConfig {
    fn default() -> Self {
        FlashConfig {
            files: Vec::new(),
            page_size: 64 << 20,
            wbuf_size: 4 << 20,
            item_size: 512,
            item_age: None,
            threads: 1,
            compact_under: 0,
            drop_under: 0,
            max_frag: 0.8,
            drop_unread: false,
            recache_rate: 2000,
            recache_after: 2,
            flush_after: None,
            write_queue: 4,
            persist: false,
            read_queue: 1024,
            write_through: false,
        }
    }
}
