//! Which bans no stored object is older than: the count of stored objects per ban sequence,
//! kept exact by kura-store's flags census (an object's item flags are its sequence), so a
//! ban can be completed as soon as the last object older than it is checked, replaced or
//! gone, without waiting for the lurker's walk (Varnish completes bans the same way, by the
//! objects still referring to them).
//!
//! An object being fetched is not in the store yet: its fetch [holds](Census::hold) the
//! sequence it began at (the bans after it are checked when the object is stored) from the
//! moment it reads it until the object is linked, so no ban newer than that can be completed
//! in between: it would not be checked against the object, nor the object against it. (As
//! Varnish's busy object refers to the newest ban from the start of its fetch.)

use std::collections::BTreeMap;
use std::sync::Arc;

use kura_store::FlagsCensus;
use parking_lot::Mutex;

/// Item flags of records no ban applies to (hit-for-miss markers); not counted.
pub const UNCHECKED: u32 = u32::MAX;

/// Stored objects and holds, per ban sequence.
#[derive(Debug, Default)]
pub struct Census {
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    stored: BTreeMap<u32, u64>,
    held: BTreeMap<u32, u64>,
}

fn add(counts: &mut BTreeMap<u32, u64>, seq: u32) {
    *counts.entry(seq).or_default() += 1;
}

fn remove(counts: &mut BTreeMap<u32, u64>, seq: u32) {
    if let Some(n) = counts.get_mut(&seq) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&seq);
        }
    }
}

fn oldest(counts: &BTreeMap<u32, u64>) -> Option<u32> {
    counts.keys().next().copied()
}

impl Census {
    /// Holds the sequence `head()` returns now, until the returned guard drops.
    pub fn hold(self: &Arc<Self>, head: impl FnOnce() -> u32) -> Hold {
        let mut counts = self.counts.lock();
        let seq = head();
        add(&mut counts.held, seq);
        Hold {
            census: Arc::clone(self),
            seq,
        }
    }

    /// The oldest sequence a stored or held object has (`None`: none at all), with the census
    /// locked while `then` decides on it: no object older than that can arrive meanwhile.
    pub fn with_oldest<T>(&self, then: impl FnOnce(Option<u32>) -> T) -> T {
        let counts = self.counts.lock();
        let oldest = match (oldest(&counts.stored), oldest(&counts.held)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        then(oldest)
    }

    /// The oldest sequence held by a fetch under way (`None`: none), with the census locked
    /// while `then` decides on it.
    pub fn with_oldest_hold<T>(&self, then: impl FnOnce(Option<u32>) -> T) -> T {
        let counts = self.counts.lock();
        then(oldest(&counts.held))
    }

    /// Objects stored per sequence (for tests and statistics).
    pub fn stored(&self) -> BTreeMap<u32, u64> {
        self.counts.lock().stored.clone()
    }
}

impl FlagsCensus for Census {
    fn arrived(&self, flags: u32) {
        if flags != UNCHECKED {
            add(&mut self.counts.lock().stored, flags);
        }
    }

    fn left(&self, flags: u32) {
        if flags != UNCHECKED {
            remove(&mut self.counts.lock().stored, flags);
        }
    }
}

/// A fetch's hold on the sequence it began at (see [`Census::hold`]).
#[derive(Debug)]
pub struct Hold {
    census: Arc<Census>,
    seq: u32,
}

impl Hold {
    /// The sequence held: the newest ban when the fetch began.
    pub fn seq(&self) -> u32 {
        self.seq
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        remove(&mut self.census.counts.lock().held, self.seq);
    }
}

#[cfg(test)]
mod tests;
