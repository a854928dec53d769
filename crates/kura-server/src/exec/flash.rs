//! Gets whose values are on the flash tier, without a worker waiting on
//! the device. A retrieval (`get`/`gets`/`gat`/`gats`, `mg`, binary GET
//! and its variants) looks each key up with [`Session::lookup`]: one probe
//! of the key's shard answers from RAM, or says the value is on flash only
//! (kura-store's `Writes::get_in_ram`). A record whose bytes are in the
//! page cache or a write buffer is read at once (`Store::read_now`: nothing
//! waits on the device). Else the read is handed to the
//! store's reader threads, the request stops where it is and its step
//! answers [`Step::Parked`](super::Step::Parked): the connection's loop
//! (conn/task.rs) writes the replies so far (a multi-key get's keys before
//! that one included), awaits the reads while its worker serves other
//! connections, then runs the request again, from the key it stopped at,
//! taking the values read here (`Session::looked_up_again`) instead of the
//! device. A multi-key get that stops also starts the reads of its next
//! keys on flash, at most [`READS_A_ROUND`] in all, so that they go on
//! together; run again, it may stop at a later key on flash not read yet,
//! and so on: a get of thousands of keys on flash takes rounds of reads,
//! rather than flood the readers' queue (whose refusals are misses). Nothing
//! after it on the connection runs meanwhile, so replies keep their order.
//!
//! A get that changes nothing takes the value read (the record stays on
//! flash, recached in RAM one in `ext_recache_rate` repeated hits, as
//! before); one that touches or asks for more (`gat`, `mg`, which keeps
//! stale-token semantics) has its record taken back into RAM by the reader
//! thread first, as the blocking path did, and then runs on RAM. A read the
//! queue refused, or a damaged record, is a miss (`miss_from_extstore`).
//! The worker's readiness loop (conn/direct/) moves a connection whose
//! request parks to a task, reads under way and all.

use std::collections::HashMap;

use kura_store::{FlashRead, GetOptions, Hit, OnFlash};

use super::Session;

/// Reads one request starts at a time: the key it stops at and the next
/// ones on flash. Well under the readers' queue (`FlashConfig::read_queue`,
/// 1,024), so one request never fills it itself.
pub const READS_A_ROUND: usize = 64;

/// One key's read from flash, started before its request runs.
pub struct Parked {
    /// The record is taken back into RAM: the request reads RAM.
    for_change: bool,
    fetch: Fetch,
}

enum Fetch {
    /// Under way on a reader thread.
    Reading(FlashRead),
    /// The answer: the value, or a miss.
    Done(Option<Hit>),
    /// Back in RAM: the request reads it there.
    InRam,
}

/// The reads the request under way waits for or took its values from,
/// and where its run stopped to wait.
#[derive(Default)]
pub struct Parking {
    /// By key: a request may name a key many times, and its keys run to
    /// thousands.
    reads: HashMap<Box<[u8]>, Parked>,
    /// Reads started in the round under way.
    started: usize,
    /// The key (its index in the request) the run stopped at: keys before
    /// it are answered already, their replies in the output.
    resume: usize,
    /// A lookup just parked: the step answers [`Step::Parked`].
    waiting: bool,
}

impl Session<'_> {
    /// `key`'s value as the request's get answers it: looked up, or, when
    /// the request runs again after its reads, the value read. `None` when
    /// `key` is on flash only: its read is started and the request waits
    /// ([`Session::parked_now`]); the caller stops there. (Always inlined:
    /// a get without a flash tier costs what `get_with` does.)
    #[inline(always)]
    pub(super) fn lookup(&mut self, key: &[u8], opts: &GetOptions) -> Option<Option<Hit>> {
        if !self.parked.reads.is_empty() {
            if let Some(hit) = self.looked_up_again(key, opts) {
                return Some(hit);
            }
        }
        // Without a flash tier the store never answers `OnFlash`: one path
        // for both.
        match self.writes().get_in_ram(key, opts) {
            Ok(hit) => Some(hit),
            Err(OnFlash) => self.on_flash(key, opts),
        }
    }

    /// `key` is on flash only: its read starts and the request waits
    /// (`None`); or, for a session that does not wait (`park` off), it is
    /// read here.
    #[cold]
    #[inline(never)]
    fn on_flash(&mut self, key: &[u8], opts: &GetOptions) -> Option<Option<Hit>> {
        if !self.park {
            return Some(self.writes().get_with(key, opts));
        }
        // In a write buffer or the page cache: read here, nothing waits.
        let for_change = *opts != GetOptions::default();
        if let Some(hit) = self.shared.store.read_now(key, for_change) {
            return Some(match (for_change, hit) {
                (false, Some(hit)) => Some(hit),
                // Back in RAM (or forgotten), or gone from flash as it was
                // read (another read brought it back, or it was deleted):
                // RAM answers.
                (true, _) => self.writes().get_with(key, opts),
                (false, None) => self.writes().get_in_ram(key, opts).unwrap_or(None),
            });
        }
        self.parked.started = 0;
        self.start_read(key, for_change);
        self.parked.waiting = true;
        None
    }

    /// The answer for `key` of a request run again after its reads: the
    /// value read; else the store's (back in RAM, or, should it have gone
    /// back to flash meanwhile, read here: the key the run stopped at
    /// always gets its answer, so every round makes progress). `None` for
    /// a key not read in this request: it is looked up as in the first
    /// run, and may stop the run again.
    #[cold]
    #[inline(never)]
    fn looked_up_again(&self, key: &[u8], opts: &GetOptions) -> Option<Option<Hit>> {
        match &self.parked.reads.get(key)?.fetch {
            Fetch::Done(hit) => Some(hit.clone()),
            _ => Some(self.writes().get_with(key, opts)),
        }
    }

    /// Whether a lookup of this step parked (then the step is
    /// [`Step::Parked`]).
    #[inline]
    pub(super) fn parked_now(&self) -> bool {
        self.parked.waiting
    }

    /// The key a multi-key get runs again from.
    pub(super) fn resume_at(&self) -> usize {
        self.parked.resume
    }

    /// A multi-key get parked at its key `at`: its next `keys` on flash
    /// are read meanwhile too (up to [`READS_A_ROUND`] reads in the round),
    /// and it runs again from `at`.
    #[cold]
    pub(super) fn park_rest<'k>(
        &mut self,
        at: usize,
        keys: impl Iterator<Item = &'k [u8]>,
        for_change: bool,
    ) {
        self.parked.resume = at;
        for key in keys {
            if self.parked.started >= READS_A_ROUND {
                break;
            }
            if self.shared.store.on_flash_only(key) {
                self.start_read(key, for_change);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn start_read(&mut self, key: &[u8], for_change: bool) {
        if self.parked.reads.contains_key(key) {
            return;
        }
        self.parked.started += 1;
        let fetch = match self.shared.store.read_later(key, for_change) {
            Some(read) => Fetch::Reading(read),
            // The read queue is full: a miss.
            None => Fetch::Done(None),
        };
        self.parked
            .reads
            .insert(key.into(), Parked { for_change, fetch });
    }

    /// Waits for the reads [`Session::lookup`] started (the connection's
    /// other work waits; its worker's other connections do not).
    pub async fn unpark(&mut self) {
        self.parked.waiting = false;
        for p in self.parked.reads.values_mut() {
            if let Fetch::Reading(read) = &mut p.fetch {
                let hit = read.await;
                p.fetch = match hit {
                    Some(_) if p.for_change => Fetch::InRam,
                    hit => Fetch::Done(hit),
                };
            }
        }
    }

    /// Whether reads were started for the request at the front.
    pub fn is_parked(&self) -> bool {
        !self.parked.reads.is_empty()
    }

    /// The request that waited has run: its reads are done with.
    pub fn parked_done(&mut self) {
        self.parked = Parking::default();
    }
}
