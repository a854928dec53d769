//! The layer under [`crate::Client`], for a proxy: one server's pool of
//! pipelined connections with its timeouts and health, taking requests
//! already in wire form. The caller writes the bytes (meta, text or
//! binary, as [`Config::protocol`] says) and says which replies to expect;
//! the connection checks that the replies are this request's (order and
//! opaque token) and closes itself on anything else, as for the client.
//!
//! A caller that keeps connections of its own (kura proxy keeps one per
//! event loop) frames replies with [`frame`], matches them to requests
//! with [`take_reply`] (the same rules) and reports outcomes with
//! [`Backend::settle`], so the server's health is judged by all of them.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use crate::config::{Config, Protocol};
use crate::conn::{Conn, Replies};
use crate::error::{Error, Result};
use crate::pool::ServerPool;

pub use crate::auth::open;
pub use crate::conn::Expect;
pub use kura_proto::client::{Reply, Status};

/// One server: its connections, timeouts and down marking.
#[derive(Clone)]
pub struct Backend {
    pool: Arc<ServerPool>,
}

/// A request written (or queued to be) on one connection.
pub struct Pending {
    rx: Replies,
    conn: Arc<Conn>,
    pool: Arc<ServerPool>,
    deadline: Instant,
}

impl Backend {
    /// A backend at `addr` ("host:port"), connected on first use.
    pub fn new(addr: impl Into<String>, config: Config) -> Backend {
        Backend {
            pool: ServerPool::new(addr.into(), Arc::new(config), None),
        }
    }

    pub fn addr(&self) -> &str {
        self.pool.addr()
    }

    /// Connections made from now on (probes included) use the TLS and
    /// login of `config`; those open close once their requests are done.
    pub fn reconfigure(&self, config: &Config) {
        self.pool
            .reconfigure(config.tls.clone(), config.auth.clone());
    }

    /// Whether the server is marked down (its requests fail at once while a
    /// probe retries it).
    pub fn is_down(&self) -> bool {
        self.pool.is_down()
    }

    /// Times the server was marked down.
    pub fn down_transitions(&self) -> u64 {
        self.pool.down_transitions()
    }

    /// Counts the outcome of a request the caller sent on a connection of
    /// its own towards the server's health: a success clears the failures,
    /// a server failure adds one (and marks the server down at the limit,
    /// starting the probe on the current runtime).
    pub fn settle<T>(&self, result: &Result<T>) {
        self.pool.settle(result);
    }

    /// Queues `bytes` on the connection of slot `lane`, connecting first if
    /// needed. Requests one task queues on one lane are answered in order.
    ///
    /// # Errors
    /// [`Error::ServerDown`] at once when the server is marked down, a
    /// connect error (counted towards marking it down), or a closed
    /// connection.
    pub async fn send(&self, lane: usize, bytes: Bytes, expect: Expect) -> Result<Pending> {
        if self.pool.is_down() {
            return Err(Error::ServerDown(self.pool.addr().to_string()));
        }
        let queued = match self.pool.conn_in(lane).await {
            Ok(conn) => conn.enqueue(bytes, expect).await.map(|rx| (conn, rx)),
            Err(e) => Err(e),
        };
        match queued {
            Ok((conn, rx)) => Ok(Pending {
                rx,
                conn,
                pool: self.pool.clone(),
                deadline: Instant::now() + self.pool.config().request_timeout,
            }),
            Err(e) => {
                self.pool.settle::<()>(&Err(e.clone()));
                Err(e)
            }
        }
    }
}

impl Pending {
    /// The request's replies, within the request timeout counted from when
    /// it was queued. A timeout closes the connection (a late reply can
    /// reach no other request); every outcome counts towards the server's
    /// health.
    ///
    /// # Errors
    /// Timeout, I/O, a closed connection or a reply that is not this
    /// request's.
    pub async fn wait(self) -> Result<Vec<Reply>> {
        let server = || self.pool.addr().to_string();
        let result = match tokio::time::timeout_at(self.deadline, self.rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(Error::ConnectionClosed(server())),
            Err(_) => {
                let e = Error::Timeout {
                    server: server(),
                    after: self.pool.config().request_timeout,
                };
                self.conn.close(e.clone());
                Err(e)
            }
        };
        self.pool.settle(&result);
        result
    }
}

/// Frames one reply of `protocol` from the front of `buf`: `Ok(None)`
/// until it is complete; `Err` for bytes that are not a reply (the
/// connection must then be closed).
///
/// # Errors
/// The bytes are not a reply, with why.
pub fn frame(protocol: Protocol, buf: &mut BytesMut) -> std::result::Result<Option<Reply>, String> {
    match protocol {
        Protocol::Meta => kura_proto::client::meta::frame(buf),
        Protocol::Text => kura_proto::client::text::frame(buf),
        Protocol::Binary => kura_proto::client::binary::frame(buf),
    }
}

/// Adds `r` to `got`, the replies so far of a request expecting `expect`
/// (`done`: its text replies complete so far, start at 0): `Ok(true)`
/// when the request is complete with it.
///
/// # Errors
/// `r` cannot be this request's (a wrong opaque, a reply outside the
/// batch): the connection must be closed.
pub fn take_reply(
    expect: Expect,
    got: &mut Vec<Reply>,
    done: &mut u32,
    r: Reply,
) -> std::result::Result<bool, String> {
    crate::conn::take_reply(expect, got, done, r)
}
