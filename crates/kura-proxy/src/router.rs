//! Pools, their backends (`Node`s) and which backend a key goes to. A
//! node wraps kura-client's pipelined backend with the proxy's own gate:
//! it serves only while its rejoin journal is empty, and every write the
//! proxy could not be sure it applied puts the key in that journal.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use kura_client::raw::{Backend, Expect};
use kura_client::Error;
use kura_proto::client::Reply;
use kura_ring::Ring;

use crate::backend::{Pending, Timeouts};
use crate::config::{Config, DownReply, Overflow, ReadMode, Rejoin, RouteSpec, WriteMode};
use crate::journal::Journal;
use crate::rejoin::{GutterCopies, GutterWrite};

mod pick;
pub use pick::PoolCounters;

/// Per-backend counters (`stats`, /metrics).
#[derive(Default)]
pub struct NodeStats {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    pub replayed: AtomicU64,
    /// Its time to answer (latency.rs).
    pub latency: crate::latency::Latency,
}

/// One backend.
pub struct Node {
    pub addr: String,
    /// Names the node's connections in each worker (`backend.rs`).
    id: usize,
    /// Connections to it per worker.
    lanes: usize,
    /// Read when a connection is made: a reload that changes the TLS or
    /// login settings puts new ones in place ([`Node::reconfigure`]).
    timeouts: Mutex<Timeouts>,
    /// Its health (down marking, probes) and the connections of the
    /// journal's replay.
    backend: Backend,
    journal: Mutex<Journal>,
    /// Its keys written to a gutter while it did not serve (rejoin.rs).
    gutter_copies: Mutex<GutterCopies>,
    /// The journal is not empty: reads and writes stay away.
    gated: AtomicBool,
    replaying: AtomicBool,
    /// Its replication is watched (a `rejoin = "caught-up"` pool's):
    /// catch_up.rs.
    pub(crate) catch_up: AtomicBool,
    /// Watched and not known to be caught up: reads and writes stay away.
    pub(crate) behind: AtomicBool,
    pub(crate) watching: AtomicBool,
    /// A reload gave some of its keys to another backend since it was last
    /// flushed: it may hold old values of them (membership.rs).
    pub(crate) lost_keys: AtomicBool,
    pub(crate) catch_up_check: Duration,
    pub(crate) overflow: Overflow,
    request_timeout: Duration,
    pub stats: NodeStats,
}

static NODE_IDS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static OPAQUE: Cell<u32> = const { Cell::new(1) };
}

/// A fresh opaque token for a backend request (unique among the requests
/// in flight on this worker's connections, which are its own).
pub fn opaque() -> u32 {
    OPAQUE.with(|o| {
        let v = o.get();
        o.set(v.wrapping_add(1));
        v
    })
}

impl Drop for Node {
    /// A node is dropped once no router holds it (a reload removed its
    /// address) and no request is routed to it: the workers' connections
    /// to it go too.
    fn drop(&mut self) {
        crate::backend::retire(self.id);
    }
}

impl Node {
    fn new(addr: &str, cfg: &Config) -> std::io::Result<Arc<Node>> {
        let h = &cfg.health;
        let journal = Journal::open(cfg.journal_dir.as_deref(), addr, h.journal_max_keys)?;
        let gated = !journal.is_empty();
        // TLS and the login as `[backend_tls]` and `[backend_auth]` say.
        let mut client = h.client_config();
        cfg.net.apply(addr, &mut client);
        let node = Arc::new(Node {
            addr: addr.to_string(),
            id: NODE_IDS.fetch_add(1, Ordering::Relaxed),
            lanes: h.connections_per_backend.max(1),
            timeouts: Mutex::new(Timeouts {
                connect: Duration::from_millis(h.connect_timeout_ms),
                request: Duration::from_millis(h.request_timeout_ms),
                client: Arc::new(client.clone()),
            }),
            backend: Backend::new(addr, client),
            journal: Mutex::new(journal),
            gutter_copies: Mutex::new(GutterCopies::new(h.journal_max_keys)),
            gated: AtomicBool::new(gated),
            replaying: AtomicBool::new(false),
            catch_up: AtomicBool::new(false),
            behind: AtomicBool::new(false),
            watching: AtomicBool::new(false),
            lost_keys: AtomicBool::new(false),
            catch_up_check: Duration::from_millis(h.catch_up_check_ms.max(10)),
            overflow: h.journal_overflow,
            request_timeout: Duration::from_millis(h.request_timeout_ms),
            stats: NodeStats::default(),
        });
        Ok(node)
    }

    /// The settings its connections are made with now.
    fn timeouts(&self) -> Timeouts {
        self.timeouts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Its connections are made with `client`'s TLS and login from now on
    /// (a reload changed `[backend_tls]` or `[backend_auth]`): each
    /// worker lets go of its connections to it within about a second, and
    /// they close once their requests are answered.
    fn reconfigure(&self, client: kura_client::Config) {
        self.backend.reconfigure(&client);
        self.timeouts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .client = Arc::new(client);
        crate::backend::recycle(self.id);
    }

    pub(crate) fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn gutter_copies(&self) -> std::sync::MutexGuard<'_, GutterCopies> {
        self.gutter_copies.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// kura-client's backend: health, probes, the replay's connections.
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The journal and the gutter's copies are done with: serves again
    /// (called by the replay under the journal's lock).
    pub(crate) fn ungate(&self) {
        self.gated.store(false, Ordering::Release);
        self.replaying.store(false, Ordering::Release);
    }

    /// The backend was flushed: its journal is done with, and it holds
    /// no value of keys it lost.
    pub(crate) fn flushed(&self) {
        self.journal().clear();
        self.lost_keys.store(false, Ordering::Release);
    }

    /// A write of `key` goes to gutter node `g` (TTLs capped at `ttl`)
    /// because this backend does not serve: the key is journaled for it,
    /// and the copy deleted from the gutter before it serves again. Keep
    /// the returned guard with the write until the gutter answered it.
    pub fn gutter_write(self: &Arc<Self>, g: &Arc<Node>, key: &[u8], ttl: u32) -> GutterWrite {
        // Recorded before the key is journaled (and the backend gated):
        // the replay looks at the copies under the journal's lock.
        self.gutter_copies()
            .record(g, g.id, key, ttl, self.request_timeout);
        self.journal_key(key);
        GutterWrite(self.clone())
    }

    /// Copies its keys may have in a gutter that are not listed (a proxy
    /// restarted with its journal): it waits `secs` for them to age out.
    pub fn gutter_wait(&self, secs: u32) {
        self.gutter_copies()
            .wait_for(u64::from(secs) + 2, self.request_timeout);
    }

    /// Whether requests may go to the backend now.
    pub fn available(&self) -> bool {
        !self.gated.load(Ordering::Acquire)
            && !self.behind.load(Ordering::Acquire)
            && !self.backend.is_down()
    }

    pub fn is_down(&self) -> bool {
        self.backend.is_down()
    }

    pub fn down_transitions(&self) -> u64 {
        self.backend.down_transitions()
    }

    /// Keys in the journal, and whether it overflowed.
    pub fn journal_len(&self) -> (usize, bool) {
        let j = self.journal();
        (j.len(), j.overflowed())
    }

    /// Records a key the backend may hold an old value of.
    pub fn journal_key(self: &Arc<Self>, key: &[u8]) {
        let mut j = self.journal();
        j.add(key);
        self.gated.store(true, Ordering::Release);
        drop(j);
        self.start_replay();
    }

    /// Records that the backend may hold anything (a flush it missed).
    pub fn journal_everything(self: &Arc<Self>) {
        let mut j = self.journal();
        j.mark_overflow();
        self.gated.store(true, Ordering::Release);
        drop(j);
        self.start_replay();
    }

    /// Starts the replay task if the journal has work and none runs.
    pub fn start_replay(self: &Arc<Self>) {
        if self.gated.load(Ordering::Acquire) && !self.replaying.swap(true, Ordering::AcqRel) {
            crate::timer::spawn(crate::rejoin::replay(self.clone()));
        }
    }

    /// Queues a request for the backend on this worker's connection of
    /// `lane`. `write_key` is the key a write changes: it is journaled when
    /// the write cannot be sent.
    ///
    /// # Errors
    /// The backend is unavailable, or the request could not be queued.
    pub async fn send(
        self: &Arc<Self>,
        lane: usize,
        bytes: &[u8],
        expect: Expect,
        write_key: Option<&[u8]>,
    ) -> Result<Pending, Error> {
        let write = |out: &mut BytesMut| out.extend_from_slice(bytes);
        self.send_with(lane, write, expect, write_key).await
    }

    /// As [`Node::send`], the request written by `write` straight into
    /// the connection's output buffer.
    ///
    /// # Errors
    /// As [`Node::send`].
    pub async fn send_with(
        self: &Arc<Self>,
        lane: usize,
        write: impl FnOnce(&mut BytesMut),
        expect: Expect,
        write_key: Option<&[u8]>,
    ) -> Result<Pending, Error> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let r = if self.gated.load(Ordering::Acquire) {
            Err(Error::ServerDown(format!("{} (rejoining)", self.addr)))
        } else if self.behind.load(Ordering::Acquire) {
            Err(Error::ServerDown(format!("{} (catching up)", self.addr)))
        } else if self.backend.is_down() {
            Err(Error::ServerDown(self.addr.clone()))
        } else {
            let (id, lanes, t) = (self.id, self.lanes, || self.timeouts());
            crate::backend::send_with(id, lanes, lane, &self.addr, t, write, expect).await
        };
        if let Err(e) = &r {
            self.failed(e, write_key);
        }
        r
    }

    /// Opens this worker's connections to it that are not open
    /// (`preconnect`); a serving node only.
    pub fn preconnect(&self) {
        if !self.backend.is_down() {
            crate::backend::preconnect(self.id, self.lanes, &self.addr, || self.timeouts());
        }
    }

    /// Waits for a queued request's replies.
    ///
    /// # Errors
    /// Timeout, a closed connection, a bad reply.
    pub async fn wait(
        self: &Arc<Self>,
        p: Pending,
        write_key: Option<&[u8]>,
    ) -> Result<Vec<Reply>, Error> {
        let mut p = p;
        let r = (&mut p).await;
        if let Some(took) = p.took() {
            self.stats.latency.record(took);
        }
        if let Err(e) = &r {
            // Marking the server down starts its probe: on the timer thread.
            let _timers = crate::timer::enter();
            self.backend.settle(&r);
            self.failed(e, write_key);
        } else {
            self.backend.settle(&r);
        }
        r
    }

    fn failed(self: &Arc<Self>, e: &Error, write_key: Option<&[u8]>) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        if matches!(e, Error::Timeout { .. }) {
            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
        }
        let unsure = e.is_server_failure() || matches!(e, Error::ServerDown(_));
        if let (Some(k), true) = (write_key, unsure) {
            self.journal_key(k);
        }
        if e.is_server_failure() {
            // It may have lost its primary too: not read again before its
            // stats say it caught up.
            self.fell_behind();
        }
    }

    /// Sends one line of the text protocol on a connection of its own
    /// (`flush_all`, whose `OK` is no meta reply) and returns the reply line.
    pub async fn text_command(&self, line: &[u8]) -> Result<Vec<u8>, String> {
        self.text_exchange(line, b"\r\n").await
    }

    /// Sends `line` on a connection of its own and reads until the reply
    /// ends with `until` (at most 1 MiB).
    pub async fn text_exchange(&self, line: &[u8], until: &[u8]) -> Result<Vec<u8>, String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let run = async {
            let mut s = kura_client::raw::open(&self.addr, &self.timeouts().client)
                .await
                .map_err(std::io::Error::other)?;
            s.write_all(line).await?;
            s.flush().await?;
            let mut got = Vec::new();
            let mut b = [0u8; 4096];
            while !got.ends_with(until) && got.len() < 1 << 20 {
                let n = s.read(&mut b).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                got.extend_from_slice(&b[..n]);
            }
            Ok::<_, std::io::Error>(got)
        };
        match crate::timer::timeout(self.request_timeout, run).await {
            Some(Ok(line)) => Ok(line),
            Some(Err(e)) => Err(format!("{}: {e}", self.addr)),
            None => Err(format!(
                "{}: no reply within {:?}",
                self.addr, self.request_timeout
            )),
        }
    }
}

/// A pool: its ring and one node per ring server, in the ring's order; or
/// the replica pools that each hold every key.
pub struct Pool {
    pub name: String,
    ring: Option<Ring>,
    pub nodes: Vec<Arc<Node>>,
    pub replicas: Vec<usize>,
    pub write: WriteMode,
    pub(crate) gutter: Option<(usize, u32)>,
    /// Which replica a read goes to first, and the turn of round-robin.
    pub read: ReadMode,
    turn: AtomicUsize,
    /// A retrieval's miss tries the next replica.
    pub miss_failover: bool,
    /// Its rate limit, if any.
    pub rate: Option<crate::rate::Bucket>,
    pub counters: Arc<PoolCounters>,
}

impl Pool {
    /// Its ring (none for a replicated pool).
    pub fn ring(&self) -> Option<&Ring> {
        self.ring.as_ref()
    }
}

/// Every pool and route of one configuration.
pub struct Router {
    pub pools: Vec<Pool>,
    routes: Vec<RouteSpec>,
    default_pool: usize,
    pub down_reply: DownReply,
    /// Every distinct node once.
    pub nodes: Vec<Arc<Node>>,
    /// No route mirrors (shadow) or warms: a one-key `get` is one `mg`.
    pub plain_reads: bool,
    /// Some pool has a rate limit.
    pub limited: bool,
    /// Some pool tries the next replica on a miss.
    pub miss_failover: bool,
    /// The addresses each pool's ring has had (membership.rs).
    seen: crate::membership::Seen,
    /// `[backend_tls]` and `[backend_auth]` as the file said them.
    secure: Secure,
}

/// `[backend_tls]` and `[backend_auth]`: a reload that changes them
/// makes every backend's connections again.
type Secure = (
    Option<crate::config::BackendTlsFile>,
    Option<kura_client::Auth>,
);

impl Router {
    /// Builds the router; nodes of `old` with the same address are kept
    /// (their connections, health and journal carry over a reload).
    ///
    /// # Errors
    /// A journal cannot be opened.
    pub fn build(cfg: &Config, old: Option<&Router>) -> std::io::Result<Router> {
        let mut by_addr: HashMap<String, Arc<Node>> = HashMap::new();
        let secure = (
            cfg.net.backend_tls_file.clone(),
            cfg.net.backend_auth.clone(),
        );
        if let Some(old) = old {
            let changed = old.secure != secure;
            for n in &old.nodes {
                if changed {
                    let mut client = cfg.health.client_config();
                    cfg.net.apply(&n.addr, &mut client);
                    n.reconfigure(client);
                }
                by_addr.insert(n.addr.clone(), n.clone());
            }
        }
        let mut nodes: Vec<Arc<Node>> = Vec::new();
        // Made now (not carried over): a journal loaded from disk.
        let mut fresh: Vec<Arc<Node>> = Vec::new();
        let mut pools = Vec::new();
        for spec in &cfg.pools {
            let mut pn = Vec::new();
            for s in spec.ring.iter().flat_map(|r| r.servers()) {
                let addr = s.address();
                let node = match by_addr.get(&addr) {
                    Some(n) => n.clone(),
                    None => {
                        let n = Node::new(&addr, cfg)?;
                        by_addr.insert(addr, n.clone());
                        fresh.push(n.clone());
                        n
                    }
                };
                if !nodes.iter().any(|x| Arc::ptr_eq(x, &node)) {
                    nodes.push(node.clone());
                }
                pn.push(node);
            }
            pools.push(Pool {
                name: spec.name.clone(),
                ring: spec.ring.clone(),
                nodes: pn,
                replicas: spec.replicas.clone(),
                write: spec.write,
                gutter: spec.gutter,
                read: spec.read,
                turn: AtomicUsize::new(0),
                miss_failover: spec.miss_failover,
                rate: spec.rate_limit.map(crate::rate::Bucket::new),
                counters: Arc::default(),
            });
        }
        for (pool, n) in pools
            .iter()
            .flat_map(|p| p.nodes.iter().map(move |n| (p, n)))
        {
            // A proxy restarted with a journal: copies its keys may have in
            // the gutter are not known, so they age out first.
            if let Some((_, ttl)) = pool.gutter {
                if fresh.iter().any(|f| Arc::ptr_eq(f, n)) && n.journal_len() != (0, false) {
                    n.gutter_wait(ttl);
                }
            }
        }
        let before = match (old, &cfg.journal_dir) {
            (Some(old), _) => {
                crate::membership::reloaded(&old.pools, &old.seen, &pools);
                old.seen.clone()
            }
            (None, Some(dir)) => {
                let record = crate::membership::Record::load(dir);
                record.restarted(&pools);
                record.seen()
            }
            (None, None) => crate::membership::Seen::default(),
        };
        let seen = crate::membership::seen(before, &pools);
        if let Some(dir) = &cfg.journal_dir {
            crate::membership::Record::of(&pools, &seen).save(dir);
        }
        for n in &nodes {
            let watched = cfg.pools.iter().zip(&pools).any(|(spec, pool)| {
                spec.rejoin == Rejoin::CaughtUp && pool.nodes.iter().any(|x| Arc::ptr_eq(x, n))
            });
            n.set_watched(watched);
        }
        Ok(Router {
            pools,
            plain_reads: cfg
                .routes
                .iter()
                .all(|r| r.shadow.is_none() && r.warm.is_none()),
            limited: cfg.pools.iter().any(|p| p.rate_limit.is_some()),
            miss_failover: cfg.pools.iter().any(|p| p.miss_failover),
            routes: cfg.routes.clone(),
            default_pool: cfg.default_pool,
            down_reply: cfg.health.down_reply,
            nodes,
            seen,
            secure,
        })
    }

    /// Whether some backend may take requests now (`/readyz`).
    pub fn any_up(&self) -> bool {
        self.nodes.iter().any(|n| n.available())
    }

    /// Starts the replay of journals loaded from disk, and the watch of
    /// the backends of `rejoin = "caught-up"` pools.
    pub fn start(&self) {
        for n in &self.nodes {
            n.start_replay();
            n.start_watch();
        }
    }
}
