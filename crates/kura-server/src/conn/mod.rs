//! A client connection: what ends it, where it stands when it changes
//! loops, and serving it in a task of its own (task.rs); most plain ones
//! are served by the worker's readiness loop instead (direct/). Either
//! loop reads, frames and executes every request that is buffered, then
//! sends all their replies with one write (step.rs frames and runs one).
//! Buffers are bounded: the read buffer holds at most one request (a line
//! of at most 2048 bytes, a multi-get line, or one value of at most `-I`
//! bytes, which must first get room in the server's budget for values
//! being received, `budget.rs`), and replies are written out once they
//! pass a high-water mark, so a client that never reads stalls only
//! itself.

use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::metrics::{ConnGuard, ConnState, ThreadStats};
use crate::shared::Shared;
use crate::stop::StopSignal;

pub(crate) mod direct;
pub(crate) mod park;
mod step;
mod stream;
mod task;

/// Bytes asked of each read.
const READ_CHUNK: usize = 16 * 1024;
/// Buffers grown past this by one large request are released afterwards.
const KEEP_CAPACITY: usize = 64 * 1024;
/// How long closing may wait to send what a stream still holds (under TLS,
/// records queued behind a client that stopped reading, and close_notify).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection's socket as a replication stream may send on it from any
/// thread (kura-keyspace's `primary/direct.rs`): plain TCP only; TLS and
/// Unix sockets are sent to by the stream's task.
pub(crate) trait PlainTcp {
    /// A second handle on the socket (`dup`), if it is plain TCP.
    fn plain_tcp(&self) -> Option<std::net::TcpStream> {
        None
    }
}

impl PlainTcp for tokio::net::TcpStream {
    fn plain_tcp(&self) -> Option<std::net::TcpStream> {
        use std::os::fd::AsFd;
        let fd = self.as_fd().try_clone_to_owned().ok()?;
        Some(std::net::TcpStream::from(fd))
    }
}

impl PlainTcp for tokio::net::UnixStream {}

impl<S> PlainTcp for tokio_rustls::server::TlsStream<S> {}

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// Text and meta commands.
    Text,
    /// memcached's binary protocol.
    Binary,
}

/// What ends a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    /// Served a replica until it went.
    Replicate,
    Quit,
    Stopping,
    Garbage,
    Idle,
    Io,
}

/// Serves one connection until the client leaves, quits, misbehaves, or the
/// server stops; from where another loop left it, if `resume` says so.
pub(crate) async fn serve<S>(
    mut stream: S,
    shared: &Shared,
    stats: &ThreadStats,
    stop: &Rc<StopSignal>,
    conn: ConnGuard,
    resume: Option<Resume>,
) where
    S: AsyncRead + AsyncWrite + Unpin + PlainTcp,
{
    let end = task::run(&mut stream, shared, stats, stop, &conn, resume).await;
    closed(shared, &conn, end);
    let _ = crate::timer::timeout(CLOSE_TIMEOUT, stream.shutdown()).await;
}

/// Notes a connection's end (its state, and the log at `-vv`).
fn closed(shared: &Shared, conn: &ConnGuard, end: End) {
    conn.info.set_state(ConnState::Closing);
    let why = match end {
        End::Eof => "client closed",
        End::Quit => "quit",
        End::Replicate => "replication stream ended",
        End::Stopping => "server stopping",
        End::Garbage => "bad framing (a line too long without newline, or bad binary magic)",
        End::Idle => "idle timeout",
        End::Io => "i/o error",
    };
    if shared.verbosity() >= 2 {
        tracing::debug!(conn = %conn.info.addr, why, "connection closed");
    }
    let hub = &shared.inspect.watchers;
    if hub.wants(kura_proto::WatchKinds::CONNEVENTS) {
        // memcached's reasons: error, normal, idle_timeout, shutdown.
        let reason = match end {
            End::Eof | End::Quit | End::Replicate => "normal",
            End::Idle => "idle_timeout",
            End::Stopping => "shutdown",
            End::Garbage | End::Io => "error",
        };
        hub.log(kura_proto::WatchKinds::CONNEVENTS, |o| {
            crate::inspect::watch::conn_event(o, &conn.info.addr, conn.id(), Some(reason))
        });
    }
}

/// Where a connection stands when it moves from the worker's readiness
/// loop (direct/) to a task of its own (task.rs).
pub(crate) struct Resume {
    rbuf: BytesMut,
    session: crate::exec::Detached,
    wire: Option<Wire>,
    swallow: usize,
    /// Its replies are written; then it ends (or carries a replication
    /// stream).
    then: Option<End>,
}
