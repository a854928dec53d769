//! kura-store: an embeddable, sharded, TTL-aware cache with zero-copy
//! values, and the storage engine of `kura server`.
//!
//! * Keys are spread over shards by hash; each shard has its own lock,
//!   eviction order (exact LRU by default; S3-FIFO, W-TinyLFU or SIEVE on
//!   request, behind [`EvictionPolicy`]) and
//!   share of one memory limit that counts keys, values and bookkeeping.
//! * Expiry follows memcached ([`Expiry::from_exptime`]) and is checked on
//!   every read; a [`Reaper`] thread reclaims expired entries in the
//!   background.
//! * Values are [`Item`]s: reference-counted, immutable, handed out without
//!   copying. An item replaced or evicted while a reader holds it stays
//!   valid for that reader.
//! * The operations memcached needs: get, get-and-touch, set, add, replace,
//!   append, prepend, cas, incr/decr, touch, delete, flush with delay, and
//!   the meta protocol's vivify/recache/invalidate.
//!
//! ```
//! use std::sync::Arc;
//! use kura_store::{Expiry, Store, StoreConfig};
//!
//! let store = Arc::new(Store::new(StoreConfig::with_capacity(16 << 20)));
//! store.insert(b"user:1", b"alice", Expiry::In(60));
//! let item = store.get(b"user:1").unwrap();
//! assert_eq!(item.value(), b"alice");
//! ```

mod api;
mod arena;
mod census;
mod changes;
mod clock;
pub mod eviction;
mod expiry;
mod flash;
mod index;
mod item;
mod ops;
mod pages;
mod reaper;
pub(crate) mod shard;
mod store;
#[cfg(test)]
mod testing;

pub use api::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, GetOptions, Hit, SetMode, SetOutcome,
    SetRequest, SizeLimit,
};
pub use census::FlagsCensus;
pub use changes::{Change, ChangeSink, Entry, EntryRef, Report};
pub use clock::{monotonic_nanos, Clock};
pub use eviction::{EvictionKind, EvictionPolicy};
pub use expiry::{Expiry, RELATIVE_EXPTIME_MAX};
pub use flash::{Faults, FlashConfig, FlashRead, FlashStats};
pub use item::{Item, KEY_MAX};
pub use reaper::Reaper;
pub use shard::classes::{class_bound, size_class, ClassStats, MAX_CLASS};
pub use store::{
    default_shards, EntryView, EvictionWatch, Got, OnFlash, Scan, ScanCursor, Store, StoreConfig,
    StoreStats, Writes, FLASH_MAINTAIN_EVERY_US,
};
