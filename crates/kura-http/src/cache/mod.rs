//! HTTP objects in kura-store.
//!
//! The primary key of a request is its normalised absolute URI. At that key the store holds
//! either the object itself (a response without `Vary`), or a page (`page.rs`): the URL's
//! `Vary` and every variant stored for it, each matched by the request's secondary key
//! (RFC 9111 §4.1, `rules::vary`); or a hit-for-miss marker. One `Vary` per URL: a response
//! with another `Vary` replaces the page (docs/http.md). Records expire from the store at the
//! end of their freshness plus the longest time they may still be served stale (grace,
//! stale-if-error, the response's own `stale-*`) plus `keep` when they have validators.

pub mod disk;
pub mod object;
pub mod page;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::VARY;
use http::{HeaderMap, StatusCode};
use kura_store::{
    DeleteOutcome, DeleteRequest, EvictionKind, Expiry, GetOptions, Hit, Reaper, SetOutcome,
    SetRequest, Store, StoreConfig, KEY_MAX,
};

use crate::bans::{stale_since, Bans, Hold, Verdict, UNCHECKED};
use crate::rules::freshness::Freshness;
use crate::rules::vary::{SecondaryKey, Vary};
use crate::rules::CachePolicy;
use object::{Object, Record};
use page::{Page, Variant, Written, MAX_VARIANTS};

/// The longest primary key stored; longer URLs are passed (not cached).
pub const PRIMARY_MAX: usize = KEY_MAX;

/// The largest body a lookup stores again under the newest ban's number once it has checked
/// it (a copy of the object, and room for it while the old one is read): larger objects keep
/// their number, are tested again at the next lookup, and let their bans complete only when
/// the lurker's walk ends.
const ADVANCE_MAX: usize = 256 * 1024;

/// Times a lookup looks again when the entry it checked changed meanwhile, before it answers
/// a miss.
pub(crate) const LOOKUP_RETRIES: usize = 4;

/// Times an insert rereads a page that changed under it before it gives up.
const PAGE_RETRIES: usize = 4;

/// What a lookup does to the entry it checked against the bans.
enum After {
    /// Nothing: no ban is newer than it.
    Nothing,
    /// A ban matched: it goes.
    Drop,
    /// Checked and kept, but too large to store again: served if it is still stored.
    Checked,
    /// It is stored again under the newest ban's number (`Some`: with these bytes, stale).
    Advance(Option<Vec<u8>>),
}

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
    bans: Bans,
    _reaper: Reaper,
    /// The disk tier's directory, locked (`disk.rs`).
    disk: Option<disk::Disk>,
}

impl Cache {
    /// A cache of `capacity` bytes, with `shards` shards (0: the store's default).
    pub fn new(capacity: usize, shards: usize) -> Cache {
        Cache::with_bans(capacity, shards, Bans::default())
    }

    /// A cache whose objects are checked against `bans`.
    pub fn with_bans(capacity: usize, shards: usize, bans: Bans) -> Cache {
        let store = Arc::new(Store::new(StoreConfig {
            capacity,
            shards,
            eviction: EvictionKind::S3Fifo,
            ..StoreConfig::default()
        }));
        // A fresh store always takes it.
        let counted = store.count_flags(bans.census());
        debug_assert!(counted);
        let reaper = Reaper::spawn(&store, Duration::from_secs(1));
        Cache {
            store,
            bans,
            _reaper: reaper,
            disk: None,
        }
    }

    /// The store (for statistics).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The ban list.
    pub fn bans(&self) -> &Bans {
        &self.bans
    }

    fn get(&self, key: &[u8]) -> Option<Hit> {
        self.store.get_with(key, &GetOptions::default())
    }

    /// What `key` holds, read without counting as a request (no move up the eviction order).
    fn peek(&self, key: &[u8]) -> Option<Hit> {
        let peek = GetOptions {
            no_bump: true,
            ..GetOptions::default()
        };
        self.store.get_with(key, &peek)
    }

    /// `object`, stored at `key` under ban sequence `seq`, after the bans up to `head` newer
    /// than it: what the lookup finds, and what to do to the stored entry.
    fn checked(&self, key: &[u8], seq: u32, head: u32, mut object: Object) -> (Lookup, After) {
        if seq >= head {
            return (Lookup::Hit(object), After::Nothing);
        }
        let status = object.status.as_u16();
        let advance = object.body.len() <= ADVANCE_MAX;
        match self
            .bans
            .check_stored(seq, key, status, &object.headers, true)
        {
            Verdict::Keep if advance => (Lookup::Hit(object), After::Advance(None)),
            Verdict::Keep => (Lookup::Hit(object), After::Checked),
            Verdict::StaleSince(at) => {
                stale_since(&mut object.freshness, at);
                let softened = &self.bans.counters.softened;
                softened.fetch_add(1, Ordering::Relaxed);
                if !advance {
                    return (Lookup::Hit(object), After::Checked);
                }
                let stale = object::encode(&object);
                (Lookup::Hit(object), After::Advance(Some(stale)))
            }
            Verdict::Drop => {
                let banned = &self.bans.counters.banned_lookup;
                banned.fetch_add(1, Ordering::Relaxed);
                (Lookup::Miss, After::Drop)
            }
        }
    }

    /// Looks up the response stored for `primary` that matches request fields `request`. An
    /// object older than the newest ban is checked against the newer bans, then dropped, or
    /// stored again (compare-and-swap) under the newest ban's number, stale if a soft ban
    /// matched; the bans no stored object is older than are then complete (checked at every
    /// hit while the list is not empty).
    pub fn lookup(&self, primary: &[u8], request: &HeaderMap) -> Lookup {
        for _ in 0..LOOKUP_RETRIES {
            if let Some(found) = self.lookup_once(primary, request, self.get(primary)) {
                return found;
            }
        }
        Lookup::Miss
    }

    /// One try of [`Cache::lookup`] with what the store held, `hit`; `None` when the entry it
    /// checked against the bans left the store before it was stored again: another lookup or
    /// the lurker may have dropped it for a ban, which may be complete since (and so no longer
    /// listed for this check to see).
    fn lookup_once(&self, primary: &[u8], request: &HeaderMap, hit: Option<Hit>) -> Option<Lookup> {
        let Some(hit) = hit else {
            return Some(Lookup::Miss);
        };
        let head = self.bans.head();
        let kept = match object::decode(hit.item.value_bytes()) {
            Some(Record::Object(object)) => {
                let (found, after) = self.checked(primary, hit.item.flags(), head, object);
                let kept = match after {
                    After::Nothing => true,
                    After::Drop => {
                        let only_this = DeleteRequest {
                            cas: Some(hit.cas),
                            ..DeleteRequest::default()
                        };
                        let deleted = self.store.delete_with(primary, &only_this);
                        if deleted == DeleteOutcome::Deleted {
                            self.bans.complete_unreferenced();
                        }
                        return Some(found);
                    }
                    After::Checked => self.unchanged(primary, hit.cas),
                    After::Advance(stale) => {
                        let value = stale.as_deref().unwrap_or(hit.item.value());
                        self.replace(primary, value, head, hit.cas, hit.exptime)
                    }
                };
                kept.then_some(found)
            }
            Some(Record::HitForMiss) => return Some(Lookup::HitForMiss),
            Some(Record::Page(mut page)) => {
                let Some(secondary) = secondary_key(&page.vary, request) else {
                    return Some(Lookup::Miss);
                };
                let Some(variant) = page.find(secondary.as_bytes(), now_secs()) else {
                    return Some(Lookup::Miss);
                };
                let seq = variant.seq;
                let Some(Record::Object(object)) = object::decode(variant.object.clone()) else {
                    return Some(Lookup::Miss);
                };
                let (found, after) = self.checked(primary, seq, head, object);
                let this = |v: &Variant| v.secondary == secondary.as_bytes();
                let kept = match after {
                    After::Nothing => true,
                    After::Checked => self.unchanged(primary, hit.cas),
                    // Only this variant: a ban on a response field may spare the others.
                    After::Drop => {
                        page.variants.retain(|v| !this(v));
                        if page.write(&self.store, primary, Some(hit.cas)) == Written::Done {
                            self.bans.complete_unreferenced();
                        }
                        return Some(found);
                    }
                    After::Advance(stale) => {
                        for variant in page.variants.iter_mut().filter(|v| this(v)) {
                            variant.seq = head;
                            if let Some(stale) = &stale {
                                variant.object = bytes::Bytes::copy_from_slice(stale);
                            }
                        }
                        page.write(&self.store, primary, Some(hit.cas)) == Written::Done
                    }
                };
                kept.then_some(found)
            }
            None => return Some(Lookup::Miss),
        };
        if kept.is_some() {
            // The last object older than a ban may have left by any route meanwhile.
            self.bans.complete_unreferenced();
        }
        kept
    }

    /// Whether `key` still holds the entry with CAS `cas`.
    fn unchanged(&self, key: &[u8], cas: u64) -> bool {
        self.peek(key).is_some_and(|hit| hit.cas == cas)
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
        let since = self.bans.hold();
        self.insert_since(
            &since, policy, keep, primary, request, status, freshness, headers, body,
        )
    }

    /// [`Cache::insert`] for a response whose fetch began when the newest ban was the one
    /// `since` holds (taken when the fetch began, kept until this returns): the bans added
    /// since are checked first (a matching ban: not stored; a soft one: stored stale), and
    /// none of them can be completed before the object is stored under the newest number.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_since<B: AsRef<[u8]>>(
        &self,
        since: &Hold,
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
        let head = self.bans.head();
        let mut freshness = *freshness;
        match self
            .bans
            .check_stored(since.seq(), primary, status.as_u16(), headers, false)
        {
            Verdict::Keep => {}
            Verdict::Drop => return false,
            Verdict::StaleSince(at) => stale_since(&mut freshness, at),
        }
        let freshness = &freshness;
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
        let Some(vary) = joined_vary(headers) else {
            return stored(self.put(primary, &value, expiry, head));
        };
        let now = now_secs();
        let fresh = Variant {
            until: match expiry {
                Expiry::In(secs) => now.saturating_add(secs),
                _ => u32::MAX,
            },
            seq: head,
            secondary: bytes::Bytes::copy_from_slice(secondary.as_bytes()),
            object: bytes::Bytes::from(value),
        };
        self.add_variant(primary, vary, fresh, now)
    }

    /// Puts `fresh` first in `primary`'s page (replacing the variant of the same secondary
    /// key, the expired ones and the oldest beyond [`MAX_VARIANTS`]), or starts a page when
    /// none with this `Vary` is stored. Retried when another insert changed the page meanwhile.
    fn add_variant(
        &self,
        primary: &[u8],
        vary: http::HeaderValue,
        fresh: Variant,
        now: u32,
    ) -> bool {
        for _ in 0..PAGE_RETRIES {
            let current = self.peek(primary);
            let cas = current.as_ref().map(|hit| hit.cas);
            let mut variants = match current.map(|hit| object::decode(hit.item.value_bytes())) {
                Some(Some(Record::Page(page))) if page.vary == vary => page.variants,
                _ => Vec::new(),
            };
            variants.retain(|v| v.secondary != fresh.secondary && v.until > now);
            variants.insert(0, fresh.clone());
            variants.truncate(MAX_VARIANTS);
            let page = Page {
                vary: vary.clone(),
                variants,
            };
            match page.write(&self.store, primary, cas) {
                Written::Done => return true,
                Written::NoRoom => return false,
                Written::Changed => {}
            }
        }
        false
    }

    /// Stores an object record, with the ban sequence `seq` as its item's flags.
    fn put(&self, key: &[u8], value: &[u8], expiry: Expiry, seq: u32) -> SetOutcome {
        self.store.set(&SetRequest {
            key,
            value,
            flags: seq,
            expiry: Some(expiry),
            ..SetRequest::default()
        })
    }

    /// Writes `value` at `key` under ban number `seq` in place of the entry with CAS `cas` and
    /// store deadline `exptime` (compare-and-swap: not if it changed meanwhile); true if stored.
    pub(crate) fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        seq: u32,
        cas: u64,
        exptime: u32,
    ) -> bool {
        stored(self.store.set(&SetRequest {
            key,
            value,
            flags: seq,
            expiry: Some(deadline(exptime)),
            cas: Some(cas),
            ..SetRequest::default()
        }))
    }

    /// Marks `primary` hit-for-miss for `ttl`, unless an object is stored there.
    pub fn hit_for_miss(&self, primary: &[u8], ttl: Duration) {
        if primary.len() > PRIMARY_MAX || ttl.is_zero() {
            return;
        }
        let record = object::encode_hit_for_miss();
        self.store.set(&SetRequest {
            key: primary,
            value: &record,
            flags: UNCHECKED,
            expiry: Some(Expiry::after(ttl)),
            ..SetRequest::default()
        });
    }

    /// Makes every stored response for `primary` (all its variants) stale as of `at`, so grace
    /// serves them while one request refreshes. False when nothing is stored there.
    pub fn soften(&self, primary: &[u8], at: SystemTime) -> bool {
        for _ in 0..PAGE_RETRIES {
            let Some(hit) = self.peek(primary) else {
                return false;
            };
            let written = match object::decode(hit.item.value_bytes()) {
                Some(Record::Object(mut object)) => {
                    stale_since(&mut object.freshness, at);
                    let value = object::encode(&object);
                    self.replace(primary, &value, hit.item.flags(), hit.cas, hit.exptime)
                }
                Some(Record::Page(mut page)) => {
                    for variant in &mut page.variants {
                        if let Some(Record::Object(mut object)) =
                            object::decode(variant.object.clone())
                        {
                            stale_since(&mut object.freshness, at);
                            variant.object = bytes::Bytes::from(object::encode(&object));
                        }
                    }
                    page.write(&self.store, primary, Some(hit.cas)) == Written::Done
                }
                _ => return false,
            };
            if written {
                return true;
            }
        }
        false
    }

    /// Invalidates every stored response for `primary` (all its variants).
    pub fn invalidate(&self, primary: &[u8]) -> bool {
        self.store.delete(primary)
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.close_disk();
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

/// The request's secondary key under the page's `Vary` (`None`: `Vary: *`, never matches).
fn secondary_key(vary: &http::HeaderValue, request: &HeaderMap) -> Option<SecondaryKey> {
    let mut fields = HeaderMap::new();
    fields.insert(VARY, vary.clone());
    Vary::from_headers(&fields).secondary_key(request)
}

/// A store deadline in Unix seconds (0: never) as an expiry.
pub(crate) fn deadline(exptime: u32) -> Expiry {
    match exptime {
        0 => Expiry::Never,
        at => Expiry::At(at),
    }
}

/// The store's clock: Unix seconds.
fn now_secs() -> u32 {
    let secs = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    u32::try_from(secs).unwrap_or(u32::MAX)
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
pub(crate) mod tests;
