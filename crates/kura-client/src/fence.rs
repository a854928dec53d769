//! Writes that must reach the server instance a read saw. Every connection
//! to a server is numbered in the order they were made. A [`Fence`] holds
//! a number per server, and a fenced write goes out only on a connection
//! numbered at or below it: one made no later than the connection the read
//! went on ([`Client::get_multi_vivify`] returns that fence), or than the
//! connections that existed when [`Client::fence`] was called. Such a
//! connection, still open when the write goes out, is to the process that
//! answered the read (one process listens on an address at a time, and a
//! connection does not outlive its process); a server that restarted in
//! between closed it, and a connection to the new, empty process is newer
//! than the fence, so the write is refused ([`crate::Error::Fenced`])
//! without being sent. kura-record fences its fills this way: a CAS unique
//! read from a server before it restarted is never compared with the new
//! process's CAS uniques, which start again from 1.
//!
//! [`Client::get_multi_vivify`] is the read such fills follow: on a miss
//! the server creates an empty placeholder (meta `N`) and returns its CAS,
//! so the fill is a CAS, refused if anything (an invalidation, a
//! `flush_all`) changed or removed the key meanwhile.

use crate::client::{Client, Route};
use crate::error::{Error, Result};
use crate::ops::SetOptions;
use kura_proto::client::{Cmd, Mode, Outcome, StoreStatus, Value};

/// The connections made to each server when the fence was taken.
#[derive(Debug, Clone, Default)]
pub struct Fence {
    main: Vec<u64>,
    gutter: Vec<u64>,
}

impl Fence {
    /// Raises a route's number to `n`.
    pub(crate) fn note(&mut self, route: Route, n: u64) {
        let (v, i) = match route {
            Route::Primary(i) => (&mut self.main, i),
            Route::Gutter(i) => (&mut self.gutter, i),
        };
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        v[i] = v[i].max(n);
    }

    /// The number for a route's server (0 for one the fence does not know:
    /// no connection passes).
    pub(crate) fn of(&self, route: Route) -> u64 {
        let (v, i) = match route {
            Route::Primary(i) => (&self.main, i),
            Route::Gutter(i) => (&self.gutter, i),
        };
        v.get(i).copied().unwrap_or(0)
    }
}

impl Client {
    /// A fence of the connections open now: take it before the reads that
    /// fenced writes depend on (a read on a connection made after it has
    /// its writes refused).
    pub fn fence(&self) -> Fence {
        let counts = |pools: &[std::sync::Arc<crate::pool::ServerPool>]| {
            pools.iter().map(|p| p.connects()).collect()
        };
        Fence {
            main: counts(&self.inner.main.pools),
            gutter: self
                .inner
                .gutter
                .as_ref()
                .map(|(g, _)| counts(&g.pools))
                .unwrap_or_default(),
        }
    }

    /// [`Client::get_multi`] where each miss creates an empty placeholder
    /// (flags 0) living `ttl` seconds and returns it with its CAS (meta
    /// `N`; other protocols read plainly and return misses), and the fence
    /// of the connections the reads went on, for the fills that follow.
    /// The near cache is neither read nor filled.
    pub async fn get_multi_vivify<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        ttl: u32,
    ) -> (Vec<Result<Option<Value>>>, Fence) {
        let vivify = self.inner.cfg.protocol.is_meta().then_some(ttl.max(1));
        let cmds = keys
            .iter()
            .map(|k| Cmd::Get {
                key: k.as_ref(),
                touch: None,
                vivify,
            })
            .collect();
        let (out, fence) = self.run_multi_fenced(cmds, None).await;
        let values = out
            .into_iter()
            .map(|r| {
                r.and_then(|o| match o {
                    Outcome::Value(v) => Ok(v),
                    o => Err(Error::Server(format!("unexpected outcome {o:?}"))),
                })
            })
            .collect();
        (values, fence)
    }

    /// [`Client::add_multi`], fenced.
    pub async fn add_multi_fenced<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V)],
        opts: impl Into<SetOptions>,
        fence: &Fence,
    ) -> Vec<Result<bool>> {
        let opts = opts.into();
        let cmds = items
            .iter()
            .map(|(k, v)| store(k.as_ref(), v.as_ref(), Mode::Add, opts, None))
            .collect();
        let out = self.run_multi_fenced(cmds, Some(fence)).await.0;
        for (k, _) in items {
            self.forget(k.as_ref());
        }
        out.into_iter()
            .map(|r| r.map(|o| o == Outcome::Store(StoreStatus::Stored)))
            .collect()
    }

    /// [`Client::cas_multi`], fenced.
    pub async fn cas_multi_fenced<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V, u64)],
        opts: impl Into<SetOptions>,
        fence: &Fence,
    ) -> Vec<Result<StoreStatus>> {
        let opts = opts.into();
        let cmds = items
            .iter()
            .map(|(k, v, cas)| store(k.as_ref(), v.as_ref(), Mode::Set, opts, Some(*cas)))
            .collect();
        let out = self.run_multi_fenced(cmds, Some(fence)).await.0;
        for (k, _, _) in items {
            self.forget(k.as_ref());
        }
        out.into_iter()
            .map(|r| {
                r.and_then(|o| match o {
                    Outcome::Store(s) => Ok(s),
                    o => Err(Error::Server(format!("unexpected outcome {o:?}"))),
                })
            })
            .collect()
    }

    /// [`Client::cas`], fenced.
    ///
    /// # Errors
    /// [`Error::Fenced`], or as [`Client::cas`].
    pub async fn cas_fenced(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        cas: u64,
        opts: impl Into<SetOptions>,
        fence: &Fence,
    ) -> Result<StoreStatus> {
        let items = [(key.as_ref(), value.as_ref(), cas)];
        self.cas_multi_fenced(&items, opts, fence)
            .await
            .pop()
            .unwrap_or_else(|| Err(Error::Server("no result".into())))
    }
}

fn store<'a>(
    key: &'a [u8],
    value: &'a [u8],
    mode: Mode,
    opts: SetOptions,
    cas: Option<u64>,
) -> Cmd<'a> {
    Cmd::Store {
        key,
        value,
        mode,
        flags: opts.flags,
        ttl: opts.ttl,
        cas,
    }
}
