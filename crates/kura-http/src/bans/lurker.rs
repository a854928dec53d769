//! The ban lurker: walks the cache a bounded step at a time and checks each stored object
//! against the bans newer than it, so bans leave the list without any request arriving.
//!
//! A walk (every shard, `Store::scan`) starts when there are bans, remembering the newest
//! ban's number. Each step visits up to `batch` index positions of one shard: an object a ban
//! matches is deleted (only if it is still the same item: compare-and-delete), one a soft ban
//! matches is rewritten stale (compare-and-swap) with the current ban number, so it is not
//! checked again. A page's variants are checked one by one and the page rewritten without the
//! banned ones (deleted when none is left). When the walk ends, every object older than the bans it started with has
//! been checked, and those bans are complete.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kura_store::{DeleteRequest, Entry, ScanCursor, Store};
use tokio::sync::watch;

use super::{stale_since, Verdict};
use crate::cache::object::{decode, encode, Object, Record};
use crate::cache::page::{Page, Written};
use crate::cache::Cache;

/// How hard the lurker works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LurkerSettings {
    /// Index positions visited per step.
    pub batch: usize,
    /// Time between steps.
    pub interval: Duration,
}

impl Default for LurkerSettings {
    fn default() -> Self {
        LurkerSettings {
            batch: 1_000,
            interval: Duration::from_millis(100),
        }
    }
}

/// The lurker's place in its walk.
#[derive(Debug, Default)]
pub struct Lurker {
    /// The newest ban when the walk began; `None` between walks.
    target: Option<u32>,
    shard: usize,
    cursor: ScanCursor,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Step {
    /// Objects checked.
    pub checked: usize,
    /// Bans completed (the walk ended).
    pub completed: usize,
    /// Nothing to do: no bans.
    pub idle: bool,
}

impl Lurker {
    /// One step of at most `batch` index positions.
    pub fn step(&mut self, cache: &Cache, batch: usize) -> Step {
        let bans = cache.bans();
        let target = match self.target {
            Some(target) => target,
            None if bans.is_empty() => {
                return Step {
                    idle: true,
                    ..Step::default()
                }
            }
            None => {
                let target = bans.walk_target();
                *self = Lurker {
                    target: Some(target),
                    ..Lurker::default()
                };
                target
            }
        };
        let store = cache.store();
        let scan = store.scan(self.shard, &mut self.cursor, batch);
        let mut step = Step::default();
        for entry in &scan.entries {
            step.checked += check(cache, store, entry);
        }
        bans.counters
            .lurker_checked
            .fetch_add(step.checked as u64, Ordering::Relaxed);
        if scan.done {
            self.shard += 1;
            if self.shard == store.shard_count() {
                step.completed = bans.complete(target);
                bans.counters
                    .completed_lurker
                    .fetch_add(step.completed as u64, Ordering::Relaxed);
                *self = Lurker::default();
            }
        }
        step
    }
}

/// Checks one entry's objects (an object, or a page's variants); returns how many it held.
fn check(cache: &Cache, store: &Store, entry: &Entry) -> usize {
    match decode(entry.item.value_bytes()) {
        Some(Record::Object(object)) => {
            check_object(cache, store, entry, object);
            1
        }
        Some(Record::Page(page)) => check_page(cache, store, entry, page),
        _ => 0,
    }
}

fn check_object(cache: &Cache, store: &Store, entry: &Entry, mut object: Object) {
    let bans = cache.bans();
    let key = entry.item.key();
    let head = bans.head();
    let status = object.status.as_u16();
    match bans.check_stored(entry.item.flags(), key, status, &object.headers, false) {
        Verdict::Keep => {}
        Verdict::Drop => {
            let same = DeleteRequest {
                cas: Some(entry.cas),
                ..DeleteRequest::default()
            };
            if store.delete_with(key, &same) == kura_store::DeleteOutcome::Deleted {
                bans.counters.banned_lurker.fetch_add(1, Ordering::Relaxed);
            }
        }
        Verdict::StaleSince(at) => {
            stale_since(&mut object.freshness, at);
            let value = encode(&object);
            if cache.replace(key, &value, head, entry.cas, entry.exptime) {
                bans.counters.softened.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Checks each variant of a page; rewrites the page without the banned ones and with the
/// softened ones stale (compare-and-swap). Returns the number of variants.
fn check_page(cache: &Cache, store: &Store, entry: &Entry, mut page: Page) -> usize {
    let bans = cache.bans();
    let key = entry.item.key();
    let head = bans.head();
    let checked = page.variants.len();
    let (mut dropped, mut softened) = (0, 0);
    let mut kept = Vec::with_capacity(checked);
    for mut variant in page.variants.drain(..) {
        let Some(Record::Object(mut object)) = decode(variant.object.clone()) else {
            dropped += 1;
            continue;
        };
        let status = object.status.as_u16();
        match bans.check_stored(variant.seq, key, status, &object.headers, false) {
            Verdict::Keep => kept.push(variant),
            Verdict::Drop => dropped += 1,
            Verdict::StaleSince(at) => {
                stale_since(&mut object.freshness, at);
                variant.object = Bytes::from(encode(&object));
                variant.seq = head;
                softened += 1;
                kept.push(variant);
            }
        }
    }
    if dropped + softened > 0 {
        page.variants = kept;
        if page.write(store, key, Some(entry.cas)) == Written::Done {
            let counters = &bans.counters;
            counters.banned_lurker.fetch_add(dropped, Ordering::Relaxed);
            counters.softened.fetch_add(softened, Ordering::Relaxed);
        }
    }
    checked
}

/// Runs the lurker until `stopped` changes: a step every `settings.interval` while there are
/// bans.
pub async fn run<P: AsRef<Cache>>(
    owner: Arc<P>,
    settings: LurkerSettings,
    mut stopped: watch::Receiver<bool>,
) {
    let mut lurker = Lurker::default();
    let mut tick = tokio::time::interval(settings.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        lurker.step(owner.as_ref().as_ref(), settings.batch);
    }
}

#[cfg(test)]
mod tests;
