//! One request to one backend, routed now and awaited later: the piece
//! every protocol's translation is built from.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kura_client::raw::{Expect, Pending, Reply};
use kura_client::Error;

use crate::router::{opaque, Node, Router};

/// A routed request.
pub struct Call {
    node: Arc<Node>,
    sent: Result<Pending, Error>,
    /// The key a write changes (journaled if the write fails).
    write_key: Option<Vec<u8>>,
}

impl Call {
    /// Queues `bytes` (built by `build` with the opaque to carry) for the
    /// backend of `key`.
    pub async fn one(
        router: &Router,
        lane: usize,
        key: &[u8],
        write: bool,
        build: impl FnOnce(&mut BytesMut, u32),
    ) -> (Call, u32) {
        let node = router.node_for(key).clone();
        let op = opaque();
        let mut buf = BytesMut::with_capacity(64 + key.len());
        build(&mut buf, op);
        let call = Call::to(
            node,
            lane,
            buf.freeze(),
            Expect::Meta(op),
            write.then_some(key),
        )
        .await;
        (call, op)
    }

    /// Queues `bytes` for `node`.
    pub async fn to(
        node: Arc<Node>,
        lane: usize,
        bytes: Bytes,
        expect: Expect,
        write_key: Option<&[u8]>,
    ) -> Call {
        let sent = node.send(lane, bytes, expect, write_key).await;
        Call {
            node,
            sent,
            write_key: write_key.map(<[u8]>::to_vec),
        }
    }

    /// The replies.
    ///
    /// # Errors
    /// The backend was unavailable or failed.
    pub async fn finish(self) -> Result<Vec<Reply>, Error> {
        match self.sent {
            Ok(p) => self.node.wait(p, self.write_key.as_deref()).await,
            Err(e) => Err(e),
        }
    }

    /// The single reply of a request expecting one.
    ///
    /// # Errors
    /// As [`Call::finish`], or no reply at all.
    pub async fn reply(self) -> Result<Reply, Error> {
        let addr = self.node.addr.clone();
        self.finish()
            .await?
            .pop()
            .ok_or(Error::ConnectionClosed(addr))
    }
}

/// `SERVER_ERROR <why>\r\n` for a backend's failure.
pub fn server_error(e: &Error) -> Vec<u8> {
    let msg = e.to_string().replace(['\r', '\n'], " ");
    format!("SERVER_ERROR {msg}\r\n").into_bytes()
}

/// Whether the error means the key's backend could not answer (as opposed
/// to a bad request), so the down policy applies.
pub fn unavailable(e: &Error) -> bool {
    e.is_server_failure() || matches!(e, Error::ServerDown(_))
}

pub fn num(buf: &mut impl BufMut, n: impl itoa::Integer) {
    buf.put_slice(itoa::Buffer::new().format(n).as_bytes());
}
