//! One server: a small pool of pipelined connections (made on first use
//! and replaced when one closes), the connect and request timeouts, and
//! the server's health. After `failure_limit` consecutive failures the
//! server is marked down: its requests fail at once, without touching the
//! network, while a probe task retries it with exponential backoff and
//! jitter and marks it up when it answers again.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kura_tls::ClientStream;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::config::{Config, Protocol};
use crate::conn::{Conn, Expect};
use crate::error::{Error, Result};
use crate::near::NearCache;
use kura_proto::client::{Reply, Status};

/// A lane's connection and its number.
type NumberedSlot = Mutex<Option<(Arc<Conn>, u64)>>;

/// A server and its connections.
pub(crate) struct ServerPool {
    addr: String,
    /// Each slot's connection and its number (the value of `connects`
    /// when it was made).
    slots: Vec<NumberedSlot>,
    /// Connections made so far: a connection numbered at or below a
    /// [`crate::Fence`]'s count for this server existed when the fence
    /// was taken.
    connects: AtomicU64,
    next: AtomicUsize,
    failures: AtomicU32,
    down: AtomicBool,
    /// Times the server was marked down.
    downs: AtomicU64,
    cfg: Arc<Config>,
    /// The settings new connections are made with: `cfg`, or the TLS and
    /// login [`ServerPool::reconfigure`] put in its place.
    connect_cfg: std::sync::Mutex<Arc<Config>>,
    /// The client's near cache: each connection subscribes to its
    /// invalidations when the server offers them.
    near: Option<Arc<NearCache>>,
}

impl ServerPool {
    pub fn new(addr: String, cfg: Arc<Config>, near: Option<Arc<NearCache>>) -> Arc<ServerPool> {
        let n = cfg.connections_per_server.max(1);
        Arc::new(ServerPool {
            addr,
            slots: (0..n).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            connects: AtomicU64::new(0),
            failures: AtomicU32::new(0),
            down: AtomicBool::new(false),
            downs: AtomicU64::new(0),
            connect_cfg: std::sync::Mutex::new(cfg.clone()),
            cfg,
            near,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether the server is marked down.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Connections made so far (see [`crate::Fence`]).
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Acquire)
    }

    /// A new connection and its number, counted once it is up.
    async fn connect_numbered(&self) -> Result<(Conn, u64)> {
        let conn = self.connect().await?;
        Ok((conn, self.connects.fetch_add(1, Ordering::AcqRel) + 1))
    }

    async fn connect(&self) -> Result<Conn> {
        let after = self.cfg.connect_timeout;
        let timed_out = || Error::ConnectTimeout {
            server: self.addr.clone(),
            after,
        };
        let cfg = self
            .connect_cfg
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut stream = crate::auth::connect(&self.addr, &cfg).await?;
        let near = match &self.near {
            Some(near) if self.cfg.protocol != Protocol::Binary => {
                tokio::time::timeout(after, subscribe(&mut stream))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|e| Error::io(&self.addr, e))?
                    .then(|| near.clone())
            }
            _ => None,
        };
        Ok(Conn::start(stream, &self.addr, self.cfg.protocol, near))
    }

    /// A connection of the pool, connecting when its slot is empty or
    /// its connection closed.
    async fn conn(&self) -> Result<(Arc<Conn>, u64)> {
        self.conn_numbered(self.next.fetch_add(1, Ordering::Relaxed))
            .await
    }

    /// The connection of slot `lane` (modulo the pool's size), connecting
    /// when it is empty or closed: one caller that always asks for the
    /// same lane has its requests answered in the order it queued them.
    pub async fn conn_in(&self, lane: usize) -> Result<Arc<Conn>> {
        Ok(self.conn_numbered(lane).await?.0)
    }

    /// An open connection numbered at most `fence`, starting from the next
    /// lane; none makes [`Error::Fenced`] (a new connection would be newer).
    async fn conn_at_most(&self, fence: u64) -> Result<(Arc<Conn>, u64)> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for k in 0..self.slots.len() {
            let slot = self.slots[(start + k) % self.slots.len()].lock().await;
            if let Some((c, n)) = slot.as_ref().filter(|(c, n)| !c.is_closed() && *n <= fence) {
                return Ok((c.clone(), *n));
            }
        }
        Err(Error::Fenced(self.addr.clone()))
    }

    async fn conn_numbered(&self, lane: usize) -> Result<(Arc<Conn>, u64)> {
        let i = lane % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some((c, n)) = slot.as_ref().filter(|(c, _)| !c.is_closed()) {
            return Ok((c.clone(), *n));
        }
        let (c, n) = self.connect_numbered().await?;
        let c = Arc::new(c);
        *slot = Some((c.clone(), n));
        Ok((c, n))
    }

    /// Sends one request (a single command or a whole batch) and waits for
    /// its replies, within the request timeout.
    ///
    /// # Errors
    /// [`Error::ServerDown`] at once when the server is marked down;
    /// otherwise a connect, timeout, I/O or protocol error (each counts
    /// towards marking the server down).
    pub async fn call(self: &Arc<Self>, bytes: Bytes, expect: Expect) -> Result<Vec<Reply>> {
        Ok(self.call_fenced(bytes, expect, None).await?.0)
    }

    /// [`ServerPool::call`], sent only on a connection numbered at or
    /// below `fence` ([`Error::Fenced`] otherwise, nothing sent); also
    /// returns the number of the connection it went on.
    pub async fn call_fenced(
        self: &Arc<Self>,
        bytes: Bytes,
        expect: Expect,
        fence: Option<u64>,
    ) -> Result<(Vec<Reply>, u64)> {
        if self.is_down() {
            return Err(Error::ServerDown(self.addr.clone()));
        }
        let mut number = 0;
        let conn = match fence {
            Some(f) => self.conn_at_most(f).await,
            None => self.conn().await,
        };
        let result = match conn {
            Ok((conn, n)) => {
                number = n;
                let after = self.cfg.request_timeout;
                match tokio::time::timeout(after, conn.call(bytes, expect)).await {
                    Ok(r) => r,
                    Err(_) => {
                        let e = Error::Timeout {
                            server: self.addr.clone(),
                            after,
                        };
                        // Nothing else may get this connection's late replies.
                        conn.close(e.clone());
                        Err(e)
                    }
                }
            }
            Err(e) => Err(e),
        };
        self.settle(&result);
        result.map(|r| (r, number))
    }

    /// Counts a request's outcome towards the server's health: a success
    /// clears the failures, a server failure adds one.
    pub fn settle<T>(self: &Arc<Self>, result: &Result<T>) {
        match result {
            Ok(_) => self.failures.store(0, Ordering::Relaxed),
            Err(e) if e.is_server_failure() => self.failed(),
            Err(_) => {}
        }
    }

    /// The settings the pool was made with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// New connections (and probes) use `tls` and `auth` from now on;
    /// the connections open leave the pool, each closing once the
    /// requests on it are done.
    pub fn reconfigure(
        &self,
        tls: Option<kura_tls::ClientTlsConfig>,
        auth: Option<crate::auth::Auth>,
    ) {
        let mut cfg = (*self.cfg).clone();
        cfg.tls = tls;
        cfg.auth = auth;
        *self.connect_cfg.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(cfg);
        for slot in &self.slots {
            if let Ok(mut s) = slot.try_lock() {
                s.take();
            }
        }
    }

    /// Times the server was marked down since the pool was made.
    pub fn down_transitions(&self) -> u64 {
        self.downs.load(Ordering::Relaxed)
    }

    fn failed(self: &Arc<Self>) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.cfg.failure_limit && !self.down.swap(true, Ordering::AcqRel) {
            self.downs.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(server = %self.addr, failures = n, "server marked down");
            tokio::spawn(probe(Arc::downgrade(self)));
        }
    }

    /// Marks the server up after a probe answered.
    fn revive(&self, conn: (Conn, u64)) {
        if let Ok(mut slot) = self.slots[0].try_lock() {
            *slot = Some((Arc::new(conn.0), conn.1));
        }
        self.failures.store(0, Ordering::Relaxed);
        self.down.store(false, Ordering::Release);
        tracing::info!(server = %self.addr, "server up again");
    }

    /// One probe: connect and ask for a no-op.
    async fn probe_once(&self) -> Result<(Conn, u64)> {
        let (conn, n) = self.connect_numbered().await?;
        let mut req = BytesMut::new();
        let (expect, want) = match conn.protocol() {
            Protocol::Text => {
                req.put_slice(b"version\r\n");
                (Expect::Text(1), Status::Version)
            }
            Protocol::Meta => {
                req.put_slice(b"mn\r\n");
                (Expect::MetaBatch(0), Status::Noop)
            }
            Protocol::Binary => {
                kura_proto::client::binary::noop(&mut req, 0);
                (Expect::MetaBatch(0), Status::Noop)
            }
        };
        let call = conn.call(req.freeze(), expect);
        let replies = tokio::time::timeout(self.cfg.request_timeout, call)
            .await
            .map_err(|_| Error::Timeout {
                server: self.addr.clone(),
                after: self.cfg.request_timeout,
            })??;
        // A batch of nothing collects no replies; `version` collects one.
        if replies.iter().all(|r| r.status == want) {
            Ok((conn, n))
        } else {
            Err(Error::protocol(&self.addr, "unexpected probe reply"))
        }
    }
}

/// Asks for invalidations (`mt`, docs/protocol-extensions.md) before the
/// connection carries anything else: true when the server took it (kura),
/// false when it refused (memcached answers `ERROR`), and the connection
/// then serves without.
async fn subscribe(stream: &mut ClientStream) -> std::io::Result<bool> {
    stream.write_all(b"mt\r\n").await?;
    stream.flush().await?;
    let mut line = Vec::with_capacity(16);
    let mut b = [0u8; 64];
    while !line.ends_with(b"\r\n") {
        let n = stream.read(&mut b).await?;
        if n == 0 || line.len() + n > 1024 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        line.extend_from_slice(&b[..n]);
    }
    Ok(line == b"HD\r\n")
}

/// Retries a down server with exponential backoff and jitter until it
/// answers (or the client is dropped).
async fn probe(pool: Weak<ServerPool>) {
    let Some(cfg) = pool.upgrade().map(|p| p.cfg.clone()) else {
        return;
    };
    let mut backoff = cfg.probe_backoff_min;
    loop {
        let jitter = rand::thread_rng().gen_range(0.0..0.5);
        tokio::time::sleep(backoff.mul_f64(1.0 + jitter)).await;
        let Some(p) = pool.upgrade() else { return };
        match p.probe_once().await {
            Ok(conn) => return p.revive(conn),
            Err(e) => tracing::debug!(server = %p.addr, %e, "probe failed"),
        }
        backoff = (backoff * 2).min(cfg.probe_backoff_max.max(Duration::from_millis(1)));
    }
}
