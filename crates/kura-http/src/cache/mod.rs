//! HTTP objects in kura-store.
//!
//! The primary key of a request is its normalised absolute URI. At that key the store holds
//! either the object itself (a response without `Vary`), or a Vary record (`object.rs`) whose
//! generation and the request's secondary key (RFC 9111 §4.1, `rules::vary`) give the key of
//! the variant; or a hit-for-miss marker. One `Vary` per URL: a response with another `Vary`
//! starts a new generation (docs/http.md). Records expire from the store at the end of their
//! freshness plus the longest time they may still be served stale (grace, stale-if-error, the
//! response's own `stale-*`) plus `keep` when they have validators.

pub mod object;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::VARY;
use http::{HeaderMap, StatusCode};
use kura_store::{EvictionKind, Expiry, Reaper, SetOutcome, Store, StoreConfig, KEY_MAX};

use crate::rules::freshness::Freshness;
use crate::rules::vary::Vary;
use crate::rules::CachePolicy;
use object::{Object, Record};

/// Bytes a variant key adds to its primary key.
const VARIANT_SUFFIX: usize = 2 + 8 + 8;
/// The longest primary key stored; longer URLs are passed (not cached).
pub const PRIMARY_MAX: usize = KEY_MAX - VARIANT_SUFFIX;

/// What the store holds for a request.
// Returned once per request and matched at once: boxing the object would cost an allocation
// on every hit for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Lookup {
    /// A stored response whose secondary key matches.
    Hit(Object),
    /// Nothing usable.
    Miss,
    /// The URL's last response was not storable.
    HitForMiss,
}

/// The cache: a kura-store and the keys of HTTP objects in it.
pub struct Cache {
    store: Arc<Store>,
    generation: AtomicU64,
    _reaper: Reaper,
}

impl Cache {
    /// A cache of `capacity` bytes, with `shards` shards (0: the store's default).
    pub fn new(capacity: usize, shards: usize) -> Cache {
        let store = Arc::new(Store::new(StoreConfig {
            capacity,
            shards,
            eviction: EvictionKind::S3Fifo,
            ..StoreConfig::default()
        }));
        let reaper = Reaper::spawn(&store, Duration::from_secs(1));
        let seed = object::epoch_millis(SystemTime::now());
        Cache {
            store,
            generation: AtomicU64::new(seed),
            _reaper: reaper,
        }
    }

    /// The store (for statistics).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Looks up the response stored for `primary` that matches request fields `request`.
    pub fn lookup(&self, primary: &[u8], request: &HeaderMap) -> Lookup {
        let Some(item) = self.store.get(primary) else {
            return Lookup::Miss;
        };
        match object::decode(item.value_bytes()) {
            Some(Record::Object(object)) => Lookup::Hit(object),
            Some(Record::HitForMiss) => Lookup::HitForMiss,
            Some(Record::Vary { generation, vary }) => {
                let mut fields = HeaderMap::new();
                fields.insert(VARY, vary);
                let vary = Vary::from_headers(&fields);
                let Some(secondary) = vary.secondary_key(request) else {
                    return Lookup::Miss;
                };
                let key = variant_key(primary, generation, secondary.as_bytes());
                let Some(item) = self.store.get(&key) else {
                    return Lookup::Miss;
                };
                match object::decode(item.value_bytes()) {
                    Some(Record::Object(object)) if object.secondary == secondary.as_bytes() => {
                        Lookup::Hit(object)
                    }
                    _ => Lookup::Miss,
                }
            }
            None => Lookup::Miss,
        }
    }

    /// Stores a response for `primary`, fetched for a request with fields `request`, its body
    /// in `body`'s chunks (copied once, into the record). Returns false when it was not stored
    /// (no room, `Vary` never matches, nothing to keep it for).
    #[allow(clippy::too_many_arguments)]
    pub fn insert<B: AsRef<[u8]>>(
        &self,
        policy: &CachePolicy,
        keep: Duration,
        primary: &[u8],
        request: &HeaderMap,
        status: StatusCode,
        freshness: &Freshness,
        headers: &HeaderMap,
        body: &[B],
    ) -> bool {
        if primary.len() > PRIMARY_MAX {
            return false;
        }
        let Some(ttl) = store_ttl(policy, keep, freshness, headers) else {
            return false;
        };
        let expiry = Expiry::after(ttl);
        let vary = Vary::from_headers(headers);
        let Some(secondary) = vary.secondary_key(request) else {
            return false;
        };
        let length = body.iter().map(|chunk| chunk.as_ref().len()).sum();
        let mut value =
            object::encode_head(status, freshness, secondary.as_bytes(), headers, length);
        for chunk in body {
            value.extend_from_slice(chunk.as_ref());
        }
        let Some(vary_value) = joined_vary(headers) else {
            return stored(self.store.insert(primary, &value, expiry));
        };
        let generation = match self
            .store
            .get(primary)
            .and_then(|i| object::decode(i.value_bytes()))
        {
            Some(Record::Vary { generation, vary }) if vary == vary_value => generation,
            _ => {
                let generation = self.generation.fetch_add(1, Ordering::Relaxed);
                let record = object::encode_vary(generation, &vary_value);
                if !stored(self.store.insert(primary, &record, expiry)) {
                    return false;
                }
                generation
            }
        };
        // The Vary record lives at least as long as the variant just stored.
        self.store.touch(primary, expiry);
        let key = variant_key(primary, generation, secondary.as_bytes());
        stored(self.store.insert(&key, &value, expiry))
    }

    /// Marks `primary` hit-for-miss for `ttl`, unless an object is stored there.
    pub fn hit_for_miss(&self, primary: &[u8], ttl: Duration) {
        if primary.len() > PRIMARY_MAX || ttl.is_zero() {
            return;
        }
        let record = object::encode_hit_for_miss();
        self.store.insert(primary, &record, Expiry::after(ttl));
    }

    /// Invalidates every stored response for `primary` (all its variants).
    pub fn invalidate(&self, primary: &[u8]) -> bool {
        self.store.delete(primary)
    }
}

fn stored(outcome: SetOutcome) -> bool {
    matches!(outcome, SetOutcome::Stored { .. })
}

/// The `Vary` field lines of `headers` joined, or `None` without `Vary`.
fn joined_vary(headers: &HeaderMap) -> Option<http::HeaderValue> {
    let mut lines = headers.get_all(VARY).iter();
    let first = lines.next()?;
    let mut joined = first.as_bytes().to_vec();
    for line in lines {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(line.as_bytes());
    }
    http::HeaderValue::from_bytes(&joined).ok()
}

/// The key of the variant with `secondary` key under `primary`'s Vary record of `generation`.
fn variant_key(primary: &[u8], generation: u64, secondary: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(primary.len() + VARIANT_SUFFIX);
    key.extend_from_slice(primary);
    key.extend_from_slice(b"\0v");
    key.extend_from_slice(&generation.to_be_bytes());
    let hash = foldhash::quality::FixedState::with_seed(0x6b75_7261).hash_one(secondary);
    key.extend_from_slice(&hash.to_be_bytes());
    key
}

/// How long the store keeps an object: its remaining freshness, then the longest it may be
/// served stale, then `keep` if it can be revalidated. `None` when that is no time at all.
fn store_ttl(
    policy: &CachePolicy,
    keep: Duration,
    freshness: &Freshness,
    headers: &HeaderMap,
) -> Option<Duration> {
    let now = SystemTime::now();
    let stale = &freshness.stale;
    let mut stale_use = stale
        .while_revalidate
        .unwrap_or_default()
        .max(stale.if_error.unwrap_or_default());
    if !stale.must_revalidate && !stale.no_cache && !stale.s_maxage {
        stale_use = stale_use.max(policy.grace).max(policy.stale_if_error);
    }
    if stale.must_revalidate {
        stale_use = Duration::ZERO;
    }
    let mut ttl = freshness.remaining(now).saturating_add(stale_use);
    if crate::rules::validation::conditional::has_validators(headers) {
        ttl = ttl.saturating_add(keep);
    }
    (!ttl.is_zero()).then_some(ttl)
}

#[cfg(test)]
mod tests;
