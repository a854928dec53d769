//! The text protocol from the client's side: each [`Cmd`] as its text
//! command (`gets`, `gats`, `touch`, the storage commands and `cas`,
//! `delete`, `incr`/`decr`; always acknowledged), text replies (`VALUE
//! <key> <flags> <bytes> [<cas>]` with its data, `END`, `STORED`, a
//! counter's number, ...) framed from a read buffer, and replies read back
//! as the command's [`Outcome`].

use bytes::{BufMut, Bytes, BytesMut};

use super::reply::{error_status, line, parse_num, show, take, Malformed, Reply, Status};
use super::{num, store_status, Cmd, Mode, Outcome, ReadError, Value};

impl Cmd<'_> {
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

    /// Reads the text replies to this command (one line, or `VALUE`s and
    /// `END`).
    ///
    /// # Errors
    /// An error reply, or replies that do not answer this command.
    pub fn read_text(&self, rs: &[Reply]) -> Result<Outcome, ReadError> {
        let bad = || ReadError::Unexpected(format!("unexpected reply to {}", self.name()));
        let first = rs.first().ok_or_else(bad)?;
        if first.status == Status::Error {
            return Err(ReadError::Server(first.error_text()));
        }
        Ok(match (self, first.status) {
            (Cmd::Get { key, .. }, Status::Value) => {
                let v = value(first).ok_or_else(bad)?;
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
}

/// A text `VALUE <key> <flags> <bytes> [<cas>]` reply: its key and value.
pub fn value(r: &Reply) -> Option<(&[u8], Value)> {
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

/// Frames one text reply from the front of `buf`: `VALUE` with its data,
/// or one line (a number is a counter's value); `Ok(None)` until it is
/// complete.
///
/// # Errors
/// The bytes are not a text reply (the connection must be closed).
pub fn frame(buf: &mut BytesMut) -> Result<Option<Reply>, Malformed> {
    let Some(l) = line(buf)? else {
        return Ok(None);
    };
    let len = l.len();
    let Some((status, size)) = kind(l)? else {
        return Err(format!("unknown reply {}", show(l)));
    };
    let Some((line, value)) = take(buf, len, size)? else {
        return Ok(None);
    };
    let (tokens, value) = match (status, &value) {
        (Status::Value, None) => (Bytes::new(), Some(line)),
        (Status::Value, Some(_)) => (line.slice(6..), value),
        _ => (line, value),
    };
    Ok(Some(Reply::new(status, tokens, value)))
}

/// A text reply line's status and, for `VALUE`, its data block's size;
/// None for a line that is no reply.
fn kind(l: &[u8]) -> Result<Option<(Status, Option<usize>)>, Malformed> {
    let simple = |status| Some((status, None));
    Ok(if let Some(rest) = l.strip_prefix(b"VALUE ") {
        let size = rest
            .split(|&b| b == b' ')
            .nth(2)
            .and_then(parse_num::<usize>)
            .ok_or_else(|| format!("bad VALUE line {}", show(l)))?;
        Some((Status::Value, Some(size)))
    } else if error_status(l) {
        simple(Status::Error)
    } else if l.starts_with(b"VERSION ") {
        simple(Status::Version)
    } else if !l.is_empty() && l.iter().all(u8::is_ascii_digit) {
        simple(Status::Value)
    } else {
        match l {
            b"STORED" | b"DELETED" | b"TOUCHED" => simple(Status::Done),
            b"NOT_STORED" => simple(Status::NotStored),
            b"EXISTS" => simple(Status::Exists),
            b"NOT_FOUND" => simple(Status::NotFound),
            b"END" => simple(Status::End),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::all;
    use super::*;

    fn text(c: Cmd<'_>) -> String {
        let mut b = BytesMut::new();
        c.text(&mut b);
        String::from_utf8(b.to_vec()).unwrap()
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

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        assert!(frame(&mut BytesMut::from(&b"VALUE k 0 x\r\n"[..])).is_err());
        assert!(frame(&mut BytesMut::from(&b"WHAT\r\n"[..])).is_err());
    }

    #[test]
    fn frames_text_replies() {
        let r = all(
            frame,
            b"VALUE k 5 2 77\r\nhi\r\nEND\r\nSTORED\r\n42\r\nNOT_FOUND\r\nSERVER_ERROR out of memory\r\n",
        );
        let got: Vec<Status> = r.iter().map(|r| r.status).collect();
        use Status::*;
        assert_eq!(got, [Value, End, Done, Value, NotFound, Error]);
        assert_eq!(&r[0].tokens[..], b"k 5 2 77");
        assert_eq!(r[3].value.as_deref(), Some(&b"42"[..]));
        assert_eq!(r[5].error_text(), "SERVER_ERROR out of memory");
    }
}
