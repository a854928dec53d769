//! Gets whose values are on the flash tier, without a worker waiting on
//! the device. Before a retrieval runs (`get`/`gets`/`gat`/`gats`, `mg`,
//! binary GET and its variants), [`Session::park`] looks for its keys whose
//! values are on flash only, hands their reads to the store's reader
//! threads and answers [`Step::Parked`]: the connection's loop (conn/task.rs)
//! writes the replies before it, awaits the reads while its worker serves
//! other connections, then runs the request again, which takes the values
//! read from here ([`Session::prefetched`]) instead of the device. Nothing
//! after it on the connection runs meanwhile, so replies keep their order.
//!
//! A get that changes nothing takes the value read (the record stays on
//! flash, recached in RAM one in `ext_recache_rate` repeated hits, as
//! before); one that touches or asks for more (`gat`, `mg`, which keeps
//! stale-token semantics) has its record taken back into RAM by the reader
//! thread first, as the blocking path did, and then runs on RAM. A read the
//! queue refused, or a damaged record, is a miss (`miss_from_extstore`).
//! The worker's readiness loop (conn/direct/) moves a connection whose
//! request parks to a task, reads under way and all; UDP reads as before.

use kura_proto::binary::{BinFrame, Command};
use kura_proto::{Frame, Request};
use kura_store::{FlashRead, Hit};

use super::{Session, Step};

/// One key's read from flash, started before its request runs.
pub struct Parked {
    key: Vec<u8>,
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

impl Session<'_> {
    /// Starts the flash reads `frame`'s retrieval needs, if any: then the
    /// request waits for them ([`Step::Parked`]) before it runs.
    pub(super) fn park_text(&mut self, frame: &Frame<'_>) -> Option<Step> {
        let Frame::Request { request, .. } = frame else {
            return None;
        };
        match request {
            Request::Get(g) => {
                for key in g.keys() {
                    self.park_key(key, g.touch.is_some());
                }
            }
            // `mg` keeps its stale-token semantics: RAM's entry answers.
            Request::MetaGet(m) => self.park_key(&m.key.bytes, true),
            _ => {}
        }
        (!self.parked.is_empty()).then_some(Step::Parked)
    }

    /// [`Session::park_text`] for a binary frame.
    pub(super) fn park_binary(&mut self, frame: &BinFrame<'_>) -> Option<Step> {
        if let BinFrame::Request { request, .. } = frame {
            if let Command::Get { key, touch, .. } = &request.command {
                self.park_key(key, touch.is_some());
            }
        }
        (!self.parked.is_empty()).then_some(Step::Parked)
    }

    fn park_key(&mut self, key: &[u8], for_change: bool) {
        let store = &self.shared.store;
        if !store.on_flash_only(key) || self.parked.iter().any(|p| p.key == key) {
            return;
        }
        let fetch = match store.read_later(key, for_change) {
            Some(read) => Fetch::Reading(read),
            // The read queue is full: a miss.
            None => Fetch::Done(None),
        };
        self.parked.push(Parked {
            key: key.to_vec(),
            for_change,
            fetch,
        });
    }

    /// Waits for the reads [`Session::park_text`] started (the connection's
    /// other work waits; its worker's other connections do not).
    pub async fn unpark(&mut self) {
        for p in &mut self.parked {
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
        !self.parked.is_empty()
    }

    /// The request that waited has run: its reads are done with.
    pub fn parked_done(&mut self) {
        self.parked.clear();
    }

    /// What a read from flash answered for `key`, for the request that
    /// waited for it: `None` when the store is to be asked (no read, or the
    /// record is back in RAM).
    #[inline]
    pub(super) fn prefetched(&self, key: &[u8]) -> Option<Option<Hit>> {
        if self.parked.is_empty() {
            return None;
        }
        self.prefetched_slow(key)
    }

    #[cold]
    #[inline(never)]
    fn prefetched_slow(&self, key: &[u8]) -> Option<Option<Hit>> {
        match &self.parked.iter().find(|p| p.key == key)?.fetch {
            Fetch::Done(hit) => Some(hit.clone()),
            Fetch::InRam | Fetch::Reading(_) => None,
        }
    }
}
