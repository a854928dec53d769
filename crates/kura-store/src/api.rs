//! The store's request and outcome types: what a caller asks a shard to
//! do (look up, store, count, delete) and what it reports back. The store
//! never formats protocol replies; these say what happened, and the
//! operations themselves are in `ops.rs`.

use crate::expiry::Expiry;
use crate::item::Item;

/// What a lookup may do besides reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// Set a new expiry on a hit (`gat`, `touch`, meta `T`). An entry
    /// created by `vivify` keeps the vivify expiry.
    pub touch: Option<Expiry>,
    /// Do not bump the entry, mark it fetched or note the access (meta `u`).
    pub no_bump: bool,
    /// On a miss, create an empty entry with this expiry (meta `N`).
    pub vivify: Option<Expiry>,
    /// Win the recache token when the entry expires before this (meta `R`).
    pub recache: Option<Expiry>,
    /// Whether `recache` compares with the expiry set by `touch` rather
    /// than the one before it (memcached applies meta flags in request
    /// order, so it depends on whether `R` comes after `T`).
    pub recache_after_touch: bool,
    /// A lookup that finds a stale entry whose recache token is not out
    /// wins it (meta get; memcached's other reads leave the token alone).
    pub stale_token: bool,
}

/// A hit: the item handle and its metadata. Fields describing the entry
/// "before" are as they were before this lookup changed them.
#[derive(Debug, Clone)]
pub struct Hit {
    pub item: Item,
    pub cas: u64,
    /// Unix deadline after this lookup (0 = never).
    pub exptime: u32,
    /// Unix deadline before this lookup.
    pub exptime_before: u32,
    /// Unix time of the last bumping access before this one.
    pub last_access: u32,
    /// Whether the entry had been fetched before this lookup.
    pub fetched: bool,
    /// The entry is stale (invalidated); meta `X`.
    pub stale: bool,
    /// This client won the recache token; meta `W`.
    pub won: bool,
    /// Another client already holds the recache token; meta `Z`.
    pub token_sent: bool,
    /// The entry was created by this lookup (vivify).
    pub created: bool,
    /// The entry was stored with a binary (base64) key.
    pub binary_key: bool,
}

/// Which storage command.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SetMode {
    /// Store unconditionally (or compare-and-swap when a CAS is given).
    #[default]
    Set,
    /// Store only if absent.
    Add,
    /// Store only if present (or compare-and-swap when a CAS is given).
    Replace,
    /// Add to the end of an existing value.
    Append,
    /// Add to the front of an existing value.
    Prepend,
    /// Value rotation (seed 003's footprints): append to the value, then
    /// cut from its front so that it is at most `max` bytes; a missing
    /// entry is created (with the request's flags and expiry) from the last
    /// `max` bytes of the data. An existing entry keeps its flags and
    /// expiry, as with append.
    Rotate { max: u32 },
}

/// A storage request.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetRequest<'a> {
    pub mode: SetMode,
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    pub expiry: Option<Expiry>,
    /// Compare this CAS unique before storing.
    pub cas: Option<u64>,
    /// With `cas`: a CAS older than the item's still stores, marking it
    /// stale (meta `I`).
    pub invalidate: bool,
    /// Give the item this CAS unique instead of a fresh one (meta `E`).
    pub new_cas: Option<u64>,
    /// The key was sent base64-encoded (meta `b`).
    pub binary_key: bool,
    /// With append/prepend: the item they build must pass this size test,
    /// else the store reports [`SetOutcome::NotStored`] and leaves the item
    /// as it was (memcached cannot allocate the combined item).
    pub size_limit: Option<SizeLimit>,
}

/// memcached's item size test (`-I`): its 48-byte item header, the key and
/// a NUL, the value and its `\r\n`, 8 bytes of CAS when enabled and 4 bytes
/// of client flags when they are nonzero must fit in `item_size_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeLimit {
    pub item_size_max: usize,
    pub cas: bool,
}

impl SizeLimit {
    /// Whether an item with this key length, flags and value length fits.
    pub fn fits(&self, key_len: usize, flags: u32, value_len: usize) -> bool {
        let total = 48
            + key_len
            + 1
            + value_len.saturating_add(2)
            + if self.cas { 8 } else { 0 }
            + if flags != 0 { 4 } else { 0 };
        total <= self.item_size_max
    }
}

impl<'a> SetRequest<'a> {
    /// A plain `set` of `value` under `key`, never expiring.
    pub fn new(key: &'a [u8], value: &'a [u8]) -> Self {
        SetRequest {
            key,
            value,
            ..Default::default()
        }
    }
}

/// What a storage request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOutcome {
    /// Stored, with the item's new CAS unique.
    Stored { cas: u64 },
    /// The condition of add/replace/append/prepend was not met.
    NotStored,
    /// The CAS did not match.
    Exists,
    /// A CAS was given but the key is absent.
    NotFound,
    /// The item does not fit in memory (or eviction is off and it is full).
    NoMemory,
}

/// An `incr`/`decr` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArithRequest {
    pub incr: bool,
    pub delta: u64,
    pub cas: Option<u64>,
    /// On a miss, create the entry with this initial value and expiry.
    pub vivify: Option<(u64, Expiry)>,
    /// On success, set this expiry.
    pub touch: Option<Expiry>,
    pub new_cas: Option<u64>,
}

impl ArithRequest {
    /// `incr` (or `decr`) by `delta`.
    pub fn new(incr: bool, delta: u64) -> Self {
        ArithRequest {
            incr,
            delta,
            cas: None,
            vivify: None,
            touch: None,
            new_cas: None,
        }
    }
}

/// What an `incr`/`decr` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOutcome {
    Updated {
        value: u64,
        cas: u64,
        exptime: u32,
        exptime_before: u32,
        created: bool,
    },
    NotFound,
    NonNumeric,
    Exists,
    NoMemory,
}

/// How to delete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteRequest {
    /// Only if the CAS matches.
    pub cas: Option<u64>,
    /// Mark stale and bump the CAS instead of removing (meta `I`).
    pub invalidate: bool,
    /// With `invalidate`: new expiry.
    pub touch: Option<Expiry>,
    /// Keep the entry but drop its value (meta `x`), with these client flags.
    pub remove_value: Option<u32>,
    pub new_cas: Option<u64>,
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    Exists,
}
