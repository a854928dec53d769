//! memcached's binary protocol, for servers that speak it but not meta:
//! the 24-byte request header, each [`Cmd`] as its opcode (the quiet
//! opcodes in batches, ended by `NOOP`), response framing, and reading a
//! response's status back as the command's outcome. Every response
//! carries the request's opaque, so batches match replies exactly as meta
//! does.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::cmd::{Cmd, Mode, Outcome, StoreStatus, Value};
use crate::error::{Error, Result};
use crate::reply::{Malformed, Reply, Status};

const REQUEST: u8 = 0x80;
const RESPONSE: u8 = 0x81;
const HEADER: usize = 24;
/// The largest response body accepted.
const BODY_MAX: usize = 1 << 30;

const GET: u8 = 0x00;
const INCR: u8 = 0x05;
const DECR: u8 = 0x06;
const NOOP: u8 = 0x0a;
const GAT: u8 = 0x1d;

/// The status codes read back.
const OK: u16 = 0x0000;
const KEY_NOT_FOUND: u16 = 0x0001;
const KEY_EXISTS: u16 = 0x0002;
const NOT_STORED: u16 = 0x0005;

/// The `NOOP` that ends a batch.
pub(crate) fn noop(buf: &mut BytesMut, opaque: u32) {
    header(buf, NOOP, 0, 0, 0, opaque, 0);
}

fn header(buf: &mut BytesMut, op: u8, key: usize, extras: u8, body: usize, opaque: u32, cas: u64) {
    buf.put_u8(REQUEST);
    buf.put_u8(op);
    buf.put_u16(key as u16);
    buf.put_u8(extras);
    buf.put_u8(0); // data type
    buf.put_u16(0); // vbucket
    buf.put_u32(body as u32);
    buf.put_u32(opaque);
    buf.put_u64(cas);
}

/// Appends the binary form of `cmd`; the quiet opcode when `quiet`.
pub(crate) fn encode(cmd: &Cmd<'_>, buf: &mut BytesMut, opaque: u32, quiet: bool) {
    let key = cmd.key();
    let q = |loud: u8, silent: u8| if quiet { silent } else { loud };
    match *cmd {
        Cmd::Get { touch: None, .. } => {
            header(buf, q(GET, 0x09), key.len(), 0, key.len(), opaque, 0);
            buf.put_slice(key);
        }
        Cmd::Get { touch: Some(t), .. } => {
            header(buf, q(GAT, 0x1e), key.len(), 4, key.len() + 4, opaque, 0);
            buf.put_u32(t);
            buf.put_slice(key);
        }
        Cmd::Touch { ttl, .. } => {
            header(buf, 0x1c, key.len(), 4, key.len() + 4, opaque, 0);
            buf.put_u32(ttl);
            buf.put_slice(key);
        }
        Cmd::Store {
            value,
            mode,
            flags,
            ttl,
            cas,
            ..
        } => {
            let (op, extras) = match mode {
                Mode::Set => (q(0x01, 0x11), 8),
                Mode::Add => (q(0x02, 0x12), 8),
                Mode::Replace => (q(0x03, 0x13), 8),
                Mode::Append => (q(0x0e, 0x19), 0),
                Mode::Prepend => (q(0x0f, 0x1a), 0),
            };
            let body = extras + key.len() + value.len();
            header(
                buf,
                op,
                key.len(),
                extras as u8,
                body,
                opaque,
                cas.unwrap_or(0),
            );
            if extras == 8 {
                buf.put_u32(flags);
                buf.put_u32(ttl);
            }
            buf.put_slice(key);
            buf.put_slice(value);
        }
        Cmd::Delete { .. } => {
            header(buf, q(0x04, 0x14), key.len(), 0, key.len(), opaque, 0);
            buf.put_slice(key);
        }
        Cmd::Arith { incr, delta, .. } => {
            let op = if incr { INCR } else { DECR };
            header(buf, op, key.len(), 20, key.len() + 20, opaque, 0);
            buf.put_u64(delta);
            buf.put_u64(0); // initial value, unused:
            buf.put_u32(u32::MAX); // do not create a missing counter
            buf.put_slice(key);
        }
    }
}

/// Frames one binary response. Its status becomes [`Status::Value`]
/// (a successful get or counter), [`Status::Done`], [`Status::Noop`],
/// [`Status::NotFound`], [`Status::Exists`], [`Status::NotStored`] or
/// [`Status::Error`] (the body's text in `tokens`); the opaque, client
/// flags and CAS go in their fields.
pub(crate) fn frame(buf: &mut BytesMut) -> std::result::Result<Option<Reply>, Malformed> {
    if buf.len() < HEADER {
        return Ok(None);
    }
    if buf[0] != RESPONSE {
        return Err(format!("bad magic 0x{:02x}", buf[0]));
    }
    let op = buf[1];
    let key_len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    let extras = usize::from(buf[4]);
    let status = u16::from_be_bytes([buf[6], buf[7]]);
    let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let opaque = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let cas = u64::from_be_bytes([
        buf[16], buf[17], buf[18], buf[19], buf[20], buf[21], buf[22], buf[23],
    ]);
    if body > BODY_MAX || extras + key_len > body {
        return Err(format!(
            "a response body of {body} bytes ({extras} extras, {key_len} key)"
        ));
    }
    if buf.len() < HEADER + body {
        buf.reserve(HEADER + body - buf.len());
        return Ok(None);
    }
    buf.advance(HEADER);
    let mut body = buf.split_to(body).freeze();
    let flags = (extras >= 4).then(|| u32::from_be_bytes([body[0], body[1], body[2], body[3]]));
    body.advance(extras + key_len);
    let status = match (status, op) {
        (OK, NOOP) => Status::Noop,
        (OK, GET | 0x09 | GAT | 0x1e | INCR | DECR) => Status::Value,
        (OK, _) => Status::Done,
        (KEY_NOT_FOUND, _) => Status::NotFound,
        (KEY_EXISTS, _) => Status::Exists,
        (NOT_STORED, _) => Status::NotStored,
        (_, _) => {
            let text = format!("SERVER_ERROR {}", String::from_utf8_lossy(&body));
            return Ok(Some(Reply {
                status: Status::Error,
                tokens: Bytes::from(text),
                value: None,
                opaque: Some(opaque),
                flags: None,
                cas: None,
            }));
        }
    };
    Ok(Some(Reply {
        status,
        tokens: Bytes::new(),
        value: Some(body),
        opaque: Some(opaque),
        flags,
        cas: Some(cas),
    }))
}

/// Reads a binary response to `cmd`.
pub(crate) fn read(cmd: &Cmd<'_>, r: &Reply, server: &str) -> Result<Outcome> {
    let bad = || Error::protocol(server, format!("{:?} is no binary reply here", r.status));
    if r.status == Status::Error {
        return Err(Error::Server(r.error_text()));
    }
    let found = |s| match s {
        Status::Done => Ok(true),
        Status::NotFound => Ok(false),
        _ => Err(bad()),
    };
    Ok(match *cmd {
        Cmd::Get { .. } => match r.status {
            Status::Value => Outcome::Value(Some(Value {
                data: r.value.clone().unwrap_or_default(),
                flags: r.flags.unwrap_or(0),
                cas: r.cas.unwrap_or(0),
            })),
            Status::NotFound => Outcome::Value(None),
            _ => return Err(bad()),
        },
        Cmd::Touch { .. } | Cmd::Delete { .. } => Outcome::Found(found(r.status)?),
        Cmd::Store { mode, cas, .. } => Outcome::Store(match (r.status, mode, cas) {
            (Status::Done, _, _) => StoreStatus::Stored,
            (Status::NotStored, _, _) => StoreStatus::NotStored,
            (Status::Exists, _, Some(_)) => StoreStatus::Exists,
            (Status::NotFound, _, Some(_)) => StoreStatus::NotFound,
            (Status::Exists, Mode::Add, None) => StoreStatus::NotStored,
            (Status::NotFound, Mode::Replace | Mode::Append | Mode::Prepend, None) => {
                StoreStatus::NotStored
            }
            _ => return Err(bad()),
        }),
        Cmd::Arith { .. } => match r.status {
            Status::Value => {
                let v = r.value.as_deref().unwrap_or_default();
                let n: [u8; 8] = v.try_into().map_err(|_| bad())?;
                Outcome::Counter(Some(u64::from_be_bytes(n)))
            }
            Status::NotFound => Outcome::Counter(None),
            _ => return Err(bad()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_set_header() {
        let mut b = BytesMut::new();
        let set = Cmd::Store {
            key: b"k",
            value: b"hi",
            mode: Mode::Set,
            flags: 7,
            ttl: 60,
            cas: Some(9),
        };
        encode(&set, &mut b, 3, true);
        assert_eq!(b.len(), HEADER + 8 + 1 + 2);
        assert_eq!(&b[..8], &[0x80, 0x11, 0, 1, 8, 0, 0, 0]);
        assert_eq!(&b[8..12], &11u32.to_be_bytes());
        assert_eq!(&b[12..16], &3u32.to_be_bytes());
        assert_eq!(&b[16..24], &9u64.to_be_bytes());
        assert_eq!(&b[24..], b"\0\0\0\x07\0\0\0\x3ckhi");
    }

    #[test]
    fn frames_a_get_response_and_rejects_garbage() {
        let mut b = BytesMut::new();
        b.put_slice(&[0x81, GET, 0, 0, 4, 0, 0, 0]);
        b.put_u32(6);
        b.put_u32(42);
        b.put_u64(77);
        b.put_u32(5);
        b.put_slice(b"h");
        let mut part = b.clone();
        assert!(
            frame(&mut part).unwrap().is_none(),
            "the body is not all here"
        );
        b.put_slice(b"i");
        let r = frame(&mut b).unwrap().unwrap();
        assert_eq!(r.status, Status::Value);
        assert_eq!((r.opaque, r.flags, r.cas), (Some(42), Some(5), Some(77)));
        assert_eq!(r.value.as_deref(), Some(&b"hi"[..]));
        let mut bad = BytesMut::from(&[0x80u8; 24][..]);
        assert!(frame(&mut bad).is_err());
        let mut lie = BytesMut::from(&[0x81, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2][..]);
        lie.put_slice(&[0; 12]);
        assert!(frame(&mut lie).is_err(), "a key longer than the body");
    }
}
