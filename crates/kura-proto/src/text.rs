//! The classic text commands: retrieval, storage, delete, incr/decr, touch,
//! flush_all and the administrative commands. Token-count rules and error
//! replies follow memcached 1.6's `proto_text.c` so that kura answers a
//! malformed line exactly as memcached does.

use crate::error::Error;
use crate::frame::Limits;
use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::parsing::{after_token, data_length, err, valid_key, DataRequest, Parsed};
use crate::request::*;
use crate::tokens::Tokens;

pub(crate) fn parse<'a>(
    cmd: &'a [u8],
    line: &'a [u8],
    t: &Tokens<'a>,
    limits: &Limits,
) -> Parsed<'a> {
    let n = t.len();
    match cmd {
        b"get" | b"bget" => retrieval(line, t, false, false),
        b"gets" => retrieval(line, t, true, false),
        b"gat" => retrieval(line, t, false, true),
        b"gats" => retrieval(line, t, true, true),
        b"set" => storage(t, StoreMode::Set, false, limits),
        b"add" => storage(t, StoreMode::Add, false, limits),
        b"replace" => storage(t, StoreMode::Replace, false, limits),
        b"append" => storage(t, StoreMode::Append, false, limits),
        b"prepend" => storage(t, StoreMode::Prepend, false, limits),
        b"cas" => storage(t, StoreMode::Set, true, limits),
        b"rotate" => rotate(t, limits),
        b"delete" => delete(t),
        b"incr" => arith(t, true),
        b"decr" => arith(t, false),
        b"touch" => touch(t),
        b"flush_all" => flush_all(t),
        b"version" => Parsed::Line(Request::Version),
        b"quit" => Parsed::Line(Request::Quit),
        b"refresh_certs" => Parsed::Line(Request::RefreshCerts {
            noreply: t.noreply(),
        }),
        b"verbosity" if n == 2 || n == 3 => Parsed::Line(Request::Verbosity {
            level: parse_u32(t.get(1)),
            noreply: t.noreply(),
        }),
        b"cache_memlimit" if n == 2 || n == 3 => Parsed::Line(Request::CacheMemlimit {
            megabytes: parse_u32(t.get(1)),
            noreply: t.noreply(),
        }),
        b"shutdown" => Parsed::Line(Request::Shutdown(match (n, t.get(1)) {
            (1, _) => ShutdownMode::Immediate,
            (2, b"graceful") => ShutdownMode::Graceful,
            _ => ShutdownMode::Invalid,
        })),
        b"lru_crawler" => crate::inspect::lru_crawler(t),
        b"watch" => crate::inspect::watch(t),
        b"stats" => Parsed::Line(Request::Stats(Stats::new(after_token(line, t, 0)))),
        b"replicaof" if n == 3 => Parsed::Line(Request::ReplicaOf {
            host: t.get(1),
            port: t.get(2),
        }),
        b"replicate" if n == 3 => Parsed::Line(Request::Replicate {
            history: t.get(1),
            after: parse_u64(t.get(2)),
        }),
        _ => unknown(cmd, t),
    }
}

/// The commands memcached looks up by their whole name; it picks the others
/// by their first letter (below), then by name within the letter. `rotate`
/// is kura's.
const BY_NAME: &[&[u8]] = &[
    b"replace",
    b"prepend",
    b"bget",
    b"flush_all",
    b"version",
    b"quit",
    b"lru_crawler",
    b"watch",
    b"verbosity",
    b"lru",
    b"extstore",
    b"refresh_certs",
    b"rotate",
    b"replicate",
];

/// A line with no command kura knows. memcached hangs up at once on one
/// that looks like an HTTP request (its last token, of the 23 it reads,
/// starts with `HTTP/`): a browser tricked into sending a request to the
/// cache port gets no reply it could use. Lines it routes to a command by
/// their first letter or name get `ERROR` whatever their last token.
fn unknown<'a>(cmd: &[u8], t: &Tokens<'a>) -> Parsed<'a> {
    let by_letter = cmd.first().is_some_and(|c| b"acdgist".contains(c));
    let last = t.get(t.len().saturating_sub(1));
    if !by_letter && !BY_NAME.contains(&cmd) && last.starts_with(b"HTTP/") {
        return Parsed::Close;
    }
    err(Error::UnknownCommand)
}

fn quiet<'a>(error: Error, noreply: bool) -> Parsed<'a> {
    Parsed::Error {
        error,
        swallow: 0,
        quiet: noreply,
    }
}

/// `get <key>` and `gets <key>` with one space before a valid key, the
/// commonest request lines, read without tokenizing: the same request the
/// general path makes of them. `None` for any other line.
pub(crate) fn one_key_get(line: &[u8]) -> Option<Request<'_>> {
    let (cas, keys_at) = match line.get(..5)? {
        b"gets " => (true, 4),
        [b'g', b'e', b't', b' ', _] => (false, 3),
        _ => return None,
    };
    let key = &line[keys_at + 1..];
    if !valid_key(key)
        || memchr::arch::all::memchr::One::new(b' ')
            .find(key)
            .is_some()
    {
        return None;
    }
    Some(Request::Get(Get::new(cas, None, &line[keys_at..])))
}

fn retrieval<'a>(line: &'a [u8], t: &Tokens<'a>, cas: bool, touch: bool) -> Parsed<'a> {
    if t.len() < 2 {
        return err(Error::UnknownCommand);
    }
    let (exptime, keys_after) = if touch {
        match parse_i32(t.get(1)) {
            Some(e) => (Some(e), 1),
            None => return err(Error::InvalidExptime),
        }
    } else {
        (None, 0)
    };
    let keys = after_token(line, t, keys_after);
    let get = Get::new(cas, exptime, keys);
    if get.keys().any(|k| !valid_key(k)) {
        return err(Error::BadFormat);
    }
    Parsed::Line(Request::Get(get))
}

fn storage<'a>(t: &Tokens<'a>, mode: StoreMode, with_cas: bool, limits: &Limits) -> Parsed<'a> {
    let n = t.len();
    let expected = if with_cas { 6 } else { 5 };
    if n != expected && n != expected + 1 {
        return err(Error::UnknownCommand);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if !valid_key(key) {
        return quiet(Error::BadFormat, noreply);
    }
    let (Some(flags), Some(exptime), Some(len)) = (
        parse_u32(t.get(2)),
        parse_i32(t.get(3)),
        parse_i32(t.get(4)),
    ) else {
        return quiet(Error::BadFormat, noreply);
    };
    let cas = if with_cas {
        match parse_u64(t.get(5)) {
            Some(c) => Some(c),
            None => return quiet(Error::BadFormat, noreply),
        }
    } else {
        None
    };
    let Some(data_len) = data_length(len) else {
        return quiet(Error::BadFormat, noreply);
    };
    Parsed::WithData(DataRequest {
        request: Request::Store(Store {
            mode,
            cas,
            key,
            flags,
            exptime,
            data: Data::Bytes(&[]),
            noreply,
        }),
        data_len,
        too_large: limits.too_large(key.len(), flags, data_len),
        quiet_errors: noreply,
    })
}

/// `rotate <key> <flags> <exptime> <bytes> <max> [noreply]`: kura's value
/// rotation, framed like a storage command (a bad line swallows nothing, as
/// memcached does for `set`; the client's data line then fails on its own).
fn rotate<'a>(t: &Tokens<'a>, limits: &Limits) -> Parsed<'a> {
    let n = t.len();
    if n != 6 && n != 7 {
        return err(Error::UnknownCommand);
    }
    let noreply = t.noreply();
    let Some(max) = parse_u32(t.get(5)).filter(|&m| m > 0) else {
        return quiet(Error::BadFormat, noreply);
    };
    // Framed as `cas` is (one more number after the length), then made a
    // rotation.
    match storage(t, StoreMode::Set, true, limits) {
        Parsed::WithData(mut data) => {
            if let Request::Store(s) = &mut data.request {
                s.mode = StoreMode::Rotate { max };
                s.cas = None;
            }
            Parsed::WithData(data)
        }
        other => other,
    }
}

fn delete<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    let n = t.len();
    if !(2..=4).contains(&n) {
        return err(Error::UnknownCommand);
    }
    let noreply = t.noreply();
    if n > 2 {
        let hold_is_zero = t.get(2) == b"0";
        let valid = (n == 3 && (hold_is_zero || noreply)) || (n == 4 && hold_is_zero && noreply);
        if !valid {
            return quiet(Error::DeleteUsage, noreply);
        }
    }
    let key = t.get(1);
    if !valid_key(key) {
        return quiet(Error::BadFormat, noreply);
    }
    Parsed::Line(Request::Delete(Delete { key, noreply }))
}

fn arith<'a>(t: &Tokens<'a>, incr: bool) -> Parsed<'a> {
    let n = t.len();
    if n != 3 && n != 4 {
        return err(Error::UnknownCommand);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if !valid_key(key) {
        return quiet(Error::BadFormat, noreply);
    }
    let Some(delta) = parse_u64(t.get(2)) else {
        return quiet(Error::InvalidDeltaArgument, noreply);
    };
    Parsed::Line(Request::Arith(Arith {
        key,
        incr,
        delta,
        noreply,
    }))
}

fn touch<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    let n = t.len();
    if n != 3 && n != 4 {
        return err(Error::UnknownCommand);
    }
    let noreply = t.noreply();
    let key = t.get(1);
    if !valid_key(key) {
        return quiet(Error::BadFormat, noreply);
    }
    let Some(exptime) = parse_i32(t.get(2)) else {
        return quiet(Error::InvalidExptime, noreply);
    };
    Parsed::Line(Request::Touch(Touch {
        key,
        exptime,
        noreply,
    }))
}

fn flush_all<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    let n = t.len();
    if !(1..=3).contains(&n) {
        return err(Error::UnknownCommand);
    }
    let noreply = t.noreply();
    let delay = if n == if noreply { 2 } else { 1 } {
        FlushDelay::Now
    } else {
        match parse_i32(t.get(1)) {
            Some(e) => FlushDelay::Exptime(e),
            None => FlushDelay::Invalid,
        }
    };
    Parsed::Line(Request::FlushAll(FlushAll { delay, noreply }))
}

#[cfg(test)]
mod rotate_tests {
    use crate::{parse, Data, Frame, Limits, Request, StoreMode};

    #[test]
    fn rotate_parses_like_a_storage_command_with_a_window() {
        let wire = b"rotate fp 3 60 4 480 noreply\r\nabcd\r\n";
        match parse(wire, &Limits::default()) {
            Frame::Request {
                request: Request::Store(s),
                len,
            } => {
                assert_eq!(len, wire.len());
                assert_eq!(s.mode, StoreMode::Rotate { max: 480 });
                assert_eq!((s.key, s.flags, s.exptime), (&b"fp"[..], 3, 60));
                assert_eq!(s.data, Data::Bytes(b"abcd"));
                assert!(s.noreply && s.cas.is_none());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rotate_refuses_a_zero_or_missing_window() {
        for wire in [
            &b"rotate fp 0 0 1 0\r\nx\r\n"[..],
            b"rotate fp 0 0 1 x\r\nx\r\n",
        ] {
            assert!(
                matches!(parse(wire, &Limits::default()), Frame::Error { .. }),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }
}

#[cfg(test)]
mod http_tests {
    use crate::{parse, Error, Frame, Limits};

    fn frame(line: &[u8]) -> Frame<'_> {
        parse(line, &Limits::default())
    }

    #[test]
    fn http_request_lines_close_the_connection() {
        for line in [
            &b"GET / HTTP/1.0\r\n"[..],
            b"PUT /asdf HTTP/1.1\r\n",
            b"DELETE HTTP/1.1\r\n",
            b"HTTP/1.1\n",
            b"mget / HTTP/\r\n",
            b"OPTIONS a b c d e f g h i j k l m n o p q r s t u HTTP/1.1\r\n",
        ] {
            assert_eq!(
                frame(line),
                Frame::Close,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn commands_memcached_routes_are_answered_whatever_their_last_token() {
        for line in [
            &b"gxx / HTTP/1.1\r\n"[..],
            b"sxx HTTP/1.1\r\n",
            b"txx HTTP/1.1\r\n",
            b"verbosity a b HTTP/1.1\r\n",
            b"lru_crawler HTTP/1.1\r\n",
            b"mx HTTP/1.1\r\n",
            b"G HTTP/1.1\r\n",
            b"GET / http/1.1\r\n",
            b"GET / HTTP/1.1 x\r\n",
            b"GET a b c d e f g h i j k l m n o p q r s t u v w HTTP/1.1\r\n",
        ] {
            assert!(
                matches!(
                    frame(line),
                    Frame::Error {
                        error: Error::UnknownCommand,
                        ..
                    }
                ),
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }
}

#[cfg(test)]
mod length_tests {
    use crate::{parse, Data, Error, Frame, Limits, Request};

    #[test]
    fn lengths_above_int_max_minus_two_are_format_errors() {
        for line in [
            &b"set k 0 0 2147483646\r\n"[..],
            b"set k 0 0 2147483647\r\n",
            b"cas k 0 0 2147483646 1\r\n",
            b"set k 0 0 4294967295\r\n",
            b"ms k 2147483646\r\n",
            b"ms k 2147483647 T0\r\n",
        ] {
            match parse(line, &Limits::default()) {
                Frame::Error {
                    error: Error::BadFormat,
                    len,
                    swallow: 0,
                    ..
                } => assert_eq!(len, line.len()),
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
            }
        }
    }

    #[test]
    fn int_max_minus_two_is_a_length_too_large_for_the_cache() {
        for line in [&b"set k 0 0 2147483645\r\n"[..], b"ms k 2147483645\r\n"] {
            match parse(line, &Limits::default()) {
                Frame::Request {
                    request: Request::Store(s),
                    ..
                } => assert_eq!(s.data, Data::TooLarge { len: 2147483645 }),
                Frame::Request {
                    request: Request::MetaSet(s),
                    ..
                } => assert_eq!(s.data, Data::TooLarge { len: 2147483645 }),
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
            }
        }
    }
}
