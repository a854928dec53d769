//! The client's side of the wire, for kura-client and kura proxy: each
//! single-key command ([`Cmd`]) composed as a request in meta, text or
//! binary form, the replies framed out of a read buffer without I/O
//! ([`Reply`]), and a command's replies read back as its [`Outcome`]. One
//! file per protocol: [`meta`], [`text`] (with the `VALUE` runs a proxy's
//! multi-get copies whole, [`values`]) and [`binary`]; what they share is
//! in [`reply`]. Hot paths do not allocate: values are slices of the read
//! buffer, and only errors build strings.

pub mod binary;
pub mod meta;
pub mod reply;
pub mod text;
pub mod values;

use bytes::{BufMut, Bytes, BytesMut};

pub use reply::{Malformed, Reply, Status};

/// A value read from the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The bytes, shared with the read buffer (no copy).
    pub data: Bytes,
    /// The client flags stored with it.
    pub flags: u32,
    /// Its CAS unique, for a later `cas` (0 when the server has CAS
    /// disabled).
    pub cas: u64,
}

/// How a storage command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreStatus {
    /// Stored.
    Stored,
    /// Not stored: `add` of a present key, `replace`/`append`/`prepend` of
    /// an absent one.
    NotStored,
    /// `cas`: the item changed since its CAS unique was read.
    Exists,
    /// `cas`: the item is gone.
    NotFound,
}

/// The storage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
}

/// One command on one key.
#[derive(Debug, Clone, Copy)]
pub enum Cmd<'a> {
    /// get, or gat with `touch`; with `vivify` (meta only), a miss
    /// creates an empty placeholder of that TTL and returns it (`N`).
    Get {
        key: &'a [u8],
        touch: Option<u32>,
        vivify: Option<u32>,
    },
    Touch {
        key: &'a [u8],
        ttl: u32,
    },
    Store {
        key: &'a [u8],
        value: &'a [u8],
        mode: Mode,
        flags: u32,
        ttl: u32,
        cas: Option<u64>,
    },
    Delete {
        key: &'a [u8],
    },
    Arith {
        key: &'a [u8],
        incr: bool,
        delta: u64,
    },
}

/// A command's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Value(Option<Value>),
    Store(StoreStatus),
    /// delete and touch: whether the key was there.
    Found(bool),
    Counter(Option<u64>),
}

/// Why a reply is not an outcome of the command it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The server answered `ERROR`, `CLIENT_ERROR ...` or `SERVER_ERROR
    /// ...` (binary: an error status, as `SERVER_ERROR <its text>`): the
    /// line.
    Server(String),
    /// A reply that does not answer this command: what was wrong.
    Unexpected(String),
}

impl Cmd<'_> {
    /// The command's key.
    pub fn key(&self) -> &[u8] {
        match *self {
            Cmd::Get { key, .. }
            | Cmd::Touch { key, .. }
            | Cmd::Store { key, .. }
            | Cmd::Delete { key }
            | Cmd::Arith { key, .. } => key,
        }
    }

    /// The bytes of key and value: what a request's buffer must hold
    /// beyond a line's fixed part.
    pub fn len(&self) -> usize {
        match self {
            Cmd::Store { key, value, .. } => key.len() + value.len(),
            c => c.key().len(),
        }
    }

    /// Whether key and value are both empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The outcome when a quiet meta command says nothing.
    pub fn quiet_default(&self) -> Outcome {
        match self {
            Cmd::Get { .. } => Outcome::Value(None),
            Cmd::Store { .. } => Outcome::Store(StoreStatus::Stored),
            Cmd::Delete { .. } | Cmd::Touch { .. } => Outcome::Found(true),
            Cmd::Arith { .. } => Outcome::Counter(None),
        }
    }

    /// The command's name, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            Cmd::Get { .. } => "get",
            Cmd::Touch { .. } => "touch",
            Cmd::Store { .. } => "a store",
            Cmd::Delete { .. } => "delete",
            Cmd::Arith { .. } => "incr/decr",
        }
    }
}

/// Appends `n` in decimal.
pub(crate) fn num(buf: &mut BytesMut, n: impl itoa::Integer) {
    buf.put_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A storage reply's status as the store's outcome (text and meta alike).
fn store_status(s: Status) -> Option<StoreStatus> {
    Some(match s {
        Status::Done => StoreStatus::Stored,
        Status::NotStored => StoreStatus::NotStored,
        Status::Exists => StoreStatus::Exists,
        Status::NotFound => StoreStatus::NotFound,
        _ => return None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Every reply `f` frames from `s`, which must hold nothing else.
    pub(crate) fn all(
        f: fn(&mut BytesMut) -> Result<Option<Reply>, Malformed>,
        s: &[u8],
    ) -> Vec<Reply> {
        let mut buf = BytesMut::from(s);
        let mut out = Vec::new();
        while let Some(r) = f(&mut buf).unwrap_or_else(|e| panic!("{e}")) {
            out.push(r);
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        out
    }
}
