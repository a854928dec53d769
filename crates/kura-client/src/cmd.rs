//! The single-key commands, each written in meta or text form and read
//! back from its replies; a multi-operation is many of these to one
//! server in one batch. Quiet (`q`) meta forms answer only what is not
//! the common case, so [`Cmd::quiet_default`] is the outcome of silence.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::reply::{parse_num, Reply, Status};

/// A value read from the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The bytes, shared with the read buffer (no copy).
    pub data: Bytes,
    /// The client flags stored with it.
    pub flags: u32,
    /// Its CAS unique, for [`crate::Client::cas`] (0 when the server has
    /// CAS disabled).
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
pub(crate) enum Mode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
}

/// One command on one key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cmd<'a> {
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
pub(crate) enum Outcome {
    Value(Option<Value>),
    Store(StoreStatus),
    /// delete and touch: whether the key was there.
    Found(bool),
    Counter(Option<u64>),
}

fn num(buf: &mut BytesMut, n: impl itoa::Integer) {
    buf.put_slice(itoa::Buffer::new().format(n).as_bytes());
}

impl Cmd<'_> {
    pub fn key(&self) -> &[u8] {
        match *self {
            Cmd::Get { key, .. }
            | Cmd::Touch { key, .. }
            | Cmd::Store { key, .. }
            | Cmd::Delete { key }
            | Cmd::Arith { key, .. } => key,
        }
    }

    /// Appends the meta form, with `O<opaque>` and `q` when `quiet`.
    pub fn meta(&self, buf: &mut BytesMut, opaque: u32, quiet: bool) {
        let key = self.key();
        match *self {
            Cmd::Get { touch, vivify, .. } => {
                buf.put_slice(b"mg ");
                buf.put_slice(key);
                buf.put_slice(b" v f c");
                if let Some(t) = touch {
                    buf.put_slice(b" T");
                    num(buf, t);
                }
                if let Some(t) = vivify {
                    buf.put_slice(b" N");
                    num(buf, t);
                }
            }
            Cmd::Touch { ttl, .. } => {
                buf.put_slice(b"mg ");
                buf.put_slice(key);
                buf.put_slice(b" T");
                num(buf, ttl);
            }
            Cmd::Store {
                value,
                mode,
                flags,
                ttl,
                cas,
                ..
            } => {
                buf.put_slice(b"ms ");
                buf.put_slice(key);
                buf.put_u8(b' ');
                num(buf, value.len());
                buf.put_slice(b" F");
                num(buf, flags);
                buf.put_slice(b" T");
                num(buf, ttl);
                buf.put_slice(match mode {
                    Mode::Set => b" MS",
                    Mode::Add => b" ME",
                    Mode::Replace => b" MR",
                    Mode::Append => b" MA",
                    Mode::Prepend => b" MP",
                });
                if let Some(c) = cas {
                    buf.put_slice(b" C");
                    num(buf, c);
                }
            }
            Cmd::Delete { .. } => {
                buf.put_slice(b"md ");
                buf.put_slice(key);
            }
            Cmd::Arith { incr, delta, .. } => {
                buf.put_slice(b"ma ");
                buf.put_slice(key);
                buf.put_slice(if incr { b" v MI D" } else { b" v MD D" });
                num(buf, delta);
            }
        }
        buf.put_slice(b" O");
        num(buf, opaque);
        if quiet {
            buf.put_slice(b" q");
        }
        buf.put_slice(b"\r\n");
        if let Cmd::Store { value, .. } = self {
            buf.put_slice(value);
            buf.put_slice(b"\r\n");
        }
    }

    /// Appends the text form (acknowledged).
    pub fn text(&self, buf: &mut BytesMut) {
        let key = self.key();
        match *self {
            Cmd::Get { touch: None, .. } => {
                buf.put_slice(b"gets ");
                buf.put_slice(key);
            }
            Cmd::Get { touch: Some(t), .. } => {
                buf.put_slice(b"gats ");
                num(buf, t);
                buf.put_u8(b' ');
                buf.put_slice(key);
            }
            Cmd::Touch { ttl, .. } => {
                buf.put_slice(b"touch ");
                buf.put_slice(key);
                buf.put_u8(b' ');
                num(buf, ttl);
            }
            Cmd::Store {
                value,
                mode,
                flags,
                ttl,
                cas,
                ..
            } => {
                buf.put_slice(match (mode, cas) {
                    (_, Some(_)) => &b"cas "[..],
                    (Mode::Set, _) => b"set ",
                    (Mode::Add, _) => b"add ",
                    (Mode::Replace, _) => b"replace ",
                    (Mode::Append, _) => b"append ",
                    (Mode::Prepend, _) => b"prepend ",
                });
                buf.put_slice(key);
                buf.put_u8(b' ');
                num(buf, flags);
                buf.put_u8(b' ');
                num(buf, ttl);
                buf.put_u8(b' ');
                num(buf, value.len());
                if let Some(c) = cas {
                    buf.put_u8(b' ');
                    num(buf, c);
                }
            }
            Cmd::Delete { .. } => {
                buf.put_slice(b"delete ");
                buf.put_slice(key);
            }
            Cmd::Arith { incr, delta, .. } => {
                buf.put_slice(if incr { b"incr " } else { b"decr " });
                buf.put_slice(key);
                buf.put_u8(b' ');
                num(buf, delta);
            }
        }
        buf.put_slice(b"\r\n");
        if let Cmd::Store { value, .. } = self {
            buf.put_slice(value);
            buf.put_slice(b"\r\n");
        }
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

    /// Reads one meta reply to this command.
    pub fn read_meta(&self, r: &Reply, server: &str) -> Result<Outcome> {
        let bad = || {
            Error::protocol(
                server,
                format!("{:?} is no reply to {}", r.status, self.name()),
            )
        };
        if r.status == Status::Error {
            return Err(Error::Server(r.error_text()));
        }
        Ok(match (self, r.status) {
            (Cmd::Get { .. }, Status::Value) => Outcome::Value(Some(Value {
                data: r.value.clone().unwrap_or_default(),
                flags: r.number(b'f').unwrap_or(0),
                cas: r.number(b'c').unwrap_or(0),
            })),
            (Cmd::Get { .. }, Status::Miss) => Outcome::Value(None),
            (Cmd::Touch { .. }, Status::Done) => Outcome::Found(true),
            (Cmd::Touch { .. }, Status::Miss) => Outcome::Found(false),
            (Cmd::Store { .. }, s) => Outcome::Store(store_status(s).ok_or_else(bad)?),
            (Cmd::Delete { .. }, Status::Done) => Outcome::Found(true),
            (Cmd::Delete { .. }, Status::NotFound) => Outcome::Found(false),
            (Cmd::Arith { .. }, Status::Value) => {
                let v = r.value.as_deref().unwrap_or_default();
                Outcome::Counter(Some(parse_num(v).ok_or_else(bad)?))
            }
            (Cmd::Arith { .. }, Status::NotFound) => Outcome::Counter(None),
            _ => return Err(bad()),
        })
    }

    /// Reads the text replies to this command (one line, or `VALUE`s and
    /// `END`).
    pub fn read_text(&self, rs: &[Reply], server: &str) -> Result<Outcome> {
        let bad = || Error::protocol(server, format!("unexpected reply to {}", self.name()));
        let first = rs.first().ok_or_else(bad)?;
        if first.status == Status::Error {
            return Err(Error::Server(first.error_text()));
        }
        Ok(match (self, first.status) {
            (Cmd::Get { key, .. }, Status::Value) => {
                let v = text_value(first).ok_or_else(bad)?;
                if v.0 != *key || rs.get(1).map(|r| r.status) != Some(Status::End) {
                    return Err(bad());
                }
                Outcome::Value(Some(v.1))
            }
            (Cmd::Get { .. }, Status::End) => Outcome::Value(None),
            (Cmd::Touch { .. }, Status::Done) => Outcome::Found(true),
            (Cmd::Touch { .. }, Status::NotFound) => Outcome::Found(false),
            (Cmd::Store { .. }, s) => Outcome::Store(store_status(s).ok_or_else(bad)?),
            (Cmd::Delete { .. }, Status::Done) => Outcome::Found(true),
            (Cmd::Delete { .. }, Status::NotFound) => Outcome::Found(false),
            (Cmd::Arith { .. }, Status::Value) if first.tokens.is_empty() => {
                let v = first.value.as_deref().unwrap_or_default();
                Outcome::Counter(Some(parse_num(v).ok_or_else(bad)?))
            }
            (Cmd::Arith { .. }, Status::NotFound) => Outcome::Counter(None),
            _ => return Err(bad()),
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Cmd::Get { .. } => "get",
            Cmd::Touch { .. } => "touch",
            Cmd::Store { .. } => "a store",
            Cmd::Delete { .. } => "delete",
            Cmd::Arith { .. } => "incr/decr",
        }
    }
}

fn store_status(s: Status) -> Option<StoreStatus> {
    Some(match s {
        Status::Done => StoreStatus::Stored,
        Status::NotStored => StoreStatus::NotStored,
        Status::Exists => StoreStatus::Exists,
        Status::NotFound => StoreStatus::NotFound,
        _ => return None,
    })
}

/// A text `VALUE <key> <flags> <bytes> [<cas>]` reply: its key and value.
pub(crate) fn text_value(r: &Reply) -> Option<(&[u8], Value)> {
    let mut t = r.tokens.split(|&b| b == b' ');
    let key = t.next()?;
    let flags = parse_num(t.next()?)?;
    let _size = t.next()?;
    let cas = t.next().and_then(parse_num).unwrap_or(0);
    Some((
        key,
        Value {
            data: r.value.clone()?,
            flags,
            cas,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(c: Cmd<'_>, quiet: bool) -> String {
        let mut b = BytesMut::new();
        c.meta(&mut b, 7, quiet);
        String::from_utf8(b.to_vec()).unwrap()
    }

    fn text(c: Cmd<'_>) -> String {
        let mut b = BytesMut::new();
        c.text(&mut b);
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn writes_meta_commands() {
        let get = Cmd::Get {
            key: b"k",
            touch: None,
            vivify: None,
        };
        assert_eq!(meta(get, true), "mg k v f c O7 q\r\n");
        let vivify = Cmd::Get {
            key: b"k",
            touch: None,
            vivify: Some(30),
        };
        assert_eq!(meta(vivify, true), "mg k v f c N30 O7 q\r\n");
        let gat = Cmd::Get {
            key: b"k",
            touch: Some(9),
            vivify: None,
        };
        assert_eq!(meta(gat, false), "mg k v f c T9 O7\r\n");
        let cas = Cmd::Store {
            key: b"k",
            value: b"hello",
            mode: Mode::Set,
            flags: 3,
            ttl: 60,
            cas: Some(12),
        };
        assert_eq!(meta(cas, false), "ms k 5 F3 T60 MS C12 O7\r\nhello\r\n");
        let decr = Cmd::Arith {
            key: b"n",
            incr: false,
            delta: 18446744073709551615,
        };
        assert_eq!(meta(decr, false), "ma n v MD D18446744073709551615 O7\r\n");
        assert_eq!(meta(Cmd::Delete { key: b"k" }, true), "md k O7 q\r\n");
    }

    #[test]
    fn writes_text_commands() {
        let cas = Cmd::Store {
            key: b"k",
            value: b"hi",
            mode: Mode::Set,
            flags: 0,
            ttl: 0,
            cas: Some(5),
        };
        assert_eq!(text(cas), "cas k 0 0 2 5\r\nhi\r\n");
        let add = Cmd::Store {
            key: b"k",
            value: b"hi",
            mode: Mode::Add,
            flags: 0,
            ttl: 0,
            cas: None,
        };
        assert_eq!(text(add), "add k 0 0 2\r\nhi\r\n");
        assert_eq!(
            text(Cmd::Get {
                key: b"k",
                touch: Some(3),
                vivify: None,
            }),
            "gats 3 k\r\n"
        );
        assert_eq!(text(Cmd::Touch { key: b"k", ttl: 3 }), "touch k 3\r\n");
    }
}
