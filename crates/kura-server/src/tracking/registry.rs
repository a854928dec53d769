//! The invalidation registry: which subscribed connections read which
//! keys, fed by the store's change stream (`Store::observe`).
//!
//! A key maps to the subscribers that read it since it last changed. When
//! the store reports a change of the key (a put, touch, delete or
//! eviction), the entry is taken out and each subscriber gets `IV <key>`
//! queued; a flush queues `IV *` for every subscriber and empties the
//! registry. The queue is bounded ([`QUEUE_MAX`] bytes): one that is full
//! is marked overflowed and hears nothing more until its connection
//! empties it, forgets every key it tracks and sends `IV *` instead
//! (`session.rs`). So a subscriber that does not read costs at most its
//! tracked keys and one full queue.
//!
//! `record` runs under a store shard lock: it takes one registry shard's
//! mutex and the queues' mutexes, and never calls back into the store.
//! With no subscription at all it returns after one atomic load.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use kura_store::{Change, ChangeSink, Report};
use tokio::sync::Notify;

/// Registry shards (each a mutex and a map).
const SHARDS: usize = 64;
/// Bytes of `IV` lines a subscriber may have waiting.
pub const QUEUE_MAX: usize = 256 * 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a subscriber has waiting.
#[derive(Default)]
pub(crate) struct Queue {
    pub lines: Vec<u8>,
    /// More was dropped than fits: the connection must flush everything.
    pub overflowed: bool,
}

/// One subscribed connection's mailbox.
#[derive(Default)]
pub struct Subscriber {
    pub(crate) queue: Mutex<Queue>,
    /// Woken when the queue goes from empty to not.
    pub(crate) notify: Notify,
}

impl Subscriber {
    /// Queues `IV <key>` (base64 with ` b` for a key the text protocol
    /// cannot carry).
    fn push_key(&self, key: &[u8]) {
        let mut q = lock(&self.queue);
        if q.overflowed {
            return;
        }
        let was_empty = q.lines.is_empty();
        if q.lines.len() + key.len() * 2 + 8 > QUEUE_MAX {
            q.overflowed = true;
            q.lines = Vec::new();
        } else {
            put_line(&mut q.lines, key);
        }
        drop(q);
        if was_empty {
            self.notify.notify_one();
        }
    }

    /// Queues `IV *`: everything this connection read may have changed.
    pub(crate) fn push_all(&self) {
        let mut q = lock(&self.queue);
        // An overflow already ends in `IV *`; one `IV *` waiting is enough.
        if !q.overflowed && !q.lines.ends_with(b"IV *\r\n") {
            q.lines.extend_from_slice(b"IV *\r\n");
        }
        drop(q);
        self.notify.notify_one();
    }
}

/// Appends the push line for `key`.
pub fn put_line(out: &mut Vec<u8>, key: &[u8]) {
    use base64::Engine;
    out.extend_from_slice(b"IV ");
    if key.iter().all(|&b| b > b' ' && b != 0x7f) {
        out.extend_from_slice(key);
    } else {
        let mut enc = String::new();
        base64::engine::general_purpose::STANDARD.encode_string(key, &mut enc);
        out.extend_from_slice(enc.as_bytes());
        out.extend_from_slice(b" b");
    }
    out.extend_from_slice(b"\r\n");
}

type Readers = Vec<Arc<Subscriber>>;
/// One shard of the registry: key to the subscribers that read it.
type Shard = HashMap<Box<[u8]>, Readers>;

/// Every subscription of one server.
pub struct Registry {
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
    /// Every live subscriber, for flushes.
    all: Mutex<Vec<Weak<Subscriber>>>,
    /// Live subscriptions; zero makes `record` a single load.
    live: AtomicUsize,
    /// Keys tracked, over every subscriber (a key read by two counts twice).
    keys: AtomicUsize,
    /// Invalidation lines queued, and overflows (for `stats`).
    pub(crate) sent: AtomicU64,
    pub(crate) overflows: AtomicU64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (subscribers, keys) = self.counts();
        f.debug_struct("Registry")
            .field("subscribers", &subscribers)
            .field("keys", &keys)
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            hasher: RandomState::new(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            all: Mutex::default(),
            live: AtomicUsize::new(0),
            keys: AtomicUsize::new(0),
            sent: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
        }
    }
}

impl Registry {
    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        let i = self.hasher.hash_one(key) as usize % SHARDS;
        lock(&self.shards[i])
    }

    /// A new subscription.
    pub fn subscribe(&self) -> Arc<Subscriber> {
        let sub = Arc::new(Subscriber::default());
        let mut all = lock(&self.all);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&sub));
        self.live.fetch_add(1, Ordering::AcqRel);
        sub
    }

    /// Ends a subscription (its keys must be forgotten first).
    pub fn unsubscribe(&self, sub: &Arc<Subscriber>) {
        lock(&self.all).retain(|w| w.strong_count() > 0 && !Weak::ptr_eq(w, &Arc::downgrade(sub)));
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// `sub` read `key`: it hears of the key's next change. True when it
    /// was not tracking it already.
    pub fn track(&self, key: &[u8], sub: &Arc<Subscriber>) -> bool {
        let mut shard = self.shard(key);
        let readers = match shard.get_mut(key) {
            Some(r) => r,
            None => shard.entry(key.into()).or_default(),
        };
        if readers.iter().any(|r| Arc::ptr_eq(r, sub)) {
            return false;
        }
        readers.push(sub.clone());
        self.keys.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// `sub` no longer tracks `key`.
    pub fn forget(&self, key: &[u8], sub: &Arc<Subscriber>) {
        let mut shard = self.shard(key);
        if let Some(readers) = shard.get_mut(key) {
            let before = readers.len();
            readers.retain(|r| !Arc::ptr_eq(r, sub));
            self.keys
                .fetch_sub(before - readers.len(), Ordering::Relaxed);
            if readers.is_empty() {
                shard.remove(key);
            }
        }
    }

    /// Live subscriptions and keys tracked.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.live.load(Ordering::Relaxed),
            self.keys.load(Ordering::Relaxed),
        )
    }

    fn changed(&self, key: &[u8]) {
        let Some(readers) = self.shard(key).remove(key) else {
            return;
        };
        self.keys.fetch_sub(readers.len(), Ordering::Relaxed);
        self.sent.fetch_add(readers.len() as u64, Ordering::Relaxed);
        for r in readers {
            r.push_key(key);
        }
    }

    fn flushed(&self) {
        let mut dropped = 0;
        for shard in self.shards.iter() {
            let mut s = lock(shard);
            dropped += s.values().map(Vec::len).sum::<usize>();
            s.clear();
        }
        self.keys.fetch_sub(dropped, Ordering::Relaxed);
        let all: Vec<Arc<Subscriber>> = lock(&self.all).iter().filter_map(Weak::upgrade).collect();
        self.sent.fetch_add(all.len() as u64, Ordering::Relaxed);
        for s in all {
            s.push_all();
        }
    }
}

impl ChangeSink for Registry {
    fn record(&self, change: Change<'_>, _: &Report) {
        if self.live.load(Ordering::Acquire) == 0 {
            return;
        }
        match change {
            Change::Put(e) => self.changed(e.item.key()),
            Change::Touch { key, .. } | Change::Remove { key } | Change::Evict { key } => {
                self.changed(key)
            }
            Change::Flush { .. } => self.flushed(),
        }
    }
}
