//! [`RedisNear`]: the near cache in front of Redis (seed 001's local LRU
//! before a remote store), kept coherent by Redis's client-side caching.
//! The connection speaks RESP3 and turns on `CLIENT TRACKING`: Redis then
//! remembers the keys this connection read and pushes an `invalidate`
//! message on the same connection when any client changes one, and the
//! entry is dropped from the near cache. A read whose reply races with an
//! invalidation does not fill the near cache (the write counter of
//! [`NearCache`]). When the connection drops, invalidations can no longer
//! arrive: the near cache is emptied and no longer used, and every call
//! fails until a new `RedisNear` is made.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, PushInfo, PushKind, Value as RedisValue};

use crate::error::{Error, Result};
use crate::near::{NearCache, NearConfig};

/// Near-cache counters.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    invalidations: AtomicU64,
}

/// What the push handler and the callers share.
struct State {
    near: NearCache,
    coherent: AtomicBool,
    counts: Counters,
}

impl State {
    fn on_push(&self, info: PushInfo) {
        match info.kind {
            PushKind::Invalidate => {
                match info.data.first() {
                    Some(RedisValue::Array(keys)) => {
                        for k in keys {
                            if let RedisValue::BulkString(k) = k {
                                self.near.remove(k);
                            }
                        }
                    }
                    // A flush (or anything else): drop everything.
                    _ => self.near.clear(),
                }
                // Counted once the entries are gone: a caller that saw the
                // count rise no longer reads them.
                self.counts.invalidations.fetch_add(1, Ordering::Release);
            }
            PushKind::Disconnection => {
                self.coherent.store(false, Ordering::Release);
                self.near.clear();
            }
            _ => {}
        }
    }
}

/// A Redis connection with a coherent near cache in front of it.
#[derive(Clone)]
pub struct RedisNear {
    conn: MultiplexedConnection,
    state: Arc<State>,
}

fn redis_err(e: redis::RedisError) -> Error {
    Error::Server(format!("redis: {e}"))
}

impl RedisNear {
    /// Connects to Redis at `url` (`redis://host:port`; RESP3 is asked for)
    /// and turns on tracking.
    ///
    /// # Errors
    /// The URL, the connection, or `CLIENT TRACKING ON` fails (Redis 6 or
    /// later is needed).
    pub async fn connect(url: &str, near: NearConfig) -> Result<RedisNear> {
        let url = if url.contains("protocol=") {
            url.to_string()
        } else if url.contains('?') {
            format!("{url}&protocol=resp3")
        } else {
            format!("{}/?protocol=resp3", url.trim_end_matches('/'))
        };
        let client = redis::Client::open(url).map_err(|e| Error::Config(e.to_string()))?;
        let state = Arc::new(State {
            near: NearCache::new(near),
            coherent: AtomicBool::new(true),
            counts: Counters::default(),
        });
        let handler = {
            let state = state.clone();
            move |info: PushInfo| -> std::result::Result<(), ()> {
                state.on_push(info);
                Ok(())
            }
        };
        let config = AsyncConnectionConfig::new().set_push_sender(handler);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(redis_err)?;
        redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .query_async::<()>(&mut conn)
            .await
            .map_err(redis_err)?;
        Ok(RedisNear { conn, state })
    }

    fn check(&self) -> Result<()> {
        if self.state.coherent.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(Error::ConnectionClosed("redis (tracking lost)".into()))
        }
    }

    /// Whether invalidations still arrive (false once the connection
    /// dropped).
    pub fn is_coherent(&self) -> bool {
        self.state.coherent.load(Ordering::Acquire)
    }

    /// Reads served by the near cache so far.
    pub fn near_hits(&self) -> u64 {
        self.state.counts.hits.load(Ordering::Relaxed)
    }

    /// Invalidation messages received so far.
    pub fn invalidations(&self) -> u64 {
        self.state.counts.invalidations.load(Ordering::Acquire)
    }

    /// `GET`, from the near cache when it holds the key.
    ///
    /// # Errors
    /// Redis fails, or tracking was lost.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.check()?;
        let key = key.as_ref();
        if let Some(v) = self.state.near.get(key) {
            self.state.counts.hits.fetch_add(1, Ordering::Relaxed);
            // See `Client::get`: a loop of hits yields now and then.
            tokio::task::coop::consume_budget().await;
            return Ok(Some(v.data));
        }
        let epoch = self.state.near.epoch();
        let v: Option<Vec<u8>> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err)?;
        let v = v.map(Bytes::from);
        if let Some(data) = &v {
            let value = crate::Value {
                data: data.clone(),
                flags: 0,
                cas: 0,
            };
            self.state.near.put(key, &value, epoch);
            // The connection may have dropped while the reply was on its way.
            if !self.is_coherent() {
                self.state.near.clear();
            }
        }
        Ok(v)
    }

    /// `SET`, with a TTL in seconds when given; drops the key here first.
    ///
    /// # Errors
    /// Redis fails, or tracking was lost.
    pub async fn set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Option<u64>,
    ) -> Result<()> {
        self.check()?;
        let key = key.as_ref();
        self.state.near.remove(key);
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value.as_ref());
        if let Some(t) = ttl {
            cmd.arg("EX").arg(t);
        }
        cmd.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(redis_err)
    }

    /// `DEL`; true when the key existed.
    ///
    /// # Errors
    /// Redis fails, or tracking was lost.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.check()?;
        let key = key.as_ref();
        self.state.near.remove(key);
        let n: u64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err)?;
        Ok(n > 0)
    }

    /// The Redis client id of this connection (for `CLIENT KILL ID`).
    ///
    /// # Errors
    /// Redis fails.
    pub async fn client_id(&self) -> Result<u64> {
        redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err)
    }
}
