//! The meta protocol from the client's side: each [`Cmd`] as its meta
//! command (`mg`, `ms`, `md`, `ma`, with `O<opaque>` and, in batches,
//! `q`), meta replies (`VA <size> <flags>*`, `HD`, `EN`, `NF`, `NS`, `EX`,
//! `MN`, and the error lines) framed from a read buffer, and a reply read
//! back as the command's [`Outcome`].

use bytes::{BufMut, BytesMut};

use super::reply::{error_status, line, parse_num, show, take, Malformed, Reply, Status};
use super::{num, store_status, Cmd, Mode, Outcome, ReadError, Value};

impl Cmd<'_> {
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

    /// Reads one meta reply to this command.
    ///
    /// # Errors
    /// An error reply, or a reply that does not answer this command.
    pub fn read_meta(&self, r: &Reply) -> Result<Outcome, ReadError> {
        let bad =
            || ReadError::Unexpected(format!("{:?} is no reply to {}", r.status, self.name()));
        if r.status == Status::Error {
            return Err(ReadError::Server(r.error_text()));
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
}

/// An `ms` request as a proxy writes a client's store to a backend (a
/// client's own stores are [`Cmd::Store`]): `ms <key> <size>[ b] F<flags>
/// T<ttl> M<mode>[ w<max>][ C<cas>][ c] O<opaque>`, then the data block.
#[derive(Debug, Clone, Copy)]
pub struct Set<'a> {
    /// The key as the client sent it: written as is, or in base64 with
    /// `b` when meta cannot carry it ([`put_key`]).
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub flags: u32,
    pub ttl: i64,
    /// The mode flag's letter: `S`, `E`, `R`, `A`, `P` or kura's `W`.
    pub mode: u8,
    /// kura's rotation bound (`w`), with mode `W`.
    pub rotate: Option<u32>,
    /// Compare and swap (`C`).
    pub cas: Option<u64>,
    /// Ask for the new CAS back (`c`).
    pub return_cas: bool,
}

impl Set<'_> {
    /// Appends the request, with `q` when `quiet`.
    #[inline]
    pub fn write(&self, buf: &mut BytesMut, opaque: u32, quiet: bool) {
        buf.put_slice(b"ms ");
        put_key(buf, self.key);
        buf.put_u8(b' ');
        num(buf, self.value.len());
        if !plain(self.key) {
            buf.put_slice(b" b");
        }
        buf.put_slice(b" F");
        num(buf, self.flags);
        buf.put_slice(b" T");
        num(buf, self.ttl);
        buf.put_slice(b" M");
        buf.put_u8(self.mode);
        if let Some(max) = self.rotate {
            buf.put_slice(b" w");
            num(buf, max);
        }
        if let Some(c) = self.cas {
            buf.put_slice(b" C");
            num(buf, c);
        }
        if self.return_cas {
            buf.put_slice(b" c");
        }
        buf.put_slice(b" O");
        num(buf, opaque);
        if quiet {
            buf.put_slice(b" q");
        }
        buf.put_slice(b"\r\n");
        buf.put_slice(self.value);
        buf.put_slice(b"\r\n");
    }
}

/// Whether meta can carry `key` as it is (else it goes in base64, with
/// the flag `b`).
#[inline]
pub fn plain(key: &[u8]) -> bool {
    key.iter().all(|&c| c > b' ' && c < 0x7f)
}

/// Appends a key as meta carries it: as is, or in base64 when it has bytes
/// meta keys cannot have (the caller then adds the flag `b`).
#[inline]
pub fn put_key(buf: &mut BytesMut, key: &[u8]) {
    if plain(key) {
        buf.put_slice(key);
    } else {
        let mut enc = Vec::new();
        crate::reply::put_base64(&mut enc, key);
        buf.put_slice(&enc);
    }
}

/// Frames one meta reply from the front of `buf`: `Ok(None)` until it is
/// complete.
///
/// # Errors
/// The bytes are not a meta reply (the connection must be closed).
pub fn frame(buf: &mut BytesMut) -> Result<Option<Reply>, Malformed> {
    let Some(l) = line(buf)? else {
        return Ok(None);
    };
    let len = l.len();
    if error_status(l) {
        let (tokens, _) = take(buf, len, None)?.unwrap_or_default();
        return Ok(Some(Reply::new(Status::Error, tokens, None)));
    }
    let (code, rest) = (&l[..len.min(2)], l.get(3..).unwrap_or_default());
    if len > 2 && l[2] != b' ' {
        return Err(format!("unknown reply {}", show(l)));
    }
    let status = match code {
        b"VA" => Status::Value,
        b"HD" => Status::Done,
        b"EN" => Status::Miss,
        b"NF" => Status::NotFound,
        b"NS" => Status::NotStored,
        b"EX" => Status::Exists,
        b"MN" if len == 2 => Status::Noop,
        _ => return Err(format!("unknown reply {}", show(l))),
    };
    if status != Status::Value {
        let Some((line, _)) = take(buf, len, None)? else {
            return Ok(None);
        };
        let tokens = line.slice(len.min(3)..);
        return Ok(Some(Reply::new(status, tokens, None)));
    }
    let (size, flags_at) = match rest.iter().position(|&b| b == b' ') {
        Some(n) => (&rest[..n], 3 + n + 1),
        None => (rest, len),
    };
    let size: usize = parse_num(size).ok_or_else(|| format!("bad VA size in {}", show(l)))?;
    let Some((line, value)) = take(buf, len, Some(size))? else {
        return Ok(None);
    };
    Ok(Some(Reply::new(
        status,
        line.slice(flags_at.min(len)..),
        value,
    )))
}

#[cfg(test)]
mod tests {
    use super::super::reply::LINE_MAX;
    use super::super::tests::all;
    use super::*;

    fn meta(c: Cmd<'_>, quiet: bool) -> String {
        let mut b = BytesMut::new();
        c.meta(&mut b, 7, quiet);
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
    fn writes_a_proxys_set() {
        let mut b = BytesMut::new();
        let set = Set {
            key: b"k",
            value: b"hi",
            flags: 3,
            ttl: -1,
            mode: b'W',
            rotate: Some(5),
            cas: Some(9),
            return_cas: false,
        };
        set.write(&mut b, 7, false);
        assert_eq!(&b[..], b"ms k 2 F3 T-1 MW w5 C9 O7\r\nhi\r\n");
        b.clear();
        let set = Set {
            key: b"a b",
            rotate: None,
            cas: None,
            return_cas: true,
            mode: b'S',
            ..set
        };
        set.write(&mut b, 1, true);
        assert_eq!(&b[..], b"ms YSBi 2 b F3 T-1 MS c O1 q\r\nhi\r\n");
    }

    #[test]
    fn frames_meta_replies_with_values_and_flags() {
        let r = all(
            frame,
            b"VA 2 f3 c1 O9\r\nhi\r\nEN O12\r\nHD\r\nMN\r\nVA 0 W\r\n\r\n",
        );
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].status, Status::Value);
        assert_eq!(r[0].value.as_deref(), Some(&b"hi"[..]));
        assert_eq!(r[0].number::<u32>(b'f'), Some(3));
        assert_eq!(r[0].flag(b'O'), Some(&b"9"[..]));
        assert_eq!(r[1].status, Status::Miss);
        assert_eq!(r[1].number::<u32>(b'O'), Some(12));
        assert_eq!(r[2].status, Status::Done);
        assert_eq!(r[3].status, Status::Noop);
        assert!(r[4].has(b'W'));
        assert_eq!(r[4].value.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn waits_for_the_whole_value() {
        let mut buf = BytesMut::from(&b"VA 5 O1\r\nhel"[..]);
        assert!(frame(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"lo\r\n");
        let r = frame(&mut buf).unwrap().unwrap();
        assert_eq!(r.value.as_deref(), Some(&b"hello"[..]));
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for bad in [
            &b"HELLO\r\n"[..],
            b"VA x\r\n",
            b"VA 2\r\nhiXX",
            b"HD\n",
            b"HDX\r\n",
            b"VA 99999999999\r\n",
            &[b'A'; LINE_MAX + 1],
        ] {
            assert!(frame(&mut BytesMut::from(bad)).is_err(), "{bad:?}");
        }
    }
}
