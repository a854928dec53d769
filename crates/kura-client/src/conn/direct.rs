//! The direct path: a caller that finds the connection idle writes its
//! request and reads its reply itself, as a synchronous client would,
//! instead of handing it to the writer task and waiting for the reader
//! task to wake it (two task hops and their wake-ups per request).
//!
//! The caller takes the read side and puts its request first on the
//! pending queue, so requests other tasks queue meanwhile are written by
//! the writer behind it and their replies, read after the caller's, are
//! left to the reader task. Whatever happens to the caller (its reply, an
//! error, or its future dropped by a timeout) the read side goes back, and
//! the reader task is woken when requests are still pending.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::tasks::{frame, read_more};
use super::{take_reply, Expect, Pending, ReadSide, Shared, Waiter};
use crate::error::{Error, Result};
use kura_proto::client::Reply;

/// A request on the direct path, written (or being written), its reply
/// not yet read.
pub(super) struct Direct<'a> {
    shared: &'a Shared,
    side: Option<ReadSide>,
    /// What the first write left: written before any other request.
    rest: Bytes,
}

impl<'a> Direct<'a> {
    /// Writes `bytes` when the connection is idle: `None` when it is not
    /// (the request must then be queued).
    ///
    /// # Errors
    /// The connection is closed, or the write failed (the connection is
    /// then closed).
    pub fn start(shared: &'a Shared, bytes: &Bytes, expect: Expect) -> Result<Option<Direct<'a>>> {
        let mut st = shared.state();
        if shared.is_closed() {
            return Err(shared.closed_error());
        }
        // Nothing pending means the writer is not writing: it puts requests
        // on `pending` before it writes them, and they cannot all be
        // answered before they are all written.
        if !st.pending.is_empty() || shared.queued.load(Ordering::SeqCst) != 0 {
            return Ok(None);
        }
        // A subscribed connection's reader task reads for ever (the
        // invalidations), though it may not have taken the read side yet.
        if shared.near.is_some() {
            return Ok(None);
        }
        // A TLS connection has none: its halves share the session.
        let Some(wr) = shared.wr.tcp() else {
            return Ok(None);
        };
        let Some(side) = st.read.take() else {
            return Ok(None);
        };
        let written = match wr.try_write(bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                st.read = Some(side);
                drop(st);
                let err = Error::io(&shared.server, e);
                shared.fail(err.clone());
                return Err(err);
            }
        };
        st.pending.push_back(Pending::new(expect, Waiter::Caller));
        st.caller_writing = written < bytes.len();
        Ok(Some(Direct {
            shared,
            side: Some(side),
            rest: bytes.slice(written..),
        }))
    }

    /// Finishes the write and reads the request's replies.
    ///
    /// # Errors
    /// The connection failed or closed before they were complete; a reply
    /// that cannot be this request's closes it.
    pub async fn replies(mut self) -> Result<Vec<Reply>> {
        let result = self.run().await;
        if let Err(e) = &result {
            self.shared.fail(e.clone());
        }
        result
    }

    async fn run(&mut self) -> Result<Vec<Reply>> {
        let shared = self.shared;
        if !self.rest.is_empty() {
            shared
                .wr
                .write_all(&self.rest)
                .await
                .map_err(|e| Error::io(&shared.server, e))?;
            self.rest.clear();
            shared.state().caller_writing = false;
            shared.write_free.notify_one();
        }
        let Some(side) = self.side.as_mut() else {
            return Err(shared.closed_error());
        };
        loop {
            while let Some(r) = frame(shared.protocol, &mut side.buf)
                .map_err(|w| Error::protocol(&shared.server, w))?
            {
                let mut st = shared.state();
                if shared.is_closed() {
                    return Err(shared.closed_error());
                }
                // Ours is first: nothing else is taken off the queue while
                // the read side is ours.
                let Some(p) = st.pending.front_mut() else {
                    return Err(shared.closed_error());
                };
                let complete = take_reply(p.expect, &mut p.got, &mut p.done, r)
                    .map_err(|what| Error::protocol(&shared.server, what))?;
                if complete {
                    return match st.pending.pop_front() {
                        Some(p) => Ok(p.got),
                        None => Err(shared.closed_error()),
                    };
                }
            }
            read_more(shared, side).await?;
        }
    }
}

impl Drop for Direct<'_> {
    fn drop(&mut self) {
        let (cut, wake) = {
            let mut st = self.shared.state();
            let cut = std::mem::take(&mut st.caller_writing);
            if let Some(side) = self.side.take() {
                st.read = Some(side);
            }
            (cut, !st.pending.is_empty())
        };
        if cut {
            // Dropped with its request half written: nothing else can be
            // written after it.
            let what = "a request cancelled while it was being written";
            self.shared.fail(Error::protocol(&self.shared.server, what));
        } else if wake {
            self.shared.wake_reader.notify_one();
        }
    }
}
