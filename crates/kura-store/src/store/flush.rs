//! `flush_all`, now or at a time: an epoch and deadline in one atomic,
//! which each shard applies the next time it is locked after the deadline
//! (with a change sink attached, every shard at once, so that the flush
//! falls at one point of the sink's report). Applying it takes constant
//! time (`shard/flushed.rs`).

use std::sync::atomic::Ordering;

use parking_lot::RwLockWriteGuard;

use crate::changes::{Change, ChangeSink, Report};
use crate::expiry::Expiry;
use crate::shard::Shard;

use super::Store;

impl Store {
    /// The Unix time of a delayed `flush_all` not yet carried out.
    pub fn pending_flush(&self) -> Option<u32> {
        let state = self.flush.load(Ordering::Acquire);
        let (epoch, deadline) = ((state >> 32) as u32, state as u32);
        let now = self.clock.now();
        let pending = self.shards.iter().any(|c| c.0.read().flush_epoch != epoch);
        (pending && deadline > now).then_some(deadline)
    }

    /// Whether a flush is due that `shard` has not applied yet.
    pub(super) fn flush_due(&self, shard: &Shard, now: u32) -> bool {
        let state = self.flush.load(Ordering::Acquire);
        (state >> 32) as u32 != shard.flush_epoch && now >= state as u32
    }

    pub(super) fn sync_flush(&self, shard: &mut Shard, now: u32) {
        if self.flush_due(shard, now) {
            shard.flush();
            shard.flush_epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32;
        }
    }

    /// Drops every entry now, or at `at` (a delayed `flush_all`): entries
    /// stored after that point survive. A new flush replaces a pending one.
    pub fn flush(&self, at: Option<Expiry>) {
        self.flush_in(at, &Report::default());
    }

    pub(super) fn flush_in(&self, at: Option<Expiry>, r: &Report) {
        let _serial = self.flush_lock.lock();
        let now = self.clock.now();
        let deadline = match at.map(|e| e.deadline(now)) {
            None | Some(0) => 0,
            Some(d) if d <= now => 0,
            Some(d) => d,
        };
        let epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32 + 1;
        let state = (u64::from(epoch) << 32) | u64::from(deadline);
        let Some(sink) = self.sink() else {
            // Finish a flush that is due before a new one replaces it.
            self.sync_all(now);
            self.flush.store(state, Ordering::Release);
            if deadline == 0 {
                self.sync_all(now);
            }
            return;
        };
        // With a sink, every shard is locked while the flush is reported
        // and (when immediate) carried out, so it falls between the same
        // changes in the report as in the store.
        let mut guards = self.lock_all();
        self.flush_due_locked(&mut guards, sink, r, now);
        sink.record(Change::Flush { at: deadline }, r);
        self.flush.store(state, Ordering::Release);
        if deadline == 0 {
            for shard in &mut guards {
                self.sync_flush(shard, now);
            }
            self.flushed_epoch.store(epoch, Ordering::Release);
        }
    }

    pub(super) fn lock_all(&self) -> Vec<RwLockWriteGuard<'_, Shard>> {
        self.shards.iter().map(|c| c.0.write()).collect()
    }

    /// With a sink attached, a flush that is due is carried out in every
    /// shard at once, with every lock held, and reported as one change:
    /// changes reported before it were all dropped by it, changes after it
    /// all survive. (Without a sink each shard applies it lazily.)
    pub(super) fn apply_due_flush(&self, now: u32, r: &Report) {
        let Some(sink) = self.sink() else {
            return;
        };
        let state = self.flush.load(Ordering::Acquire);
        if (state >> 32) as u32 == self.flushed_epoch.load(Ordering::Acquire) || now < state as u32
        {
            return;
        }
        let _serial = self.flush_lock.lock();
        let mut guards = self.lock_all();
        self.flush_due_locked(&mut guards, sink, r, now);
    }

    fn flush_due_locked(
        &self,
        guards: &mut [RwLockWriteGuard<'_, Shard>],
        sink: &dyn ChangeSink,
        r: &Report,
        now: u32,
    ) {
        if guards.iter().any(|s| self.flush_due(s, now)) {
            sink.record(Change::Flush { at: 0 }, r);
            for shard in guards.iter_mut() {
                self.sync_flush(shard, now);
            }
            let epoch = (self.flush.load(Ordering::Acquire) >> 32) as u32;
            self.flushed_epoch.store(epoch, Ordering::Release);
        }
    }

    fn sync_all(&self, now: u32) {
        for cell in self.shards.iter() {
            self.sync_flush(&mut cell.0.write(), now);
        }
    }
}
