//! A worker's table of its backend connections (by node id, then lane),
//! made on first use and made again once closed, and the closing of the
//! connections to nodes a reload dropped.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::BytesMut;
use kura_client::raw::Expect;
use kura_client::Error;

use super::{Conn, Pending, Timeouts};

thread_local! {
    /// This worker's connections: by node id, then by lane.
    static CONNS: RefCell<Vec<Vec<Option<Rc<Conn>>>>> = const { RefCell::new(Vec::new()) };
    /// How many of [`RETIRED`] this worker has closed its connections to.
    static RETIRED_SEEN: Cell<usize> = const { Cell::new(0) };
    /// How many of [`RECYCLED`] this worker has let go of.
    static RECYCLED_SEEN: Cell<usize> = const { Cell::new(0) };
}

/// Nodes gone from the configuration (a reload dropped them), by id, in
/// the order they went: each worker closes its connections to them when
/// it next looks ([`close_retired`]). Ids are never reused.
static RETIRED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Nodes whose connection settings changed (a reload's `[backend_tls]`
/// or `[backend_auth]`), by id, as they came: each worker lets go of its
/// connections to them when it next looks, and makes new ones with the
/// new settings; those let go close once their requests are answered.
static RECYCLED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Says that node `id` is gone: no request will be sent to it again.
pub fn retire(id: usize) {
    RETIRED.lock().unwrap_or_else(|e| e.into_inner()).push(id);
}

/// Says that node `id`'s connections are to be made again.
pub fn recycle(id: usize) {
    RECYCLED.lock().unwrap_or_else(|e| e.into_inner()).push(id);
}

/// The ids of `list` this worker has not looked at (`seen` says how many
/// it had).
fn unseen(
    list: &std::sync::Mutex<Vec<usize>>,
    seen: &'static std::thread::LocalKey<Cell<usize>>,
) -> Vec<usize> {
    let all = list.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.with(|s| s.replace(all.len()));
    all.get(seen..).map(<[usize]>::to_vec).unwrap_or_default()
}

/// Takes this worker's connections to nodes `ids` out of its table.
fn take(ids: &[usize]) -> Vec<Rc<Conn>> {
    CONNS.with(|c| {
        let mut c = c.borrow_mut();
        let mut out = Vec::new();
        for &id in ids {
            if let Some(slots) = c.get_mut(id) {
                out.extend(slots.drain(..).flatten());
            }
        }
        out
    })
}

/// Closes this worker's connections to the nodes retired since it last
/// looked, and lets go of those to nodes recycled (a worker looks about
/// once a second).
pub fn close_retired() {
    for conn in take(&unseen(&RETIRED, &RETIRED_SEEN)) {
        tracing::debug!(server = %conn.addr, "closing a connection to a backend the configuration dropped");
        conn.fail(Error::ConnectionClosed(conn.addr.clone()));
    }
    for conn in take(&unseen(&RECYCLED, &RECYCLED_SEEN)) {
        tracing::debug!(server = %conn.addr, "a backend's connection settings changed: its connection closes once idle");
        conn.retire();
    }
}

/// This worker's connection of lane `lane` to node `id` at `addr`, made
/// when there is none or it closed.
fn conn_of(
    id: usize,
    lanes: usize,
    lane: usize,
    addr: &str,
    t: impl FnOnce() -> Timeouts,
) -> Rc<Conn> {
    CONNS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() <= id {
            c.resize_with(id + 1, Vec::new);
        }
        let slots = &mut c[id];
        if slots.len() < lanes {
            slots.resize_with(lanes, || None);
        }
        let slot = &mut slots[lane % lanes];
        match slot {
            Some(conn) if !conn.is_closed() => conn.clone(),
            _ => {
                let conn = Conn::open(addr, &t());
                *slot = Some(conn.clone());
                conn
            }
        }
    })
}

/// Opens this worker's connections to node `id` at `addr`, every lane,
/// where none is open.
pub fn preconnect(id: usize, lanes: usize, addr: &str, t: impl Fn() -> Timeouts) {
    for lane in 0..lanes {
        conn_of(id, lanes, lane, addr, &t);
    }
}

/// Queues `bytes` for node `id` on this worker's connection of `lane`,
/// waiting while that connection's queue is full.
///
/// # Errors
/// The connection closed while the sender waited for room.
#[cfg(test)]
pub async fn send(
    id: usize,
    lanes: usize,
    lane: usize,
    addr: &str,
    t: &Timeouts,
    bytes: &[u8],
    expect: Expect,
) -> Result<Pending, Error> {
    let write = |out: &mut BytesMut| out.extend_from_slice(bytes);
    send_with(id, lanes, lane, addr, || t.clone(), write, expect).await
}

/// Queues the request `write` appends to the output buffer of this
/// worker's connection of `lane` to node `id` (no buffer of its own to
/// copy from), waiting while that connection's queue is full.
///
/// # Errors
/// The connection closed while the sender waited for room.
pub async fn send_with(
    id: usize,
    lanes: usize,
    lane: usize,
    addr: &str,
    t: impl FnOnce() -> Timeouts,
    write: impl FnOnce(&mut BytesMut),
    expect: Expect,
) -> Result<Pending, Error> {
    let conn = conn_of(id, lanes, lane, addr, t);
    if conn.is_full() {
        conn.room().await;
    }
    conn.enqueue(write, expect)
}
