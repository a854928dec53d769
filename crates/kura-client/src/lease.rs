//! Stampede protection with memcached's meta leases. `get_or_fill` reads
//! with `N` (on a miss the server creates an empty placeholder and gives
//! this caller the win token `W`; everyone after gets the placeholder with
//! `Z`, "someone is already filling it"), and with `R` when asked (an item
//! about to expire hands out one `W` early while still being served). The
//! winner computes the value and stores it under the CAS it read, so a
//! newer write is never overwritten. A loser waits briefly for the
//! winner's value, polling with a growing delay; a stale item (`X`, after
//! [`Client::invalidate`]) is served as it is while its winner
//! recomputes.

use std::future::Future;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::client::{Client, Route};
use crate::config::DownPolicy;
use crate::conn::Expect;
use crate::error::{Error, Result};
use crate::key::check_key;
use crate::ops::SetOptions;
use kura_proto::client::{Cmd, Mode, Value};
use kura_proto::client::{Reply, Status};

/// Longest delay between two polls of a loser.
const POLL_MAX: Duration = Duration::from_millis(100);

/// Where [`Client::get_or_fill`]'s value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The cache had it.
    Hit,
    /// This caller computed it (it won the lease, or waited in vain).
    Filled,
    /// The cache's stale value, served while another caller recomputes.
    Stale,
}

/// A value from [`Client::get_or_fill`].
#[derive(Debug, Clone)]
pub struct Filled {
    pub value: Value,
    pub origin: Origin,
}

/// Settings of one [`Client::get_or_fill`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FillOptions {
    /// TTL and flags of the value stored.
    pub set: SetOptions,
    /// Recache: when the item has fewer than this many seconds left, one
    /// reader gets to recompute it early (meta `R`); 0 is off.
    pub recache: u32,
}

impl From<u32> for FillOptions {
    fn from(ttl: u32) -> FillOptions {
        FillOptions {
            set: ttl.into(),
            recache: 0,
        }
    }
}

impl Client {
    async fn meta_call(&self, key: &[u8], line: impl FnOnce(&mut BytesMut, u32)) -> Result<Reply> {
        if !self.inner.cfg.protocol.is_meta() {
            return Err(Error::NeedsMeta("leases"));
        }
        check_key(key)?;
        let route = self.route(key)?;
        if matches!(route, Route::Gutter(_)) {
            // Leases on the gutter would outlive its short TTL.
            return Err(Error::ServerDown(self.server_for(key)));
        }
        let pool = self.pool(route);
        let o = self.next_opaque();
        let mut buf = BytesMut::with_capacity(key.len() + 64);
        line(&mut buf, o);
        let mut replies = pool.call(buf.freeze(), Expect::Meta(o)).await?;
        match replies.pop() {
            Some(r) if r.status == Status::Error => Err(Error::Server(r.error_text())),
            Some(r) => Ok(r),
            None => Err(Error::protocol(pool.addr(), "no reply")),
        }
    }

    /// Reads `key`, or computes it with `fill` when it is missing, such
    /// that of many concurrent callers only one computes (the lease
    /// winner) while the others wait up to [`crate::Config::lease_wait`]
    /// for its value. A caller that waited in vain computes the value
    /// itself and does not store it. Meta protocol only.
    ///
    /// Under [`DownPolicy::Miss`], a down server's key is computed and
    /// not stored.
    ///
    /// # Errors
    /// The fill function's error ([`Error::Server`] with its text), or
    /// as [`Client::get`].
    pub async fn get_or_fill<F, Fut, E>(
        &self,
        key: impl AsRef<[u8]>,
        opts: impl Into<FillOptions>,
        fill: F,
    ) -> Result<Filled>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = std::result::Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        let key = key.as_ref();
        let opts = opts.into();
        let lease_ttl = self.inner.cfg.lease_ttl.max(1);
        let deadline = tokio::time::Instant::now() + self.inner.cfg.lease_wait;
        let mut delay = Duration::from_millis(5);
        loop {
            let r = self.meta_call(key, |b, o| {
                b.put_slice(b"mg ");
                b.put_slice(key);
                b.put_slice(format!(" v f c N{lease_ttl}").as_bytes());
                if opts.recache > 0 {
                    b.put_slice(format!(" R{}", opts.recache).as_bytes());
                }
                b.put_slice(format!(" O{o}\r\n").as_bytes());
            });
            let r = match r.await {
                Ok(r) => r,
                // Under the miss policy a down server's key is computed,
                // as for any miss, and not stored.
                Err(Error::ServerDown(_)) if self.inner.cfg.down_policy == DownPolicy::Miss => {
                    let data = fill()
                        .await
                        .map_err(|e| Error::Server(format!("fill: {e}")))?;
                    return Ok(filled(data, opts.set.flags, Origin::Filled));
                }
                Err(e) => return Err(e),
            };
            let value = Value {
                data: r.value.clone().unwrap_or_default(),
                flags: r.number(b'f').unwrap_or(0),
                cas: r.number(b'c').unwrap_or(0),
            };
            let (won, stale, pending) = (r.has(b'W'), r.has(b'X'), r.has(b'Z'));
            if r.status == Status::Value && won {
                let data = fill()
                    .await
                    .map_err(|e| Error::Server(format!("fill: {e}")))?;
                self.store_won(key, &data, value.cas, opts.set).await;
                return Ok(filled(data, opts.set.flags, Origin::Filled));
            }
            if r.status == Status::Value && stale {
                return Ok(Filled {
                    value,
                    origin: Origin::Stale,
                });
            }
            // A placeholder another caller is filling: empty, flags 0, Z.
            let placeholder = pending && value.data.is_empty() && value.flags == 0;
            if r.status == Status::Value && !placeholder {
                return Ok(Filled {
                    value,
                    origin: Origin::Hit,
                });
            }
            if r.status != Status::Value && r.status != Status::Miss {
                return Err(Error::protocol(
                    &self.server_for(key),
                    "unexpected lease reply",
                ));
            }
            if tokio::time::Instant::now() + delay > deadline || r.status == Status::Miss {
                // Waited long enough, or a server that does not vivify.
                let data = fill()
                    .await
                    .map_err(|e| Error::Server(format!("fill: {e}")))?;
                return Ok(filled(data, opts.set.flags, Origin::Filled));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(POLL_MAX);
        }
    }

    /// The winner's store: under the placeholder's CAS, so a write that
    /// came meanwhile wins. Its failure does not fail the caller, who has
    /// the value.
    async fn store_won(&self, key: &[u8], data: &[u8], cas: u64, set: SetOptions) {
        let cmd = Cmd::Store {
            key,
            value: data,
            mode: Mode::Set,
            flags: set.flags,
            ttl: set.ttl,
            cas: Some(cas),
        };
        if let Err(e) = self.run(cmd).await {
            tracing::debug!(%e, "storing a lease winner's value failed");
        }
        self.forget(key);
    }

    /// Marks `key` stale instead of deleting it (meta `md <key> I T<ttl>`):
    /// for `stale_ttl` seconds readers of [`Client::get_or_fill`] get the
    /// old value while one of them recomputes. False when absent.
    ///
    /// # Errors
    /// As [`Client::get`]; [`Error::NeedsMeta`] in text mode.
    pub async fn invalidate(&self, key: impl AsRef<[u8]>, stale_ttl: u32) -> Result<bool> {
        let key = key.as_ref();
        let r = self
            .meta_call(key, |b, o| {
                b.put_slice(b"md ");
                b.put_slice(key);
                b.put_slice(format!(" I T{stale_ttl} O{o}\r\n").as_bytes());
            })
            .await;
        self.forget(key);
        match r?.status {
            Status::Done => Ok(true),
            Status::NotFound => Ok(false),
            s => Err(Error::protocol(
                &self.server_for(key),
                format!("{s:?} after md"),
            )),
        }
    }
}

fn filled(data: Bytes, flags: u32, origin: Origin) -> Filled {
    Filled {
        value: Value {
            data,
            flags,
            cas: 0,
        },
        origin,
    }
}
