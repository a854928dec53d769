//! [`Client`] and [`ClientBuilder`]: the servers on their ring, the
//! optional gutter pool, the near cache, and routing a key to the pool
//! that serves it. A down server's keys never move to another server of
//! the ring (that would serve stale data when it comes back); they fail
//! fast, or go to the gutter pool when one is configured.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kura_ring::{Kind, Ring, Server};

use crate::config::{Config, DownPolicy, Protocol};
use crate::conn::Expect;
use crate::error::{Error, Result};
use crate::key::{check_item, check_key};
use crate::near::{NearCache, NearConfig};
use crate::pool::ServerPool;
use kura_proto::client::Reply;
use kura_proto::client::{Cmd, Outcome};

/// A ring of servers and their pools.
pub(crate) struct Cluster {
    pub ring: Ring,
    pub pools: Vec<Arc<ServerPool>>,
}

impl Cluster {
    fn new(
        kind: Kind,
        servers: &[String],
        cfg: &Arc<Config>,
        near: Option<&Arc<NearCache>>,
    ) -> Result<Cluster> {
        let servers: Vec<Server> = servers
            .iter()
            .map(|s| s.parse().map_err(|e| Error::Config(format!("{e}"))))
            .collect::<Result<_>>()?;
        let ring = Ring::new(kind, servers).map_err(|e| Error::Config(e.to_string()))?;
        let pools = ring
            .servers()
            .iter()
            .map(|s| ServerPool::new(s.address(), cfg.clone(), near.cloned()))
            .collect();
        Ok(Cluster { ring, pools })
    }
}

/// Where a key's requests go.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(crate) enum Route {
    Primary(usize),
    /// The gutter pool's server, because the primary is down.
    Gutter(usize),
}

pub(crate) struct Inner {
    pub cfg: Arc<Config>,
    pub main: Cluster,
    pub gutter: Option<(Cluster, u32)>,
    pub near: Option<Arc<NearCache>>,
    opaque: AtomicU32,
}

/// An async memcached client over a ring of servers. Cheap to clone
/// (clones share connections); every method can be called from many tasks
/// at once, and concurrent requests to one server share its connections.
///
/// ```no_run
/// # async fn demo() -> kura_client::Result<()> {
/// let client = kura_client::Client::builder(["127.0.0.1:11211", "127.0.0.1:11212"]).build()?;
/// client.set("greeting", "hello", 60).await?;
/// assert_eq!(client.get("greeting").await?.map(|v| v.data), Some("hello".into()));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

/// Builds a [`Client`]: servers as `HOST[:PORT[:WEIGHT]]` (kura-ring's
/// syntax), settings in [`Config`].
pub struct ClientBuilder {
    servers: Vec<String>,
    cfg: Config,
    gutter: Option<(Vec<String>, u32)>,
    near: Option<NearConfig>,
}

impl ClientBuilder {
    /// Replaces every setting.
    pub fn config(mut self, cfg: Config) -> Self {
        self.cfg = cfg;
        self
    }

    /// Changes settings in place: `.configure(|c| c.chunk_keys = 1000)`.
    pub fn configure(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.cfg);
        self
    }

    /// The protocol (meta by default).
    pub fn protocol(self, p: Protocol) -> Self {
        self.configure(|c| c.protocol = p)
    }

    /// The ring kind (libmemcached's ketama by default).
    pub fn ring(self, kind: Kind) -> Self {
        self.configure(|c| c.ring = kind)
    }

    /// Connect and request timeouts.
    pub fn timeouts(self, connect: Duration, request: Duration) -> Self {
        self.configure(|c| {
            c.connect_timeout = connect;
            c.request_timeout = request;
        })
    }

    /// TLS to every server, with `tls`'s files (read here, once): the CA
    /// (or the system's roots), the server name (each server's host
    /// without one) and a client certificate.
    ///
    /// # Errors
    /// A file that cannot be read or used, named in the error.
    pub fn tls(self, tls: &kura_tls::ClientTls) -> Result<Self> {
        let loaded = tls.load().map_err(|e| Error::Config(e.to_string()))?;
        Ok(self.configure(|c| c.tls = Some(loaded)))
    }

    /// The login every new connection makes before its first request:
    /// SASL PLAIN (binary protocol) or memcached's ASCII authentication.
    pub fn auth(self, auth: crate::Auth) -> Self {
        self.configure(|c| c.auth = Some(auth))
    }

    /// What reads of a down server's keys return.
    pub fn down_policy(self, p: DownPolicy) -> Self {
        self.configure(|c| c.down_policy = p)
    }

    /// A gutter pool: while a server is down, its keys are read from and
    /// written to these servers instead, every write with a TTL of at most
    /// `ttl` seconds, so what the gutter holds ages out quickly.
    pub fn gutter<S: AsRef<str>>(mut self, servers: impl IntoIterator<Item = S>, ttl: u32) -> Self {
        let servers = servers
            .into_iter()
            .map(|s| s.as_ref().to_string())
            .collect();
        self.gutter = Some((servers, ttl.max(1)));
        self
    }

    /// A near cache (an in-process kura-store) in front of the servers.
    pub fn near_cache(mut self, near: NearConfig) -> Self {
        self.near = Some(near);
        self
    }

    /// The client. Connections are made on first use.
    ///
    /// # Errors
    /// [`Error::Config`]: no servers, a server that does not parse, or a
    /// ring that cannot place them.
    pub fn build(self) -> Result<Client> {
        let cfg = Arc::new(self.cfg);
        if cfg.chunk_keys == 0 {
            return Err(Error::Config("chunk_keys must be at least 1".into()));
        }
        let near = self.near.map(|n| Arc::new(NearCache::new(n)));
        let main = Cluster::new(cfg.ring, &self.servers, &cfg, near.as_ref())?;
        let gutter = match self.gutter {
            Some((servers, ttl)) => {
                Some((Cluster::new(cfg.ring, &servers, &cfg, near.as_ref())?, ttl))
            }
            None => None,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                cfg,
                main,
                gutter,
                near,
                opaque: AtomicU32::new(0),
            }),
        })
    }
}

impl Client {
    /// Starts building a client of these servers (`HOST[:PORT[:WEIGHT]]`).
    pub fn builder<S: AsRef<str>>(servers: impl IntoIterator<Item = S>) -> ClientBuilder {
        ClientBuilder {
            servers: servers
                .into_iter()
                .map(|s| s.as_ref().to_string())
                .collect(),
            cfg: Config::default(),
            gutter: None,
            near: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.inner.cfg
    }

    /// Invalidations the near cache heard from servers so far (`IV` lines:
    /// keys and flushes); 0 without a near cache.
    pub fn near_invalidations(&self) -> u64 {
        self.inner.near.as_ref().map_or(0, |n| n.invalidations())
    }

    /// The address (`host:port`) of the server that holds `key`.
    pub fn server_for(&self, key: impl AsRef<[u8]>) -> String {
        self.inner.main.ring.server_for(key.as_ref()).address()
    }

    /// Whether the server at `index` of the list given is marked down.
    pub fn is_down(&self, index: usize) -> bool {
        self.inner
            .main
            .pools
            .get(index)
            .is_some_and(|p| p.is_down())
    }

    pub(crate) fn route(&self, key: &[u8]) -> Result<Route> {
        let i = self.inner.main.ring.index_for(key);
        let pool = &self.inner.main.pools[i];
        if !pool.is_down() {
            return Ok(Route::Primary(i));
        }
        match &self.inner.gutter {
            Some((g, _)) => Ok(Route::Gutter(g.ring.index_for(key))),
            None => Err(Error::ServerDown(pool.addr().to_string())),
        }
    }

    pub(crate) fn pool(&self, route: Route) -> &Arc<ServerPool> {
        match (route, &self.inner.gutter) {
            (Route::Gutter(i), Some((g, _))) => &g.pools[i],
            (Route::Primary(i), _) | (Route::Gutter(i), None) => &self.inner.main.pools[i],
        }
    }

    /// The command as sent on `route`: TTLs capped on the gutter pool.
    pub(crate) fn for_route<'a>(&self, cmd: Cmd<'a>, route: Route) -> Cmd<'a> {
        let Some((_, cap)) = self
            .inner
            .gutter
            .as_ref()
            .filter(|_| matches!(route, Route::Gutter(_)))
        else {
            return cmd;
        };
        let capped = |t: u32| if t == 0 { *cap } else { t.min(*cap) };
        match cmd {
            Cmd::Store {
                key,
                value,
                mode,
                flags,
                ttl,
                cas,
            } => Cmd::Store {
                key,
                value,
                mode,
                flags,
                ttl: capped(ttl),
                cas,
            },
            Cmd::Touch { key, ttl } => Cmd::Touch {
                key,
                ttl: capped(ttl),
            },
            Cmd::Get { key, touch, vivify } => Cmd::Get {
                key,
                touch: touch.map(capped),
                vivify: vivify.map(capped),
            },
            other => other,
        }
    }

    pub(crate) fn next_opaque(&self) -> u32 {
        self.inner.opaque.fetch_add(1, Ordering::Relaxed)
    }

    /// Checks what a command would send.
    pub(crate) fn check(&self, cmd: &Cmd<'_>) -> Result<()> {
        match cmd {
            Cmd::Store { key, value, .. } => check_item(key, value, self.inner.cfg.max_value_len),
            c => check_key(c.key()).map_err(Error::from),
        }
    }

    /// A down server's read as the down policy has it.
    pub(crate) fn down_read(&self, cmd: &Cmd<'_>, e: Error) -> Result<Outcome> {
        match (e, cmd, self.inner.cfg.down_policy) {
            (Error::ServerDown(_), Cmd::Get { .. }, DownPolicy::Miss) => Ok(Outcome::Value(None)),
            (e, _, _) => Err(e),
        }
    }

    /// Runs one command on its key's server.
    pub(crate) async fn run(&self, cmd: Cmd<'_>) -> Result<Outcome> {
        self.check(&cmd)?;
        let route = match self.route(cmd.key()) {
            Ok(r) => r,
            Err(e) => return self.down_read(&cmd, e),
        };
        let cmd = self.for_route(cmd, route);
        let pool = self.pool(route);
        let mut buf = BytesMut::with_capacity(64 + cmd.len());
        let server = pool.addr();
        let result = match self.inner.cfg.protocol {
            Protocol::Text => {
                cmd.text(&mut buf);
                let replies = pool.call(buf.freeze(), Expect::Text(1)).await;
                replies.and_then(|r| cmd.read_text(&r).map_err(|e| Error::read(server, e)))
            }
            protocol => {
                let o = self.next_opaque();
                if protocol == Protocol::Binary {
                    cmd.binary(&mut buf, o, false);
                } else {
                    cmd.meta(&mut buf, o, false);
                }
                let replies = pool.call(buf.freeze(), Expect::Meta(o)).await;
                replies.and_then(|r| match r.first() {
                    Some(r) => read_one(protocol, &cmd, r, server),
                    None => Err(Error::protocol(server, "no reply")),
                })
            }
        };
        result.or_else(|e| self.down_read(&cmd, e))
    }
}

/// Reads a meta or binary reply to `cmd`.
pub(crate) fn read_one(
    protocol: Protocol,
    cmd: &Cmd<'_>,
    r: &Reply,
    server: &str,
) -> Result<Outcome> {
    if protocol == Protocol::Binary {
        cmd.read_binary(r).map_err(|e| Error::read(server, e))
    } else {
        cmd.read_meta(r).map_err(|e| Error::read(server, e))
    }
}
