//! Framing replies out of a connection's read buffer, without I/O: meta
//! replies (`VA <size> <flags>*`, `HD`, `EN`, `NF`, `NS`, `EX`, `MN`) and
//! text replies (`VALUE <key> <flags> <bytes> [<cas>]`, `END`, `STORED`, a
//! number, ...), plus the error lines both share. "Need more bytes" is
//! `Ok(None)`; anything that is not a reply is `Err`, after which the
//! connection is closed.

use bytes::{Buf, Bytes, BytesMut};

/// The longest reply line accepted (a meta header with every flag and a
/// 250-byte key is far shorter); a server that sends more is broken.
const LINE_MAX: usize = 8 * 1024;
/// The largest value a reply may announce.
const VALUE_MAX: usize = 1 << 30;

/// A reply's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// A value follows (meta `VA`, text `VALUE`, or a text counter's number).
    Value,
    /// Success without a value (meta `HD`; text `STORED`, `DELETED`, `TOUCHED`).
    Done,
    /// Miss (meta `EN`; text `END` with no value before it).
    Miss,
    /// Not found (`NF`, `NOT_FOUND`).
    NotFound,
    /// Not stored (`NS`, `NOT_STORED`).
    NotStored,
    /// CAS mismatch (`EX`, `EXISTS`).
    Exists,
    /// End of a quiet batch (`MN`).
    Noop,
    /// Text `END`, the end of a retrieval.
    End,
    /// Text `VERSION ...`.
    Version,
    /// `ERROR`, `CLIENT_ERROR ...`, `SERVER_ERROR ...`: `tokens` is the line.
    Error,
}

/// One reply: its status, the rest of its line, and its value if any.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: Status,
    /// Meta: the flags after the status (and size); text `VALUE`: the key,
    /// flags, size and CAS; errors: the whole line.
    pub tokens: Bytes,
    pub value: Option<Bytes>,
    /// Binary responses: the opaque, client flags and CAS of the header.
    pub opaque: Option<u32>,
    pub flags: Option<u32>,
    pub cas: Option<u64>,
}

impl Reply {
    pub(crate) fn new(status: Status, tokens: Bytes, value: Option<Bytes>) -> Reply {
        Reply {
            status,
            tokens,
            value,
            opaque: None,
            flags: None,
            cas: None,
        }
    }

    /// The opaque of a binary response or a meta reply's `O` flag.
    pub fn opaque_token(&self) -> Option<u32> {
        self.opaque.or_else(|| self.number(b'O'))
    }

    /// The meta flag `f`'s token (without the letter), if present.
    pub fn flag(&self, f: u8) -> Option<&[u8]> {
        self.tokens
            .split(|&b| b == b' ')
            .find(|t| t.first() == Some(&f))
            .map(|t| &t[1..])
    }

    /// Whether the meta flag `f` is present.
    pub fn has(&self, f: u8) -> bool {
        self.flag(f).is_some()
    }

    /// The meta flag `f` as a number.
    pub fn number<T: std::str::FromStr>(&self, f: u8) -> Option<T> {
        parse_num(self.flag(f)?)
    }

    /// The line of an error reply, for the caller.
    pub fn error_text(&self) -> String {
        String::from_utf8_lossy(&self.tokens).into_owned()
    }
}

pub(crate) fn parse_num<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// Why bytes are not a reply.
pub(crate) type Malformed = String;

/// The first line in `buf` (without `\r\n`), if complete.
fn line(buf: &[u8]) -> Result<Option<&[u8]>, Malformed> {
    match memchr::memchr(b'\n', &buf[..buf.len().min(LINE_MAX)]) {
        Some(n) if n > 0 && buf[n - 1] == b'\r' => Ok(Some(&buf[..n - 1])),
        Some(_) => Err("a line not ended by \\r\\n".into()),
        None if buf.len() >= LINE_MAX => Err(format!("no line end in {LINE_MAX} bytes")),
        None => Ok(None),
    }
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(80)]);
    format!("{s:?}")
}

/// Takes a line of `len` bytes and, when `data` is given, a data block of
/// that many bytes and its `\r\n` after it; None if not all here yet.
fn take(
    buf: &mut BytesMut,
    len: usize,
    data: Option<usize>,
) -> Result<Option<(Bytes, Option<Bytes>)>, Malformed> {
    let head = len + 2;
    let Some(size) = data else {
        let line = buf.split_to(head).freeze();
        return Ok(Some((line.slice(..len), None)));
    };
    if size > VALUE_MAX {
        return Err(format!("a value of {size} bytes announced"));
    }
    if buf.len() < head + size + 2 {
        buf.reserve(head + size + 2 - buf.len());
        return Ok(None);
    }
    if &buf[head + size..head + size + 2] != b"\r\n" {
        return Err("a data block not ended by \\r\\n".into());
    }
    let line = buf.split_to(head).freeze();
    let value = buf.split_to(size).freeze();
    buf.advance(2);
    Ok(Some((line.slice(..len), Some(value))))
}

fn error_status(l: &[u8]) -> bool {
    l == b"ERROR" || l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR")
}

/// Frames one meta reply.
pub(crate) fn meta(buf: &mut BytesMut) -> Result<Option<Reply>, Malformed> {
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

/// Frames one text reply: `VALUE` with its data, or one line (a number is
/// a counter's value).
pub(crate) fn text(buf: &mut BytesMut) -> Result<Option<Reply>, Malformed> {
    let Some(l) = line(buf)? else {
        return Ok(None);
    };
    let len = l.len();
    let simple = |status| Some((status, None));
    let kind = if let Some(rest) = l.strip_prefix(b"VALUE ") {
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
    };
    let Some((status, size)) = kind else {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn all(f: fn(&mut BytesMut) -> Result<Option<Reply>, Malformed>, s: &[u8]) -> Vec<Reply> {
        let mut buf = BytesMut::from(s);
        let mut out = Vec::new();
        while let Some(r) = f(&mut buf).unwrap_or_else(|e| panic!("{e}")) {
            out.push(r);
        }
        assert!(buf.is_empty(), "left over: {buf:?}");
        out
    }

    #[test]
    fn frames_meta_replies_with_values_and_flags() {
        let r = all(
            meta,
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
        assert!(meta(&mut buf).unwrap().is_none());
        buf.extend_from_slice(b"lo\r\n");
        let r = meta(&mut buf).unwrap().unwrap();
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
            assert!(meta(&mut BytesMut::from(bad)).is_err(), "{bad:?}");
        }
        assert!(text(&mut BytesMut::from(&b"VALUE k 0 x\r\n"[..])).is_err());
        assert!(text(&mut BytesMut::from(&b"WHAT\r\n"[..])).is_err());
    }

    #[test]
    fn frames_text_replies() {
        let r = all(
            text,
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
