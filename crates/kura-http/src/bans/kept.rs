//! The bans of a cache with a disk tier (`--disk-cache`), kept for the objects on disk.
//!
//! An object evicted to disk leaves kura-store's census (`census.rs` counts objects in memory),
//! so a ban can be completed while objects older than it wait on disk; read back later (or
//! after a restart) they must still meet it. So a cache with a disk tier keeps every ban,
//! completed or not, in a second list: an object whose ban sequence is older than the newest
//! completion is checked against it rather than the live list. It holds at most [`KEPT_MAX`]
//! bans; past that the oldest goes and the floor rises to its sequence: an object older than
//! the floor could not be checked against it, and is a miss (fetched again). The list and
//! the floor are journalled (`journal.rs`).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::journal::{ban_line, Journal, Loaded};
use super::Ban;

/// Bans kept for objects on disk; older ones raise the floor.
pub const KEPT_MAX: usize = 65_536;

/// Bans, oldest first, each expression's text counted (a new ban supersedes the older ones
/// with its text, as in the live list, and most have none).
#[derive(Debug, Default)]
pub(super) struct Kept {
    bans: VecDeque<Arc<Ban>>,
    texts: HashMap<String, usize>,
}

impl Kept {
    /// Adds `ban` after the older ones it supersedes went.
    pub(super) fn push(&mut self, ban: Arc<Ban>) {
        let text = ban.expr.text();
        if self.texts.get(text).is_some_and(|&n| n > 0) {
            let texts = &mut self.texts;
            self.bans.retain(|old| {
                let keep = old.expr.text() != text || (ban.soft && !old.soft);
                if !keep {
                    texts.entry(text.to_owned()).and_modify(|n| *n -= 1);
                }
                keep
            });
        }
        *self.texts.entry(text.to_owned()).or_default() += 1;
        self.bans.push_back(ban);
    }

    /// Drops the oldest ban: its sequence.
    fn pop(&mut self) -> Option<u32> {
        let ban = self.bans.pop_front()?;
        let text = ban.expr.text();
        if let Some(n) = self.texts.get_mut(text) {
            *n -= 1;
            if *n == 0 {
                self.texts.remove(text);
            }
        }
        Some(ban.seq)
    }

    /// Drops the bans older than `floor`.
    pub(super) fn raise_floor(&mut self, floor: u32) {
        while self.bans.front().is_some_and(|b| b.seq < floor) {
            self.pop();
        }
    }

    pub(super) fn into_bans(self) -> Vec<Ban> {
        self.bans
            .into_iter()
            .map(|b| Arc::try_unwrap(b).unwrap_or_else(|b| Ban::clone(&b)))
            .collect()
    }
}

/// The kept bans, the floor and the journal.
#[derive(Debug)]
pub struct DiskBans {
    kept: RwLock<Kept>,
    floor: AtomicU32,
    journal: Mutex<Journal>,
}

impl DiskBans {
    /// Kept bans from `loaded`, and its journal at `path` written again with them.
    ///
    /// # Errors
    /// The journal cannot be written.
    pub fn open(path: &Path, loaded: Loaded) -> std::io::Result<DiskBans> {
        let journal = Journal::create(path, loaded.floor, loaded.bans.iter())?;
        let mut kept = Kept::default();
        for ban in loaded.bans {
            kept.push(Arc::new(ban));
        }
        Ok(DiskBans {
            kept: RwLock::new(kept),
            floor: AtomicU32::new(loaded.floor),
            journal: Mutex::new(journal),
        })
    }

    /// Objects with an older sequence are not served.
    pub fn floor(&self) -> u32 {
        self.floor.load(Ordering::Acquire)
    }

    /// Bans kept.
    pub fn len(&self) -> usize {
        self.kept.read().bans.len()
    }

    /// Whether no ban is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Notes `ban`, just added (under the ban list's write lock): journalled, then kept; the
    /// oldest beyond [`KEPT_MAX`] go.
    pub(super) fn added(&self, ban: &Arc<Ban>) {
        let mut kept = self.kept.write();
        let mut journal = self.journal.lock();
        journal.append(&ban_line(ban));
        kept.push(Arc::clone(ban));
        while kept.bans.len() > KEPT_MAX {
            let Some(seq) = kept.pop() else {
                break;
            };
            self.floor.store(seq, Ordering::Release);
            journal.append(&format!("F {seq}\n"));
        }
        if journal.lines > 2 * KEPT_MAX {
            journal.compact(self.floor(), kept.bans.iter().map(|b| &**b));
        }
    }

    /// Runs `then` on the kept bans, oldest first.
    pub(super) fn with_kept<T>(&self, then: impl FnOnce(&VecDeque<Arc<Ban>>) -> T) -> T {
        then(&self.kept.read().bans)
    }

    /// Marks the journal for a clean stop (the objects file is synced).
    pub fn close(&self) {
        self.journal.lock().close();
    }
}
