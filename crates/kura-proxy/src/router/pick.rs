//! Which pool and backend a request goes to: the route by the key's
//! longest prefix, the route's pool for the operation (`ops`, else its read
//! or write pool), the key's node on that pool's ring (or in each of its
//! replicas), and for a read of a replicated pool which replica first, by
//! the pool's `read` (first, round-robin or nearest) among those that
//! serve. A replica serves only while nothing it may have missed is
//! pending (its journal is empty, it is not down, and a kura replica is
//! caught up), so spreading reads never reaches one that failed a write
//! the client was told succeeded: that failure is journaled before the
//! client is answered (`call.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::{Op, ReadMode, RouteSpec, WriteMode};

use super::{Node, Pool, Router};

/// Where one request goes.
pub struct Target {
    /// The pool (its index in the router).
    pub pool: usize,
    /// The key's node in each replica (one node for a plain pool).
    pub nodes: Vec<Arc<Node>>,
    pub write: WriteMode,
    /// A node to mirror the request to (sampled).
    pub shadow: Option<Arc<Node>>,
    /// The warm pool's node, to fill this one from on a miss.
    pub warm: Option<Arc<Node>>,
    /// The gutter's node for the key and the TTL cap, if the pool has one.
    pub gutter: Option<(Arc<Node>, u32)>,
    /// A miss of this retrieval tries the next replica.
    pub miss_failover: bool,
}

/// A pool's counters of its routing (`stats`, /metrics).
#[derive(Default)]
pub struct PoolCounters {
    /// Retrievals sent to the next replica after a miss.
    pub miss_failovers: AtomicU64,
    /// Writes answered before any replica did (`fire-and-forget`).
    pub unawaited_writes: AtomicU64,
}

impl Pool {
    /// Its routing counters: (`stats` name, /metrics help, value).
    pub fn routing_counters(&self) -> [(&'static str, &'static str, u64); 3] {
        let c = &self.counters;
        let refused = self
            .rate
            .as_ref()
            .map_or(0, |b| b.refused.load(Ordering::Relaxed));
        [
            (
                "rate_limited",
                "Requests the pool refused over its rate limit.",
                refused,
            ),
            (
                "miss_failovers",
                "Retrievals sent to the next replica after a miss.",
                c.miss_failovers.load(Ordering::Relaxed),
            ),
            (
                "unawaited_writes",
                "Writes answered before any replica did (write = \"fire-and-forget\").",
                c.unawaited_writes.load(Ordering::Relaxed),
            ),
        ]
    }
}

impl Router {
    /// The key's node in a ring pool.
    pub(crate) fn ring_node(&self, pool: usize, key: &[u8]) -> Option<&Arc<Node>> {
        let p = &self.pools[pool];
        let ring = p.ring.as_ref()?;
        p.nodes.get(ring.index_for(key))
    }

    /// The key's node in each replica of `pool` (its own node if a ring
    /// pool), without collecting them.
    fn replicas_of<'a>(
        &'a self,
        pool: usize,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<Node>> + 'a {
        let p = &self.pools[pool];
        let own = p.replicas.is_empty().then_some(pool);
        own.into_iter()
            .chain(p.replicas.iter().copied())
            .filter_map(move |r| self.ring_node(r, key))
    }

    /// The key's node in each replica of `pool` (its own node if a ring pool).
    fn nodes_of(&self, pool: usize, key: &[u8]) -> Vec<Arc<Node>> {
        self.replicas_of(pool, key).cloned().collect()
    }

    /// The route matching `key` and the pool it names for the operation.
    pub(crate) fn pool_for(&self, key: &[u8], op: Op) -> (Option<&RouteSpec>, usize) {
        let route = self.routes.iter().find(|r| key.starts_with(&r.prefix));
        let pool = route.map_or(self.default_pool, |r| r.pool(op));
        (route, pool)
    }

    /// Takes one of `pool`'s rate-limited requests: false when it is over
    /// its limit (the request is refused).
    pub fn admit(&self, pool: usize) -> bool {
        self.pools[pool].rate.as_ref().is_none_or(|b| b.admit())
    }

    /// Where a request `op` of `key` goes: the longest matching prefix
    /// route's pool for the operation, else the default pool.
    pub fn target(&self, key: &[u8], op: Op) -> Target {
        let write = op.is_write();
        let (route, pool) = self.pool_for(key, op);
        let shadow = route
            .and_then(|r| r.shadow)
            .filter(|&(_, rate)| rate >= 1.0 || rand::random::<f64>() < rate)
            .and_then(|(p, _)| self.nodes_of(p, key).into_iter().next());
        let warm = route
            .and_then(|r| r.warm)
            .filter(|_| !write)
            .and_then(|p| self.nodes_of(p, key).into_iter().next());
        let p = &self.pools[pool];
        let gutter = p
            .gutter
            .and_then(|(g, ttl)| Some((self.ring_node(g, key)?.clone(), ttl)));
        Target {
            pool,
            nodes: self.nodes_of(pool, key),
            write: p.write,
            shadow,
            warm,
            gutter,
            miss_failover: p.miss_failover && op.is_retrieval(),
        }
    }

    /// The key's node when a request for it goes there alone: its pool is
    /// one ring without replicas, gutter or rate limit, and its route
    /// mirrors nothing (no [`Target`] to build).
    pub fn single(&self, key: &[u8], op: Op) -> Option<&Arc<Node>> {
        let (route, pool) = self.pool_for(key, op);
        let p = &self.pools[pool];
        if route.is_some_and(|r| r.shadow.is_some())
            || !p.replicas.is_empty()
            || p.gutter.is_some()
            || p.rate.is_some()
        {
            return None;
        }
        self.ring_node(pool, key)
    }

    /// The node a read `op` of `key` goes to: in a replicated pool, the
    /// replica its `read` picks among those that serve; in a ring pool,
    /// the key's server, or the gutter's node while it does not serve.
    pub fn node_for(&self, key: &[u8], op: Op) -> Arc<Node> {
        // Called for every key of every read: no allocation, no clone
        // but the one returned.
        let (_, pool) = self.pool_for(key, op);
        let p = &self.pools[pool];
        if p.replicas.is_empty() {
            if let Some(first) = self.ring_node(pool, key) {
                if first.available() {
                    return first.clone();
                }
                let gutter = p.gutter.and_then(|(g, _)| self.ring_node(g, key));
                return gutter.unwrap_or(first).clone();
            }
        }
        self.replica_for_read(p, key).clone()
    }

    /// The replica of replicated pool `p` a read of `key` goes to.
    fn replica_for_read<'a>(&'a self, p: &Pool, key: &[u8]) -> &'a Arc<Node> {
        let n = p.replicas.len().max(1);
        let at = |i: usize| p.replicas.get(i % n).and_then(|&r| self.ring_node(r, key));
        let start = match p.read {
            ReadMode::First => 0,
            ReadMode::RoundRobin => p.turn.fetch_add(1, Ordering::Relaxed) % n,
            ReadMode::Nearest => {
                let near = (0..n)
                    .filter_map(at)
                    .filter(|x| x.available())
                    .min_by_key(|x| x.stats.latency.recent_us());
                if let Some(x) = near {
                    return x;
                }
                0
            }
        };
        (0..n)
            .filter_map(|i| at(start + i))
            .find(|x| x.available())
            .or_else(|| at(start))
            .expect("every pool has a node for every key")
    }
}
