//! What routing a request gives the client's connection (`conn.rs`): the
//! future of its reply and what a protocol's step did with the read
//! buffer. The protocol modules (`text.rs`, `meta.rs`, `binary.rs`,
//! `admin.rs`) return these; the connection only runs them.

use std::future::Future;
use std::pin::Pin;

/// What a request's reply future gives the writer.
pub enum Out {
    Bytes(Vec<u8>),
    /// A fixed reply (`STORED`, `END`...): nothing to allocate.
    Static(&'static [u8]),
    /// Write what came before, then close (quit).
    Close,
}

pub type ReplyFut = Pin<Box<dyn Future<Output = Out>>>;

/// A reply known at once.
pub fn ready(b: Vec<u8>) -> ReplyFut {
    Box::pin(std::future::ready(Out::Bytes(b)))
}

/// What a protocol's step did with the front of the read buffer.
pub enum Step {
    /// Need more bytes.
    Incomplete,
    /// A request (or a bad one) of `len` bytes, `swallow` more to drop as
    /// they come, and its reply (none for `noreply`).
    Done {
        len: usize,
        swallow: usize,
        reply: Option<ReplyFut>,
    },
    /// Close after the reply, if any.
    Close(Option<ReplyFut>),
    /// A request ordered against everything around it (`flush_all`,
    /// `stats`): it runs once every earlier reply is written, and later
    /// requests are routed only after it.
    Barrier { len: usize, run: ReplyFut },
}

impl Step {
    pub fn reply(len: usize, reply: ReplyFut) -> Step {
        Step::Done {
            len,
            swallow: 0,
            reply: Some(reply),
        }
    }
}
