//! Reading entries with their CAS uniques and writing misses back safely.
//!
//! An invalidation leaves a tombstone (an empty value with
//! [`FLAG_TOMBSTONE`]) for `tombstone_ttl` seconds. A reader that missed
//! writes back with ADD where the key was absent and with CAS over the
//! tombstone it read otherwise: if an invalidation came between its read
//! of the cache and its write, the key is no longer absent (ADD fails) or
//! the tombstone's CAS changed (CAS fails), so a row read before a commit
//! can never be put back after that commit's invalidation. The write-back
//! of a whole fetch is one quiet multi-add (and one multi-CAS when there
//! were tombstones) per server.

use std::collections::HashSet;
use std::time::Instant;

use bytes::Bytes;
use futures_util::future::join;
use kura_client::{Fence, SetOptions, StoreStatus};

use crate::cache::{RecordCache, WriteBack};

/// Client flags of a record (an empty record: the id has no row).
pub(crate) const FLAG_RECORD: u32 = 0x4b52_0001;
/// Client flags of an index entry.
pub(crate) const FLAG_INDEX: u32 = 0x4b52_0002;
/// Client flags of a tombstone.
pub(crate) const FLAG_TOMBSTONE: u32 = 0x4b52_0003;
/// Client flags of a fill lock.
pub(crate) const FLAG_LOCK: u32 = 0x4b52_0004;

/// What the cache held under a key.
#[derive(Debug, Clone)]
pub(crate) enum Slot {
    /// An entry of the expected kind.
    Hit(Bytes, u64),
    /// Nothing (a server that does not create placeholders): fill with ADD.
    Empty,
    /// A tombstone, a reader's placeholder, or an entry that does not
    /// decode: fill with CAS.
    Tomb(u64),
    /// Another reader's fill lock: do not fill.
    Locked,
    /// The cache failed: do not fill.
    Unknown,
}

impl Slot {
    /// How to write this key back, if at all: ADD (None) or CAS.
    pub(crate) fn fill(&self) -> Option<Option<u64>> {
        match self {
            Slot::Empty => Some(None),
            Slot::Tomb(cas) => Some(Some(*cas)),
            _ => None,
        }
    }
}

/// A fill: key, value, ADD (None) or CAS.
pub(crate) type Fill = (String, Vec<u8>, Option<u64>);

impl RecordCache {
    /// Reads `keys` for a fetch in one multi-get (one round trip per
    /// server) within the cache timeout. Over the meta protocol a miss
    /// leaves a placeholder (meta `N`) whose CAS the fill then needs, so
    /// every fill is a CAS: refused if anything changed or removed the key
    /// since (an invalidation, an eviction, a `flush_all`, a restart). The
    /// fence of the connections the read went on keeps the fills off
    /// connections made after them (to a restarted server, whose CAS
    /// uniques start again).
    pub(crate) async fn read_slots(&self, keys: &[String], kind: u32) -> (Vec<Slot>, Fence) {
        let ttl = self.inner.cfg.tombstone_ttl;
        let mut fence = Fence::default();
        let got = tokio::time::timeout(
            self.inner.cfg.cache_timeout,
            self.inner.client.get_multi_vivify(keys, ttl),
        );
        let got = async {
            got.await.map(|(values, f)| {
                fence = f;
                values
            })
        };
        let slots = self.slots(keys, kind, got).await;
        (slots, fence)
    }

    /// Reads `keys` as they are, creating nothing (peeks).
    pub(crate) async fn peek_slots(&self, keys: &[String], kind: u32) -> Vec<Slot> {
        let got = tokio::time::timeout(
            self.inner.cfg.cache_timeout,
            self.inner.client.get_multi(keys),
        );
        self.slots(keys, kind, got).await
    }

    async fn slots(
        &self,
        keys: &[String],
        kind: u32,
        got: impl std::future::Future<
            Output = Result<
                Vec<kura_client::Result<Option<kura_client::Value>>>,
                tokio::time::error::Elapsed,
            >,
        >,
    ) -> Vec<Slot> {
        let s = &self.inner.stats;
        s.add(&s.cache_calls, 1);
        s.add(&s.cache_round_trips, self.servers_of(keys));
        let Ok(got) = got.await else {
            s.add(&s.cache_errors, 1);
            return vec![Slot::Unknown; keys.len()];
        };
        let mut failed = false;
        let out = got
            .into_iter()
            .map(|r| match r {
                Ok(None) => Slot::Empty,
                Ok(Some(v)) if v.flags == kind => Slot::Hit(v.data, v.cas),
                Ok(Some(v)) if v.flags == FLAG_LOCK => Slot::Locked,
                // A tombstone, a placeholder, or a value this code did not
                // write: replace it under its CAS.
                Ok(Some(v)) => Slot::Tomb(v.cas),
                Err(_) => {
                    failed = true;
                    Slot::Unknown
                }
            })
            .collect();
        if failed {
            s.add(&s.cache_errors, 1);
        }
        out
    }

    /// How many servers hold `keys`: the round trips of one multi-operation.
    pub(crate) fn servers_of<K: AsRef<[u8]>>(&self, keys: &[K]) -> u64 {
        let mut seen = HashSet::new();
        for k in keys {
            seen.insert(self.inner.client.server_for(k.as_ref()));
        }
        seen.len() as u64
    }

    /// Writes back entries read from the database, with `how` from
    /// [`Slot::fill`], behind `fence`. An ADD (a server without
    /// placeholders) is skipped when the read began more than half a
    /// tombstone's life ago: the tombstone that would refuse it may have
    /// expired. A CAS needs no such bound.
    pub(crate) async fn write_back(
        &self,
        started: Instant,
        fence: Fence,
        mut entries: Vec<Fill>,
        flags: u32,
        ttl: u32,
    ) {
        let s = &self.inner.stats;
        if entries.is_empty() {
            return;
        }
        if let Some(pause) = &self.inner.hooks.before_write_back {
            pause().await;
        }
        let half_life = std::time::Duration::from_secs(u64::from(self.inner.cfg.tombstone_ttl)) / 2;
        if started.elapsed() > half_life {
            let before = entries.len();
            entries.retain(|(_, _, how)| how.is_some());
            s.add(&s.fills_skipped, (before - entries.len()) as u64);
        }
        let opts = SetOptions::new(ttl, flags);
        let mut adds = Vec::new();
        let mut cases = Vec::new();
        for (k, v, how) in entries {
            match how {
                None => adds.push((k, v)),
                Some(cas) => cases.push((k, v, cas)),
            }
        }
        let t0 = Instant::now();
        let tally = match self.inner.cfg.write_back {
            WriteBack::Batched => self.write_batched(&adds, &cases, opts, &fence).await,
            WriteBack::PerKey => self.write_per_key(&adds, &cases, opts, &fence).await,
        };
        s.add(&s.write_back_micros, t0.elapsed().as_micros() as u64);
        s.add(&s.fills_stored, tally.stored);
        s.add(&s.fills_refused, tally.refused);
        s.add(&s.fills_fenced, tally.fenced);
        s.add(&s.cache_errors, tally.errors);
    }

    async fn write_batched(
        &self,
        adds: &[(String, Vec<u8>)],
        cases: &[(String, Vec<u8>, u64)],
        opts: SetOptions,
        fence: &Fence,
    ) -> Tally {
        let s = &self.inner.stats;
        let client = &self.inner.client;
        let add_keys: Vec<&str> = adds.iter().map(|(k, _)| k.as_str()).collect();
        let cas_keys: Vec<&str> = cases.iter().map(|(k, _, _)| k.as_str()).collect();
        for keys in [&add_keys, &cas_keys] {
            if !keys.is_empty() {
                s.add(&s.cache_calls, 1);
                s.add(&s.cache_round_trips, self.servers_of(keys));
            }
        }
        let timeout = self.inner.cfg.cache_timeout;
        let both = join(
            async {
                if adds.is_empty() {
                    return Some(Vec::new());
                }
                tokio::time::timeout(timeout, client.add_multi_fenced(adds, opts, fence))
                    .await
                    .ok()
            },
            async {
                if cases.is_empty() {
                    return Some(Vec::new());
                }
                tokio::time::timeout(timeout, client.cas_multi_fenced(cases, opts, fence))
                    .await
                    .ok()
            },
        );
        let (added, cased) = both.await;
        let mut tally = Tally::default();
        match added {
            Some(rs) => rs.iter().for_each(|r| tally.count(r.as_ref().map(|b| *b))),
            None => tally.errors += 1,
        }
        match cased {
            Some(rs) => rs
                .iter()
                .for_each(|r| tally.count(r.as_ref().map(|st| *st == StoreStatus::Stored))),
            None => tally.errors += 1,
        }
        tally
    }

    async fn write_per_key(
        &self,
        adds: &[(String, Vec<u8>)],
        cases: &[(String, Vec<u8>, u64)],
        opts: SetOptions,
        fence: &Fence,
    ) -> Tally {
        let s = &self.inner.stats;
        let client = &self.inner.client;
        let mut tally = Tally::default();
        for (k, v) in adds {
            s.add(&s.cache_calls, 1);
            s.add(&s.cache_round_trips, 1);
            let r = client.add_multi_fenced(&[(k, v)], opts, fence).await.pop();
            tally.count(r.unwrap_or(Ok(false)).as_ref().map(|b| *b));
        }
        for (k, v, cas) in cases {
            s.add(&s.cache_calls, 1);
            s.add(&s.cache_round_trips, 1);
            let r = client.cas_fenced(k, v, *cas, opts, fence).await;
            tally.count(r.as_ref().map(|st| *st == StoreStatus::Stored));
        }
        tally
    }

    /// Tombstones `keys` (one quiet multi-set per server). True when every
    /// key's tombstone was stored.
    pub(crate) async fn tombstone(&self, keys: &[String]) -> bool {
        if keys.is_empty() {
            return true;
        }
        let s = &self.inner.stats;
        s.add(&s.cache_calls, 1);
        s.add(&s.cache_round_trips, self.servers_of(keys));
        let items: Vec<(&str, &[u8])> = keys.iter().map(|k| (k.as_str(), &b""[..])).collect();
        let opts = SetOptions::new(self.inner.cfg.tombstone_ttl, FLAG_TOMBSTONE);
        let r = tokio::time::timeout(
            self.inner.cfg.cache_timeout,
            self.inner.client.set_multi(&items, opts),
        )
        .await;
        let ok = matches!(&r, Ok(rs) if rs.iter().all(|r| matches!(r, Ok(true))));
        if ok {
            s.add(&s.invalidated_keys, keys.len() as u64);
        } else {
            s.add(&s.invalidation_errors, 1);
        }
        ok
    }
}

/// What a write-back did, key by key.
#[derive(Default)]
struct Tally {
    stored: u64,
    refused: u64,
    fenced: u64,
    errors: u64,
}

impl Tally {
    fn count(&mut self, r: Result<bool, &kura_client::Error>) {
        match r {
            Ok(true) => self.stored += 1,
            Ok(false) => self.refused += 1,
            Err(kura_client::Error::Fenced(_)) => self.fenced += 1,
            Err(_) => self.errors += 1,
        }
    }
}
