//! The client side of the three wire protocols: how each operation of the
//! load is written, and how a reply is framed and judged. No I/O here: the
//! connection hands in its read buffer and the request the reply belongs to.
//!
//! Replies arrive in request order, so the reader keeps a queue of pending
//! requests and parses the buffer against the oldest. Quiet sets (noreply)
//! have no entry in that queue: they answer only when they fail, and then
//! (meta and binary) with the request's opaque, which is how such a reply
//! is told apart from the answer to the pending request.

mod binary;
mod meta;
mod resp;
mod text;

use std::time::Instant;

use crate::args::{Protocol, ValueSize};
use crate::keys::Keyspace;

/// One operation of the load.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A get of one key.
    Get(u64),
    /// A get of several keys in one request (or one batch closed by a no-op).
    MultiGet(Vec<u64>),
    /// A set of key `key` to the value of (`key`, `salt`, `len`); `quiet`
    /// asks for no reply.
    Set {
        key: u64,
        salt: u16,
        len: usize,
        quiet: bool,
    },
    /// A request that only proves every earlier one was processed.
    Sync,
}

impl Op {
    /// True when the server answers this operation when it succeeds.
    pub fn expects_reply(&self) -> bool {
        !matches!(self, Op::Set { quiet: true, .. })
    }
}

/// A request sent and not answered yet.
#[derive(Debug)]
pub struct Pending {
    pub op: Op,
    /// The request's sequence number (binary opaque).
    pub seq: u32,
    /// When it was sent (closed loop) or due to be sent (open loop).
    pub sent: Instant,
}

/// What a reply said about its request.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub hits: u32,
    pub misses: u32,
    pub failure: Option<Failure>,
}

/// Ways a request can fail.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// A get returned a value that is not what was set for that key.
    WrongValue(String),
    /// The server answered with an error or refused the request.
    Server(String),
}

/// The result of looking at the read buffer.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// The reply is not complete yet.
    Incomplete,
    /// The reply to the pending request, `used` bytes long.
    Reply { used: usize, outcome: Outcome },
    /// A failure reply to an earlier quiet request, `used` bytes long.
    QuietFailure { used: usize, what: String },
    /// Bytes that answer nothing that was asked: the stream cannot be
    /// framed any more.
    Garbage(String),
}

/// What the parsers need besides the bytes.
#[derive(Debug, Clone)]
pub struct Verifier {
    pub keys: Keyspace,
    pub sizes: ValueSize,
}

impl Verifier {
    /// Checks the value returned for key `key`.
    fn value(&self, key: u64, flags: u32, value: &[u8]) -> Option<Failure> {
        crate::value::check(key, flags, value, self.sizes)
            .err()
            .map(Failure::WrongValue)
    }
}

/// Appends the request for `op` (sequence number `seq`) to `out`.
pub fn encode(proto: Protocol, op: &Op, seq: u32, keys: &Keyspace, out: &mut Vec<u8>) {
    match proto {
        Protocol::Text => text::encode(op, keys, out),
        Protocol::Meta => meta::encode(op, seq, keys, out),
        Protocol::Binary => binary::encode(op, seq, keys, out),
        Protocol::Resp => resp::encode(op, keys, out),
    }
}

/// Frames and judges the reply at the start of `buf`, which answers
/// `pending` (or an earlier quiet request).
pub fn parse(proto: Protocol, buf: &[u8], pending: Option<&Pending>, v: &Verifier) -> Parsed {
    match proto {
        Protocol::Text => text::parse(buf, pending, v),
        Protocol::Meta => meta::parse(buf, pending, v),
        Protocol::Binary => binary::parse(buf, pending, v),
        Protocol::Resp => resp::parse(buf, pending, v),
    }
}

/// The line at the start of `buf` without its `\r\n`, if complete.
fn line(buf: &[u8]) -> Option<&[u8]> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some(&buf[..end])
}

/// True for memcached's error lines (`ERROR`, `CLIENT_ERROR ...`, `SERVER_ERROR ...`).
fn is_error_line(line: &[u8]) -> bool {
    line == b"ERROR" || line.starts_with(b"CLIENT_ERROR") || line.starts_with(b"SERVER_ERROR")
}

fn parse_num<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// Appends `n` in decimal.
fn push_num(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

fn show(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(80)];
    String::from_utf8_lossy(cut).into_owned()
}

/// Matches the values a get returned against the keys requested, in
/// order (a server answers in request order and skips misses), checks
/// them and counts: a key whose value is wrong is neither a hit nor a miss.
struct HitCursor<'a> {
    wanted: &'a [u64],
    next: usize,
    returned: u32,
    hits: u32,
}

impl<'a> HitCursor<'a> {
    fn new(wanted: &'a [u64]) -> Self {
        HitCursor {
            wanted,
            next: 0,
            returned: 0,
            hits: 0,
        }
    }

    /// A value returned under `key` (`None`: the reply names no key).
    fn check_named(
        &mut self,
        v: &Verifier,
        key: Option<&[u8]>,
        flags: Option<u32>,
        value: &[u8],
    ) -> Option<Failure> {
        let found = key.and_then(|k| {
            let at = self.wanted[self.next..]
                .iter()
                .position(|&id| v.keys.matches(id, k))?;
            self.next += at;
            Some(())
        });
        if found.is_none() {
            let key = key.map_or("no key".into(), show);
            return Some(Failure::WrongValue(format!(
                "a value for a key not requested ({key})"
            )));
        }
        self.check_next(v, flags, value)
    }

    /// The next key requested was a miss (replies that answer every key).
    fn skip(&mut self) {
        self.next += 1;
    }

    /// A value for the next key requested (replies that carry no key).
    fn check_next(&mut self, v: &Verifier, flags: Option<u32>, value: &[u8]) -> Option<Failure> {
        let Some(&id) = self.wanted.get(self.next) else {
            return Some(Failure::WrongValue(
                "more values than keys requested".into(),
            ));
        };
        self.next += 1;
        self.returned += 1;
        let failure = match flags {
            Some(flags) => v.value(id, flags, value),
            None => Some(Failure::WrongValue("a value without flags".into())),
        };
        if failure.is_none() {
            self.hits += 1;
        }
        failure
    }

    fn outcome(&self, failure: Option<Failure>) -> Outcome {
        Outcome {
            hits: self.hits,
            misses: self.wanted.len() as u32 - self.returned,
            failure,
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::args::KeyDist;

    pub fn verifier() -> Verifier {
        Verifier {
            keys: Keyspace::new("k", 100, KeyDist::Uniform),
            sizes: ValueSize { min: 20, max: 20 },
        }
    }

    pub fn pending(op: Op) -> Pending {
        Pending {
            op,
            seq: 7,
            sent: Instant::now(),
        }
    }

    pub fn value(key: u64, salt: u16) -> Vec<u8> {
        let mut v = Vec::new();
        crate::value::fill(key, salt, 20, &mut v);
        v
    }
}
