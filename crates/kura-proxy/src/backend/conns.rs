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
}

/// Nodes gone from the configuration (a reload dropped them), by id, in
/// the order they went: each worker closes its connections to them when
/// it next looks ([`close_retired`]). Ids are never reused.
static RETIRED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// Says that node `id` is gone: no request will be sent to it again.
pub fn retire(id: usize) {
    RETIRED.lock().unwrap_or_else(|e| e.into_inner()).push(id);
}

/// Closes this worker's connections to the nodes retired since it last
/// looked (a worker looks about once a second).
pub fn close_retired() {
    let ids: Vec<usize> = {
        let all = RETIRED.lock().unwrap_or_else(|e| e.into_inner());
        let seen = RETIRED_SEEN.with(|s| s.replace(all.len()));
        all.get(seen..).map(<[usize]>::to_vec).unwrap_or_default()
    };
    let conns: Vec<Rc<Conn>> = CONNS.with(|c| {
        let mut c = c.borrow_mut();
        let mut out = Vec::new();
        for &id in &ids {
            if let Some(slots) = c.get_mut(id) {
                out.extend(slots.drain(..).flatten());
            }
        }
        out
    });
    for conn in conns {
        tracing::debug!(server = %conn.addr, "closing a connection to a backend the configuration dropped");
        conn.fail(Error::ConnectionClosed(conn.addr.clone()));
    }
}

/// This worker's connection of lane `lane` to node `id` at `addr`, made
/// when there is none or it closed.
fn conn_of(id: usize, lanes: usize, lane: usize, addr: &str, t: &Timeouts) -> Rc<Conn> {
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
                let conn = Conn::open(addr, t);
                *slot = Some(conn.clone());
                conn
            }
        }
    })
}

/// Opens this worker's connections to node `id` at `addr`, every lane,
/// where none is open.
pub fn preconnect(id: usize, lanes: usize, addr: &str, t: &Timeouts) {
    for lane in 0..lanes {
        conn_of(id, lanes, lane, addr, t);
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
    send_with(id, lanes, lane, addr, t, write, expect).await
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
    t: &Timeouts,
    write: impl FnOnce(&mut BytesMut),
    expect: Expect,
) -> Result<Pending, Error> {
    let conn = conn_of(id, lanes, lane, addr, t);
    if conn.is_full() {
        conn.room().await;
    }
    conn.enqueue(write, expect)
}
