//! The connection's writer task (requests queued by any number of tasks,
//! gathered into one write) and reader task (replies to what the writer
//! wrote, while there are any, or always on a connection subscribed to
//! invalidations).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::replies::{invalidation, take_reply, Iv};
use super::{Job, Pending, ReadSide, Shared, Waiter};
use crate::config::Protocol;
use crate::error::{Error, Result};
use kura_proto::client::{self as codec, Reply};

/// Requests below this size are copied into the writer's buffer; larger
/// ones are written from their own buffer.
const COALESCE_MAX: usize = 64 * 1024;
/// The writer stops gathering queued requests past this many bytes.
const WRITE_MAX: usize = 1024 * 1024;

pub(super) async fn writer(mut rx: mpsc::Receiver<Job>, shared: Arc<Shared>) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut big: Vec<Bytes> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        let mut size = 0;
        {
            let mut st = shared.state();
            while let Some(job) = next.take() {
                shared.queued.fetch_sub(1, Ordering::SeqCst);
                if shared.is_closed() {
                    let _ = job.reply.send(Err(shared.closed_error()));
                } else {
                    size += job.bytes.len();
                    if job.bytes.len() < COALESCE_MAX && big.is_empty() {
                        buf.extend_from_slice(&job.bytes);
                    } else {
                        if !buf.is_empty() {
                            big.push(buf.split().freeze());
                        }
                        big.push(job.bytes);
                    }
                    st.pending
                        .push_back(Pending::new(job.expect, Waiter::Task(job.reply)));
                }
                if size < WRITE_MAX {
                    next = rx.try_recv().ok();
                }
            }
        }
        shared.wake_reader.notify_one();
        if !buf.is_empty() {
            big.push(buf.split().freeze());
        }
        // A direct caller's request that did not fit the socket at once
        // goes out whole before these.
        loop {
            let free = shared.write_free.notified();
            if !shared.state().caller_writing || shared.is_closed() {
                break;
            }
            free.await;
        }
        for chunk in big.drain(..) {
            if let Err(e) = shared.wr.write_all(&chunk).await {
                return shared.fail(Error::io(&shared.server, e));
            }
        }
    }
}

pub(super) async fn reader(shared: Arc<Shared>) {
    loop {
        let mut side = loop {
            let wanted = shared.wake_reader.notified();
            {
                let mut st = shared.state();
                if shared.is_closed() {
                    return;
                }
                if shared.near.is_some() || !st.pending.is_empty() {
                    if let Some(side) = st.read.take() {
                        break side;
                    }
                }
            }
            wanted.await;
        };
        let result = read_replies(&shared, &mut side).await;
        shared.state().read = Some(side);
        if let Err(e) = result {
            return shared.fail(e);
        }
    }
}

/// Reads and hands out replies until nothing is pending (for ever on a
/// connection subscribed to invalidations).
async fn read_replies(shared: &Shared, side: &mut ReadSide) -> Result<()> {
    loop {
        let buf = &mut side.buf;
        loop {
            if let Some(near) = &shared.near {
                match invalidation(buf) {
                    Ok(Some(Iv::Key(k))) => {
                        near.invalidated(Some(&k));
                        continue;
                    }
                    Ok(Some(Iv::All)) => {
                        near.invalidated(None);
                        continue;
                    }
                    Ok(None) => {}
                    Err(()) => break,
                }
            }
            match frame(shared.protocol, buf) {
                Ok(Some(r)) => deliver(shared, r)?,
                Ok(None) => break,
                Err(what) => return Err(Error::protocol(&shared.server, what)),
            }
        }
        if shared.near.is_none() && shared.state().pending.is_empty() {
            return Ok(());
        }
        read_more(shared, side).await?;
    }
}

/// Frames one reply of `protocol` from the front of `buf`.
pub(super) fn frame(
    protocol: Protocol,
    buf: &mut BytesMut,
) -> std::result::Result<Option<Reply>, String> {
    match protocol {
        Protocol::Meta => codec::meta::frame(buf),
        Protocol::Text => codec::text::frame(buf),
        Protocol::Binary => codec::binary::frame(buf),
    }
}

/// Reads what the socket has into the side's buffer.
///
/// # Errors
/// EOF (the server closed the connection) or an I/O error.
pub(super) async fn read_more(shared: &Shared, side: &mut ReadSide) -> Result<()> {
    match side.rd.read_buf(&mut side.buf).await {
        Ok(0) if side.buf.is_empty() => Err(shared.closed_error()),
        Ok(0) => Err(Error::protocol(
            &shared.server,
            "connection closed inside a reply",
        )),
        Ok(_) => {
            if side.buf.capacity() - side.buf.len() < 4096 {
                side.buf.reserve(64 * 1024);
            }
            Ok(())
        }
        Err(e) => Err(Error::io(&shared.server, e)),
    }
}

/// Gives `r` to the oldest pending request.
///
/// # Errors
/// `r` cannot be its (or nothing is pending).
fn deliver(shared: &Shared, r: Reply) -> Result<()> {
    let mut st = shared.state();
    let Some(p) = st.pending.front_mut() else {
        let what = format!("a reply nobody asked for: {:?}", r.status);
        return Err(Error::protocol(&shared.server, what));
    };
    let complete = take_reply(p.expect, &mut p.got, &mut p.done, r)
        .map_err(|what| Error::protocol(&shared.server, what))?;
    if complete {
        if let Some(p) = st.pending.pop_front() {
            drop(st);
            if let Waiter::Task(tx) = p.waiter {
                let _ = tx.send(Ok(p.got));
            }
        }
    }
    Ok(())
}
