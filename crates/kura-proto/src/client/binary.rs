//! The binary protocol from the client's side, for servers that speak it
//! but not meta: each [`Cmd`] as its opcode (the quiet opcodes in batches,
//! ended by `NOOP`) behind the 24-byte request header, response framing,
//! and a response's status read back as the command's [`Outcome`]. Every
//! response carries the request's opaque, so batches match replies exactly
//! as meta does.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::reply::{Malformed, Reply, Status};
use super::{Cmd, Mode, Outcome, ReadError, StoreStatus, Value};
use crate::binary::opcode::*;
use crate::binary::{ARITH_NO_CREATE, HEADER_LEN, REQUEST_MAGIC, RESPONSE_MAGIC};

/// The largest response body accepted.
const BODY_MAX: usize = 1 << 30;

/// The status codes read back.
const OK: u16 = 0x0000;
const KEY_NOT_FOUND: u16 = 0x0001;
const KEY_EXISTS: u16 = 0x0002;
const NOT_STORED: u16 = 0x0005;

/// Appends the `NOOP` that ends a batch.
pub fn noop(buf: &mut BytesMut, opaque: u32) {
    header(buf, NOOP, 0, 0, 0, opaque, 0);
}

fn header(buf: &mut BytesMut, op: u8, key: usize, extras: u8, body: usize, opaque: u32, cas: u64) {
    buf.put_u8(REQUEST_MAGIC);
    buf.put_u8(op);
    buf.put_u16(key as u16);
    buf.put_u8(extras);
    buf.put_u8(0); // data type
    buf.put_u16(0); // vbucket
    buf.put_u32(body as u32);
    buf.put_u32(opaque);
    buf.put_u64(cas);
}

impl Cmd<'_> {
    /// Appends the binary form; the quiet opcode when `quiet`.
    pub fn binary(&self, buf: &mut BytesMut, opaque: u32, quiet: bool) {
        let key = self.key();
        let q = |loud: u8, silent: u8| if quiet { silent } else { loud };
        match *self {
            Cmd::Get { touch: None, .. } => {
                header(buf, q(GET, GETQ), key.len(), 0, key.len(), opaque, 0);
                buf.put_slice(key);
            }
            Cmd::Get { touch: Some(t), .. } => {
                header(buf, q(GAT, GATQ), key.len(), 4, key.len() + 4, opaque, 0);
                buf.put_u32(t);
                buf.put_slice(key);
            }
            Cmd::Touch { ttl, .. } => {
                header(buf, TOUCH, key.len(), 4, key.len() + 4, opaque, 0);
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
                    Mode::Set => (q(SET, SETQ), 8),
                    Mode::Add => (q(ADD, ADDQ), 8),
                    Mode::Replace => (q(REPLACE, REPLACEQ), 8),
                    Mode::Append => (q(APPEND, APPENDQ), 0),
                    Mode::Prepend => (q(PREPEND, PREPENDQ), 0),
                };
                let body = extras + key.len() + value.len();
                let cas = cas.unwrap_or(0);
                header(buf, op, key.len(), extras as u8, body, opaque, cas);
                if extras == 8 {
                    buf.put_u32(flags);
                    buf.put_u32(ttl);
                }
                buf.put_slice(key);
                buf.put_slice(value);
            }
            Cmd::Delete { .. } => {
                header(buf, q(DELETE, DELETEQ), key.len(), 0, key.len(), opaque, 0);
                buf.put_slice(key);
            }
            Cmd::Arith { incr, delta, .. } => {
                let op = if incr { INCREMENT } else { DECREMENT };
                header(buf, op, key.len(), 20, key.len() + 20, opaque, 0);
                buf.put_u64(delta);
                buf.put_u64(0); // initial value, unused:
                buf.put_u32(ARITH_NO_CREATE); // do not create a missing counter
                buf.put_slice(key);
            }
        }
    }

    /// Reads a binary response to this command.
    ///
    /// # Errors
    /// An error status, or a response that does not answer this command.
    pub fn read_binary(&self, r: &Reply) -> Result<Outcome, ReadError> {
        let bad = || ReadError::Unexpected(format!("{:?} is no binary reply here", r.status));
        if r.status == Status::Error {
            return Err(ReadError::Server(r.error_text()));
        }
        let found = |s| match s {
            Status::Done => Ok(true),
            Status::NotFound => Ok(false),
            _ => Err(bad()),
        };
        Ok(match *self {
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
}

/// Frames one binary response from the front of `buf` (`Ok(None)` until
/// it is complete). Its status becomes [`Status::Value`] (a successful get
/// or counter), [`Status::Done`], [`Status::Noop`], [`Status::NotFound`],
/// [`Status::Exists`], [`Status::NotStored`] or [`Status::Error`] (the
/// body's text in `tokens`); the opaque, client flags and CAS go in their
/// fields.
///
/// # Errors
/// The bytes are not a binary response (the connection must be closed).
pub fn frame(buf: &mut BytesMut) -> Result<Option<Reply>, Malformed> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    if buf[0] != RESPONSE_MAGIC {
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
    if buf.len() < HEADER_LEN + body {
        buf.reserve(HEADER_LEN + body - buf.len());
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let mut body = buf.split_to(body).freeze();
    let flags = (extras >= 4).then(|| u32::from_be_bytes([body[0], body[1], body[2], body[3]]));
    body.advance(extras + key_len);
    let status = match (status, op) {
        (OK, NOOP) => Status::Noop,
        (OK, GET | GETQ | GAT | GATQ | INCREMENT | DECREMENT) => Status::Value,
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
        set.binary(&mut b, 3, true);
        assert_eq!(b.len(), HEADER_LEN + 8 + 1 + 2);
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
