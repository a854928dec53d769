//! Recovery at startup: a recovered record applied to the store, and the
//! progress shown while a large data dir loads.

use std::time::{Duration, Instant};

use kura_log::Mutation;
use kura_store::{Change, EntryRef, Item, Store};

/// Applies a recovered record to the store.
pub(crate) fn apply(store: &Store, m: &Mutation) {
    match m {
        Mutation::Set {
            key,
            value,
            flags,
            exptime,
            cas,
            stale,
            binary_key,
        } => {
            let item = Item::new(key, *flags, value);
            store.replay(Change::Put(EntryRef {
                item: &item,
                cas: *cas,
                exptime: *exptime,
                stale: *stale,
                binary_key: *binary_key,
            }));
        }
        Mutation::Delete { key } => {
            store.replay(Change::Remove { key });
        }
        Mutation::Evict { key } => {
            store.replay(Change::Evict { key });
        }
        Mutation::Touch { key, exptime } => {
            store.replay(Change::Touch {
                key,
                exptime: *exptime,
            });
        }
        Mutation::Flush { at } => {
            store.replay(Change::Flush { at: *at });
        }
    }
}

/// Logs progress about once a second while a large data dir loads.
pub(super) struct Progress {
    count: u64,
    last: Instant,
}

impl Progress {
    pub(super) fn new() -> Progress {
        Progress {
            count: 0,
            last: Instant::now(),
        }
    }

    pub(super) fn tick(&mut self, what: &str) {
        self.count += 1;
        if self.count.is_multiple_of(4096) && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            tracing::info!("loading: {} {what} so far", self.count);
        }
    }
}
