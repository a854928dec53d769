//! The single-key operations of [`Client`]. With a near cache, reads are
//! answered from it when they can be and fill it when they cannot, and
//! every write through this client drops the key from it.

use crate::client::Client;
use crate::error::{Error, Result};
use kura_proto::client::{Cmd, Mode, Outcome, StoreStatus, Value};

/// TTL and client flags of a write. A number converts to a TTL in
/// seconds (0: no expiry; memcached's rules for larger values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetOptions {
    pub ttl: u32,
    pub flags: u32,
}

impl From<u32> for SetOptions {
    fn from(ttl: u32) -> SetOptions {
        SetOptions { ttl, flags: 0 }
    }
}

impl SetOptions {
    /// A TTL in seconds and client flags.
    pub fn new(ttl: u32, flags: u32) -> SetOptions {
        SetOptions { ttl, flags }
    }
}

fn unexpected(o: Outcome) -> Error {
    Error::Server(format!("unexpected outcome {o:?}"))
}

impl Client {
    /// Reads a key: its value, flags and CAS unique, or None on a miss.
    ///
    /// # Errors
    /// A bad key; the server is down (unless the down policy is
    /// [`crate::DownPolicy::Miss`]), times out or fails.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        let key = key.as_ref();
        let near = self.inner.near.as_ref();
        if let Some(v) = near.and_then(|n| n.get(key)) {
            // A hit awaits nothing: spend tokio's cooperative budget so that
            // a loop of hits yields now and then, and the connection task
            // that applies the server's invalidations runs (on a
            // current-thread runtime it would never run otherwise).
            tokio::task::coop::consume_budget().await;
            return Ok(Some(v));
        }
        let epoch = near.map_or(0, |n| n.epoch());
        let v = self
            .value(Cmd::Get {
                key,
                touch: None,
                vivify: None,
            })
            .await?;
        if let (Some(near), Some(v)) = (near, &v) {
            near.put(key, v, epoch);
        }
        Ok(v)
    }

    /// Reads a key and sets its TTL (`gat`).
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn gat(&self, key: impl AsRef<[u8]>, ttl: u32) -> Result<Option<Value>> {
        let key = key.as_ref();
        self.value(Cmd::Get {
            key,
            touch: Some(ttl),
            vivify: None,
        })
        .await
    }

    async fn value(&self, cmd: Cmd<'_>) -> Result<Option<Value>> {
        match self.run(cmd).await? {
            Outcome::Value(v) => Ok(v),
            o => Err(unexpected(o)),
        }
    }

    async fn store(&self, cmd: Cmd<'_>) -> Result<StoreStatus> {
        let out = self.run(cmd).await;
        self.forget(cmd.key());
        match out? {
            Outcome::Store(s) => Ok(s),
            o => Err(unexpected(o)),
        }
    }

    /// Drops `key` from the near cache, if there is one.
    pub(crate) fn forget(&self, key: &[u8]) {
        if let Some(near) = &self.inner.near {
            near.remove(key);
        }
    }

    async fn store_mode(
        &self,
        mode: Mode,
        key: &[u8],
        value: &[u8],
        opts: SetOptions,
    ) -> Result<bool> {
        let cmd = Cmd::Store {
            key,
            value,
            mode,
            flags: opts.flags,
            ttl: opts.ttl,
            cas: None,
        };
        Ok(self.store(cmd).await? == StoreStatus::Stored)
    }

    /// Stores a value. Returns whether it was stored.
    ///
    /// # Errors
    /// A bad key, a value over [`crate::Config::max_value_len`], a server
    /// error or failure.
    pub async fn set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: impl Into<SetOptions>,
    ) -> Result<bool> {
        self.store_mode(Mode::Set, key.as_ref(), value.as_ref(), opts.into())
            .await
    }

    /// Stores a value only if the key is absent.
    ///
    /// # Errors
    /// As [`Client::set`].
    pub async fn add(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: impl Into<SetOptions>,
    ) -> Result<bool> {
        self.store_mode(Mode::Add, key.as_ref(), value.as_ref(), opts.into())
            .await
    }

    /// Stores a value only if the key is present.
    ///
    /// # Errors
    /// As [`Client::set`].
    pub async fn replace(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: impl Into<SetOptions>,
    ) -> Result<bool> {
        self.store_mode(Mode::Replace, key.as_ref(), value.as_ref(), opts.into())
            .await
    }

    /// Appends to a present value (its flags and TTL stay).
    ///
    /// # Errors
    /// As [`Client::set`].
    pub async fn append(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        let opts = SetOptions::default();
        self.store_mode(Mode::Append, key.as_ref(), value.as_ref(), opts)
            .await
    }

    /// Prepends to a present value.
    ///
    /// # Errors
    /// As [`Client::set`].
    pub async fn prepend(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        let opts = SetOptions::default();
        self.store_mode(Mode::Prepend, key.as_ref(), value.as_ref(), opts)
            .await
    }

    /// Stores a value if the item's CAS unique is still `cas` (from
    /// [`Value::cas`]).
    ///
    /// # Errors
    /// As [`Client::set`].
    pub async fn cas(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        cas: u64,
        opts: impl Into<SetOptions>,
    ) -> Result<StoreStatus> {
        let opts = opts.into();
        self.store(Cmd::Store {
            key: key.as_ref(),
            value: value.as_ref(),
            mode: Mode::Set,
            flags: opts.flags,
            ttl: opts.ttl,
            cas: Some(cas),
        })
        .await
    }

    async fn arith(&self, key: &[u8], incr: bool, delta: u64) -> Result<Option<u64>> {
        let out = self.run(Cmd::Arith { key, incr, delta }).await;
        self.forget(key);
        match out? {
            Outcome::Counter(n) => Ok(n),
            o => Err(unexpected(o)),
        }
    }

    /// Adds `delta` to a decimal counter (wrapping at 2^64); None when the
    /// key is absent.
    ///
    /// # Errors
    /// The value is not a number ([`Error::Server`]), or as [`Client::get`].
    pub async fn incr(&self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>> {
        self.arith(key.as_ref(), true, delta).await
    }

    /// Subtracts `delta` from a counter (stopping at 0); None when absent.
    ///
    /// # Errors
    /// As [`Client::incr`].
    pub async fn decr(&self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>> {
        self.arith(key.as_ref(), false, delta).await
    }

    /// Sets a key's TTL; false when the key is absent.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn touch(&self, key: impl AsRef<[u8]>, ttl: u32) -> Result<bool> {
        let key = key.as_ref();
        match self.run(Cmd::Touch { key, ttl }).await? {
            Outcome::Found(f) => Ok(f),
            o => Err(unexpected(o)),
        }
    }

    /// Deletes a key; false when it was absent.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        let out = self.run(Cmd::Delete { key }).await;
        self.forget(key);
        match out? {
            Outcome::Found(f) => Ok(f),
            o => Err(unexpected(o)),
        }
    }
}
