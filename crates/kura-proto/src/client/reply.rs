//! A reply as a client reads it, whatever the protocol: its [`Status`],
//! the rest of its line and its value, sharing the read buffer's bytes
//! (no copy); the line and data-block framing the text and meta framers
//! share; and meta flags read as numbers.

use bytes::{Buf, Bytes, BytesMut};

/// The longest reply line accepted (a meta header with every flag and a
/// 250-byte key is far shorter); a server that sends more is broken.
pub const LINE_MAX: usize = 8 * 1024;
/// The largest value a reply may announce.
pub const VALUE_MAX: usize = 1 << 30;

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

/// Why bytes are not a reply.
pub type Malformed = String;

impl Reply {
    /// A text or meta reply (no binary header fields).
    pub fn new(status: Status, tokens: Bytes, value: Option<Bytes>) -> Reply {
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

    /// The meta flag `f`'s token (without the letter), if present: the
    /// first token of `tokens` (split at each space) that starts with `f`.
    pub fn flag(&self, f: u8) -> Option<&[u8]> {
        let tokens = &self.tokens[..];
        let mut start = 0;
        loop {
            let rest = tokens.get(start..)?;
            let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            if rest.first() == Some(&f) {
                return rest.get(1..end);
            }
            if end == rest.len() {
                return None;
            }
            start += end + 1;
        }
    }

    /// Whether the meta flag `f` is present.
    pub fn has(&self, f: u8) -> bool {
        self.flag(f).is_some()
    }

    /// The meta flag `f` as a number, as `FromStr` reads its token. The
    /// common case, plain digits, is read in one pass (no UTF-8 check);
    /// anything else (a sign, too many digits, none) goes to `FromStr`, so
    /// the answer is always the same.
    pub fn number<T: std::str::FromStr + TryFrom<u64>>(&self, f: u8) -> Option<T> {
        let digits = self.flag(f)?;
        // 19 digits always fit a u64; T takes the value when FromStr would.
        if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
            return parse_num(digits);
        }
        let n = digits
            .iter()
            .fold(0u64, |n, &c| n * 10 + u64::from(c - b'0'));
        T::try_from(n).ok()
    }

    /// The line of an error reply, for the caller.
    pub fn error_text(&self) -> String {
        String::from_utf8_lossy(&self.tokens).into_owned()
    }
}

/// A token as a number, as `FromStr` reads it.
pub fn parse_num<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The first line in `buf` (without `\r\n`), if complete.
pub(super) fn line(buf: &[u8]) -> Result<Option<&[u8]>, Malformed> {
    match memchr::memchr(b'\n', &buf[..buf.len().min(LINE_MAX)]) {
        Some(n) if n > 0 && buf[n - 1] == b'\r' => Ok(Some(&buf[..n - 1])),
        Some(_) => Err("a line not ended by \\r\\n".into()),
        None if buf.len() >= LINE_MAX => Err(format!("no line end in {LINE_MAX} bytes")),
        None => Ok(None),
    }
}

/// At most 80 bytes of a line, quoted, for an error.
pub(super) fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(80)]);
    format!("{s:?}")
}

/// A line and its data block, taken from the read buffer.
pub(super) type Taken = (Bytes, Option<Bytes>);

/// Takes a line of `len` bytes and, when `data` is given, a data block of
/// that many bytes and its `\r\n` after it; None if not all here yet.
pub(super) fn take(
    buf: &mut BytesMut,
    len: usize,
    data: Option<usize>,
) -> Result<Option<Taken>, Malformed> {
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

/// Whether a line is one of the error replies text and meta share.
pub(super) fn error_status(l: &[u8]) -> bool {
    l == b"ERROR" || l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(tokens: &'static str) -> Reply {
        Reply::new(Status::Done, Bytes::from_static(tokens.as_bytes()), None)
    }

    /// The flag as a plain split and `FromStr` read it.
    fn slow<T: std::str::FromStr>(r: &Reply, f: u8) -> Option<T> {
        let t = r
            .tokens
            .split(|&b| b == b' ')
            .find(|t| t.first() == Some(&f))?;
        parse_num(&t[1..])
    }

    #[test]
    fn numbers_read_as_from_str_reads_them() {
        for t in [
            "O12 f7",
            "f0 O4294967295",
            "O4294967296",
            "O+5 f-1",
            "O f",
            "O00012 c18446744073709551615",
            "c18446744073709551616 O99999999999999999999",
            "t-1 k O1 O2",
            "  O7  f1 ",
            "O",
            "f",
            "",
        ] {
            let r = reply(t);
            assert_eq!(r.opaque_token(), slow::<u32>(&r, b'O'), "{t}");
            assert_eq!(r.number::<u32>(b'f'), slow::<u32>(&r, b'f'), "{t}");
            assert_eq!(r.number::<u64>(b'c'), slow::<u64>(&r, b'c'), "{t}");
            assert_eq!(r.number::<i64>(b't'), slow::<i64>(&r, b't'), "{t}");
        }
    }
}
