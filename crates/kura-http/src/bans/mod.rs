//! Bans, soft purges and tags: invalidation by expression rather than by URL.
//!
//! A ban ([`expr::Expr`]) is added to an ordered list under the next sequence number. Every
//! stored object carries (as its kura-store item's flags) the newest sequence number at the
//! moment it was stored, so the bans that may apply to it are exactly the listed ones with a
//! higher number. A lookup checks those (`Cache::lookup`): a matching ban drops the object, a
//! matching soft ban makes it stale as of the ban (grace then serves it while one request
//! refreshes it). The lurker (`lurker.rs`) walks the whole cache in bounded steps, doing the
//! same to objects nobody requests; once a walk that began after a ban was added has ended,
//! every object older than the ban has been checked, and the ban leaves the list. A lookup that
//! checks an object stores it again under the newest number, and once no stored object is
//! older than a ban (`census.rs` counts them), the ban leaves the list at that lookup. A fetch
//! that began before a ban and is stored after it is checked against it before it is stored.

pub mod census;
pub mod expr;
pub mod journal;
pub mod kept;
pub mod lurker;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use http::{HeaderMap, HeaderName};
use parking_lot::RwLock;

pub use census::{Census, Hold, UNCHECKED};
pub use expr::{Expr, ExprError, Subject, Target};

/// One ban in the list.
#[derive(Debug, Clone)]
pub struct Ban {
    /// Its sequence number (1, 2, ...).
    pub seq: u32,
    /// What it matches.
    pub expr: Expr,
    /// Marks stale instead of dropping.
    pub soft: bool,
    /// When it was added.
    pub added: SystemTime,
}

/// What a check decided for one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No ban applies.
    Keep,
    /// A ban matches: the object goes.
    Drop,
    /// Only soft bans match: the object is stale from this time on.
    StaleSince(SystemTime),
}

/// The ban list and the invalidation counters.
#[derive(Debug)]
pub struct Bans {
    list: RwLock<VecDeque<Arc<Ban>>>,
    /// The newest sequence number given out (0: none yet).
    head: AtomicU32,
    /// The list's length, stored under its write lock.
    listed: AtomicUsize,
    tag_fields: Vec<HeaderName>,
    /// Stored objects per sequence, told by the store.
    census: Arc<Census>,
    /// The newest sequence up to which bans were completed: an object older than it can only
    /// have come back from the disk tier, and is checked against the bans kept for the disk.
    completed_upto: AtomicU32,
    /// With a disk tier: every ban, completed or not, for objects on disk (`kept.rs`).
    disk: Option<kept::DiskBans>,
    /// Counters, shown on /stats and /metrics.
    pub counters: Counters,
}

/// Invalidation counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Bans added (tags and soft purges included).
    pub added: AtomicU64,
    /// Bans removed by the lurker once every older object was checked.
    pub completed_lurker: AtomicU64,
    /// Bans removed at a lookup, once no stored object was older than them.
    pub completed_lookup: AtomicU64,
    /// Bans removed when a newer ban with the same expression covered them.
    pub completed_superseded: AtomicU64,
    /// Objects dropped by a ban at lookup.
    pub banned_lookup: AtomicU64,
    /// Objects dropped by a ban by the lurker.
    pub banned_lurker: AtomicU64,
    /// Soft-ban matches: objects served stale at lookup or rewritten stale by the lurker.
    pub softened: AtomicU64,
    /// Ban conditions evaluated at lookup (the request threads' cost of bans).
    pub lookup_tests: AtomicU64,
    /// Objects the lurker has checked.
    pub lurker_checked: AtomicU64,
    /// PURGE requests that removed something.
    pub purges: AtomicU64,
    /// Soft PURGE requests that marked something stale.
    pub soft_purges: AtomicU64,
    /// BAN, PURGEKEYS and PURGE requests that added bans (the conventions of
    /// `server/invalidation.rs`).
    pub ban_requests: AtomicU64,
    /// PURGE, BAN and PURGEKEYS requests refused: not allowed (403), not enabled (405) or
    /// malformed (400).
    pub purges_refused: AtomicU64,
}

impl Default for Bans {
    fn default() -> Self {
        Bans::new(vec![
            HeaderName::from_static("surrogate-key"),
            HeaderName::from_static("xkey"),
        ])
    }
}

impl Bans {
    /// An empty list; `tag_fields` are the response fields whose words are an object's tags.
    pub fn new(tag_fields: Vec<HeaderName>) -> Bans {
        Bans {
            list: RwLock::new(VecDeque::new()),
            head: AtomicU32::new(0),
            listed: AtomicUsize::new(0),
            tag_fields,
            census: Arc::default(),
            completed_upto: AtomicU32::new(0),
            disk: None,
            counters: Counters::default(),
        }
    }

    /// An empty list for a cache with a disk tier, the bans kept for its objects read back
    /// from `loaded` and journalled at `path` from now on (`kept.rs`, `journal.rs`). No ban
    /// is listed: the objects on disk are checked against the kept ones.
    ///
    /// # Errors
    /// The journal cannot be written.
    pub fn with_journal(
        tag_fields: Vec<HeaderName>,
        path: &std::path::Path,
        loaded: journal::Loaded,
    ) -> std::io::Result<Bans> {
        let head = loaded.head();
        let mut bans = Bans::new(tag_fields);
        bans.head = AtomicU32::new(head);
        bans.completed_upto = AtomicU32::new(head);
        bans.disk = Some(kept::DiskBans::open(path, loaded)?);
        Ok(bans)
    }

    /// The bans kept for the disk tier, if the cache has one.
    pub fn disk(&self) -> Option<&kept::DiskBans> {
        self.disk.as_ref()
    }

    /// The newest sequence number: what an object stored now records.
    pub fn head(&self) -> u32 {
        self.head.load(Ordering::Acquire)
    }

    /// The census the store tells of every object stored and gone.
    pub fn census(&self) -> Arc<Census> {
        Arc::clone(&self.census)
    }

    /// Holds the newest sequence for a fetch beginning now, until its object is stored (see
    /// [`Census::hold`]): the bans added meanwhile are checked when it is stored, and none of
    /// them is completed before.
    pub fn hold(&self) -> Hold {
        self.census.hold(|| self.head())
    }

    /// Removes the bans no stored object is older than (a lookup has just checked, rewritten
    /// or dropped one); returns how many.
    pub fn complete_unreferenced(&self) -> usize {
        if self.is_empty() {
            return 0;
        }
        let done = self.census.with_oldest(|oldest| {
            let upto = oldest.unwrap_or(u32::MAX);
            // The list is locked for writing only when there is something to remove.
            let due = self.list.read().front().is_some_and(|ban| ban.seq <= upto);
            if due {
                self.complete(upto)
            } else {
                0
            }
        });
        self.counters
            .completed_lookup
            .fetch_add(done as u64, Ordering::Relaxed);
        done
    }

    /// The newest ban a lurker walk starting now can complete: the newest ban, or older when
    /// a fetch under way holds an older sequence (its object may be linked behind the walk).
    pub(crate) fn walk_target(&self) -> u32 {
        self.census.with_oldest_hold(|held| {
            let head = self.head();
            held.map_or(head, |held| held.min(head))
        })
    }

    /// The fields that carry tags.
    pub fn tag_fields(&self) -> &[HeaderName] {
        &self.tag_fields
    }

    /// Adds a ban; returns its sequence number. Older bans with the same expression that it
    /// covers (it is hard, or both are soft) are complete at once: every object they would
    /// check is older than the new ban too (Varnish's duplicate bans).
    pub fn add(&self, expr: Expr, soft: bool) -> u32 {
        let mut list = self.list.write();
        let before = list.len();
        list.retain(|old| old.expr.text() != expr.text() || (soft && !old.soft));
        let superseded = (before - list.len()) as u64;
        self.counters
            .completed_superseded
            .fetch_add(superseded, Ordering::Relaxed);
        let seq = self.head.load(Ordering::Relaxed).wrapping_add(1).max(1);
        let ban = Arc::new(Ban {
            seq,
            expr,
            soft,
            added: SystemTime::now(),
        });
        if let Some(disk) = &self.disk {
            // Journalled before any lookup can see it in force.
            disk.added(&ban);
        }
        list.push_back(ban);
        self.head.store(seq, Ordering::Release);
        self.listed.store(list.len(), Ordering::Release);
        self.counters.added.fetch_add(1, Ordering::Relaxed);
        seq
    }

    /// Bans in the list (read without locking it: every hit asks while bans are listed).
    pub fn len(&self) -> usize {
        self.listed.load(Ordering::Acquire)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The listed bans, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Ban>> {
        self.list.read().iter().cloned().collect()
    }

    /// Removes the bans up to sequence `upto` (their checks are complete); returns how many.
    pub(crate) fn complete(&self, upto: u32) -> usize {
        let mut list = self.list.write();
        let before = list.len();
        if list.front().is_some_and(|ban| ban.seq <= upto) {
            self.completed_upto.fetch_max(upto, Ordering::AcqRel);
        }
        list.retain(|ban| ban.seq > upto);
        self.listed.store(list.len(), Ordering::Release);
        before - list.len()
    }

    /// The bans newer than `seq` that match the object `subject`, in one verdict. `lookup`:
    /// counted as a request thread's work.
    pub fn check(&self, seq: u32, subject: &Subject<'_>, lookup: bool) -> Verdict {
        if seq >= self.head() {
            return Verdict::Keep;
        }
        let list = self.list.read();
        // Read under the list's lock: a completion changes both under its write lock.
        let completed = self.completed_upto.load(Ordering::Acquire);
        let (verdict, tests) = match &self.disk {
            Some(disk) if seq < completed => {
                drop(list);
                if seq < disk.floor() {
                    // Older than a ban no longer kept: it cannot be checked.
                    (Verdict::Drop, 0)
                } else {
                    disk.with_kept(|kept| verdict(kept, seq, subject))
                }
            }
            _ => verdict(&list, seq, subject),
        };
        if lookup {
            self.counters
                .lookup_tests
                .fetch_add(tests, Ordering::Relaxed);
        }
        verdict
    }

    /// [`Bans::check`] for an object stored at `key` (a primary or variant key of the cache)
    /// with `status` and `headers`.
    pub fn check_stored(
        &self,
        seq: u32,
        key: &[u8],
        status: u16,
        headers: &HeaderMap,
        lookup: bool,
    ) -> Verdict {
        if seq >= self.head() {
            return Verdict::Keep;
        }
        let Some((host, url)) = split_key(key) else {
            return Verdict::Keep;
        };
        let subject = Subject {
            url,
            host,
            status,
            headers,
            tag_fields: &self.tag_fields,
        };
        self.check(seq, &subject, lookup)
    }
}

/// What the bans of `list` (oldest first) newer than `seq` decide for `subject`, and how many
/// were evaluated.
fn verdict(list: &VecDeque<Arc<Ban>>, seq: u32, subject: &Subject<'_>) -> (Verdict, u64) {
    let mut verdict = Verdict::Keep;
    let mut tests = 0;
    // Newest first: a hard ban ends the search.
    for ban in list.iter().rev().take_while(|ban| ban.seq > seq) {
        tests += 1;
        if !ban.expr.matches(subject) {
            continue;
        }
        if !ban.soft {
            verdict = Verdict::Drop;
            break;
        }
        // The oldest soft ban that matches: stale from then on.
        verdict = Verdict::StaleSince(ban.added);
    }
    (verdict, tests)
}

/// Makes `freshness` stale from `at` on: its lifetime ends at the age it had then, so grace
/// and `stale-while-revalidate` count from `at`.
pub fn stale_since(freshness: &mut crate::rules::freshness::Freshness, at: SystemTime) {
    let age = freshness.current_age(at);
    freshness.lifetime = freshness.lifetime.min(age);
}

/// The host (no port) and the path and query of a cache key (`scheme://authority/path?query`).
pub fn split_key(key: &[u8]) -> Option<(&str, &str)> {
    let uri = std::str::from_utf8(key).ok()?;
    let rest = &uri[uri.find("://")? + 3..];
    let slash = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..slash];
    let url = if slash == rest.len() {
        "/"
    } else {
        &rest[slash..]
    };
    let host = match authority.rfind(':') {
        // An IPv6 literal's colons are inside brackets.
        Some(colon) if !authority[colon..].contains(']') => &authority[..colon],
        _ => authority,
    };
    Some((host, url))
}

#[cfg(test)]
mod tests;
