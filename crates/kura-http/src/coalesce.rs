//! Request coalescing and streaming: one backend fetch feeds every client waiting for the
//! object.
//!
//! A [`Flight`] is one fetch in progress. The first request for a cold key starts it (the fetch
//! runs in a task of its own, so it completes for the others when that client goes away); later
//! requests for the key join it while it still holds the body from its first byte. Every
//! [`Reader`] gets the response head once the backend sent it, then the body chunk by chunk as
//! it arrives: the first bytes reach the clients before the backend has sent the last.
//!
//! Memory: while the response may still be stored, the flight keeps the whole body (at most
//! the largest storable object, and all flights together at most the in-flight budget). Past
//! either limit it stops keeping it: no one may join any more, chunks every reader has sent are
//! dropped, and the fetch waits while the slowest reader is more than [`WINDOW`] behind.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use parking_lot::Mutex;

use crate::cache::object::Object;

/// How far the fetch may run ahead of its slowest reader once the body is no longer kept whole.
pub const WINDOW: usize = 1 << 20;

/// Why a fetch produced no response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    /// The backend could not be reached (refused, connect timeout): 503.
    Unreachable,
    /// It did not answer in time: 503.
    Timeout,
    /// It answered garbage or reset the connection: 502.
    Garbage,
}

impl FetchError {
    /// The status sent to a client for this error when nothing stale may be served.
    pub fn status(self) -> StatusCode {
        match self {
            FetchError::Unreachable | FetchError::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            FetchError::Garbage => StatusCode::BAD_GATEWAY,
        }
    }
}

/// What the fetch made of the backend's response.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// It will be stored: every reader may use it (if its `Vary` matches theirs).
    Shared,
    /// It is not storable: only the request that caused the fetch may use it; the others go to
    /// the backend themselves.
    Private,
    /// A 304 validated the stored response; this is the updated object (no body follows).
    Revalidated(Box<Object>),
}

/// The response head the readers get.
#[derive(Debug, Clone)]
pub struct Head {
    /// Status.
    pub status: StatusCode,
    /// Header fields to send (hop-by-hop fields removed).
    pub headers: HeaderMap,
    /// The header fields of the request that caused the fetch (a waiter whose values for the
    /// fields `Vary` names differ may not use the response).
    pub leader_vary: HeaderMap,
    /// What the fetch made of it.
    pub outcome: Outcome,
}

enum HeadState {
    Pending,
    Ready(Arc<Head>),
    Failed(FetchError),
}

struct State {
    head: HeadState,
    chunks: VecDeque<Bytes>,
    /// Index of `chunks[0]` in the body's chunk sequence.
    base: usize,
    /// Bytes in `chunks`.
    buffered: usize,
    /// Bytes counted against the in-flight budget.
    charged: usize,
    /// The whole body is kept (to store it, and for readers still to join).
    keep_all: bool,
    /// `Some(ok)` once the body ended.
    finished: Option<bool>,
    /// Next chunk index of each live reader.
    cursors: Vec<Option<usize>>,
    wakers: Vec<Waker>,
    producer: Option<Waker>,
}

/// One fetch in progress.
pub struct Flight {
    state: Mutex<State>,
    key: Vec<u8>,
}

/// The map of fetches in progress and the in-flight body budget.
pub struct Flights {
    map: Mutex<HashMap<Vec<u8>, Arc<Flight>>>,
    charged: AtomicUsize,
    budget: usize,
    max_object: usize,
}

/// Whether the caller leads a new flight or joined one.
pub enum Join {
    /// A new flight: the caller must start its fetch ([`Producer`]).
    Leader(Arc<Flight>),
    /// A flight already under way.
    Waiter(Arc<Flight>),
}

impl Flights {
    /// Flights keeping at most `max_object` bytes each and `budget` bytes together.
    pub fn new(budget: usize, max_object: usize) -> Flights {
        Flights {
            map: Mutex::new(HashMap::new()),
            charged: AtomicUsize::new(0),
            budget,
            max_object,
        }
    }

    /// Joins the flight for `key`, or starts one.
    pub fn join(&self, key: &[u8]) -> Join {
        let mut map = self.map.lock();
        if let Some(flight) = map.get(key) {
            return Join::Waiter(flight.clone());
        }
        let flight = Arc::new(Flight::new(key.to_vec()));
        map.insert(key.to_vec(), flight.clone());
        Join::Leader(flight)
    }

    /// Starts a flight that no one can join (a fetch for one client).
    pub fn solo(&self) -> Arc<Flight> {
        Arc::new(Flight::new(Vec::new()))
    }

    /// Whether a flight for `key` is under way.
    pub fn busy(&self, key: &[u8]) -> bool {
        self.map.lock().contains_key(key)
    }

    /// Bytes of bodies kept by flights now.
    pub fn in_flight_bytes(&self) -> usize {
        self.charged.load(Ordering::Relaxed)
    }

    fn close(&self, flight: &Arc<Flight>) {
        if flight.key.is_empty() {
            return;
        }
        let mut map = self.map.lock();
        if map.get(&flight.key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            map.remove(&flight.key);
        }
    }
}

impl Flight {
    fn new(key: Vec<u8>) -> Flight {
        Flight {
            key,
            state: Mutex::new(State {
                head: HeadState::Pending,
                chunks: VecDeque::new(),
                base: 0,
                buffered: 0,
                charged: 0,
                keep_all: true,
                finished: None,
                cursors: Vec::new(),
                wakers: Vec::new(),
                producer: None,
            }),
        }
    }

    /// A reader from the first byte, or `None` when the start of the body is gone.
    pub fn reader(self: &Arc<Self>) -> Option<Reader> {
        let mut state = self.state.lock();
        if state.base != 0 {
            return None;
        }
        let slot = match state.cursors.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                state.cursors.push(None);
                state.cursors.len() - 1
            }
        };
        state.cursors[slot] = Some(0);
        Some(Reader {
            flight: self.clone(),
            slot,
            next: 0,
        })
    }
}

/// The fetch's side of a flight.
pub struct Producer {
    flight: Arc<Flight>,
    flights: Arc<Flights>,
}

impl Producer {
    /// The producer of `flight`.
    pub fn new(flights: Arc<Flights>, flight: Arc<Flight>) -> Producer {
        Producer { flight, flights }
    }

    /// Publishes the response head. A private response closes the flight to new readers.
    pub fn head(&self, head: Head) {
        let private = matches!(head.outcome, Outcome::Private | Outcome::Revalidated(_));
        if private {
            self.flights.close(&self.flight);
        }
        let mut state = self.flight.state.lock();
        state.head = HeadState::Ready(Arc::new(head));
        if private {
            state.keep_all = false;
        }
        wake_all(&mut state);
    }

    /// The fetch failed before a head.
    pub fn fail(&self, error: FetchError) {
        self.flights.close(&self.flight);
        let mut state = self.flight.state.lock();
        state.head = HeadState::Failed(error);
        state.finished = Some(false);
        wake_all(&mut state);
    }

    /// Appends a body chunk, waiting while slow readers are too far behind.
    pub async fn push(&self, chunk: Bytes) {
        let len = chunk.len();
        let stop_keeping = {
            let mut state = self.flight.state.lock();
            let mut stop = false;
            if state.keep_all {
                let total = self.flights.charged.fetch_add(len, Ordering::Relaxed) + len;
                state.charged += len;
                if state.buffered + len > self.flights.max_object || total > self.flights.budget {
                    state.keep_all = false;
                    stop = true;
                }
            }
            state.chunks.push_back(chunk);
            state.buffered += len;
            if !state.keep_all {
                prune(&mut state);
            }
            wake_all(&mut state);
            stop
        };
        if stop_keeping {
            self.flights.close(&self.flight);
        }
        poll_fn(|cx| {
            let mut state = self.flight.state.lock();
            if state.keep_all || state.buffered <= WINDOW {
                return Poll::Ready(());
            }
            prune(&mut state);
            if state.buffered <= WINDOW {
                return Poll::Ready(());
            }
            state.producer = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
    }

    /// Whether anyone still wants the body: it is being kept, or a reader is reading it.
    pub fn wanted(&self) -> bool {
        let state = self.flight.state.lock();
        state.keep_all || state.cursors.iter().any(Option::is_some)
    }

    /// The whole body when it arrived complete (`ok`) and was kept, for storing, with `last`,
    /// its final chunk, not pushed yet (if keeping it too stays within the bounds). Taken
    /// before that chunk is pushed and [`Producer::finish`] called, so the object is in the
    /// store by the time any reader has the body's last byte: a client that has the whole
    /// response (by its length) and asks again gets a hit.
    pub fn whole(&self, ok: bool, last: Option<&Bytes>) -> Option<Vec<Bytes>> {
        let state = self.flight.state.lock();
        let more = last.map_or(0, Bytes::len);
        let fits = state.buffered + more <= self.flights.max_object
            && self.flights.charged.load(Ordering::Relaxed) + more <= self.flights.budget;
        (ok && state.keep_all && fits)
            .then(|| state.chunks.iter().cloned().chain(last.cloned()).collect())
    }

    /// Ends the body (`ok`: complete).
    pub fn finish(&self, ok: bool) {
        self.flights.close(&self.flight);
        let mut state = self.flight.state.lock();
        state.finished = Some(ok);
        let charged = std::mem::take(&mut state.charged);
        self.flights.charged.fetch_sub(charged, Ordering::Relaxed);
        wake_all(&mut state);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let unfinished = self.flight.state.lock().finished.is_none();
        if unfinished {
            let failed = matches!(self.flight.state.lock().head, HeadState::Pending);
            if failed {
                self.fail(FetchError::Garbage);
            } else {
                self.finish(false);
            }
        }
    }
}

fn wake_all(state: &mut State) {
    for waker in state.wakers.drain(..) {
        waker.wake();
    }
}

/// Drops the chunks every live reader has passed.
fn prune(state: &mut State) {
    let min = state
        .cursors
        .iter()
        .flatten()
        .min()
        .copied()
        .unwrap_or(usize::MAX);
    while state.base < min {
        let Some(chunk) = state.chunks.pop_front() else {
            break;
        };
        state.buffered -= chunk.len();
        state.base += 1;
    }
}

/// A client's view of a flight.
pub struct Reader {
    flight: Arc<Flight>,
    slot: usize,
    next: usize,
}

/// The head as a reader sees it.
pub enum ReadHead {
    /// The response head.
    Ready(Arc<Head>),
    /// The fetch failed.
    Failed(FetchError),
}

impl Reader {
    /// Waits for the response head.
    pub async fn head(&self) -> ReadHead {
        poll_fn(|cx| {
            let mut state = self.flight.state.lock();
            match &state.head {
                HeadState::Ready(head) => Poll::Ready(ReadHead::Ready(head.clone())),
                HeadState::Failed(error) => Poll::Ready(ReadHead::Failed(*error)),
                HeadState::Pending => {
                    state.wakers.push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// The next body chunk: `Some(Ok)`, `None` at the end, `Some(Err(()))` if the body broke.
    pub fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, ()>>> {
        let mut state = self.flight.state.lock();
        if self.next >= state.base {
            if let Some(chunk) = state.chunks.get(self.next - state.base).cloned() {
                self.next += 1;
                state.cursors[self.slot] = Some(self.next);
                if let Some(producer) = state.producer.take() {
                    producer.wake();
                }
                return Poll::Ready(Some(Ok(chunk)));
            }
        }
        match state.finished {
            Some(true) => Poll::Ready(None),
            Some(false) => Poll::Ready(Some(Err(()))),
            None => {
                state.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.flight.state.lock();
        state.cursors[self.slot] = None;
        if let Some(producer) = state.producer.take() {
            producer.wake();
        }
    }
}

/// A [`Reader`]'s body as an `http_body::Body`.
pub struct ReaderBody(pub Reader);

impl http_body::Body for ReaderBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0.poll_chunk(cx).map(|chunk| match chunk {
            Some(Ok(data)) => Some(Ok(http_body::Frame::data(data))),
            Some(Err(())) => Some(Err(std::io::Error::other("backend body broke off"))),
            None => None,
        })
    }
}

#[cfg(test)]
mod tests;
