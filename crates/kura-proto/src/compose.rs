//! Composing requests: the canonical wire form of every [`Request`], so a
//! client or proxy sends what the server's parser reads back as the same
//! request. Canonical means single spaces between tokens, numbers in plain
//! decimal, `\r\n` line endings and nothing the parser would ignore (tokens
//! after `version`, a `delete`'s legacy `0` unless it is needed). Composing
//! a parsed request and parsing the result gives an equivalent request: the
//! same fields, keys, stats arguments and meta flags, though a raw field may
//! be spaced differently from the original line.
//!
//! Composition does not validate: keys, stats arguments and flag tokens are
//! written as held, so a hand-built request with a space, a NUL or a
//! newline in a key produces a line the parser rejects or reads differently. The
//! cases that cannot be written faithfully are documented on
//! [`Request::compose`].

use crate::reply::{put_base64, put_i64, put_u64};
use crate::request::*;

/// Written in place of a number the parser could not read (a `verbosity`,
/// `cache_memlimit` or `flush_all` argument held as `None` or `Invalid`):
/// not a number, so it parses back to the same value.
const NOT_A_NUMBER: &[u8] = b"invalid";

impl Request<'_> {
    /// Appends the request's canonical wire form to `out`: the request line
    /// with its `\r\n` and, for storage commands, the data block and its
    /// `\r\n`.
    ///
    /// Cases worth knowing:
    ///
    /// - Meta flags are written as [`MetaFlags::iter`] yields them, in
    ///   request order. The typed fields of [`MetaFlags`] (and
    ///   [`MetaSet::mode`], [`MetaArith::incr`]) are the parser's reading of
    ///   those tokens and are not consulted, so flags set by hand on a
    ///   `MetaFlags::default()` are not written. A [`MetaKey`] marked
    ///   `binary` is written in base64, with a `b` flag added if the flags
    ///   lack one.
    /// - A [`Store`] with a `cas` value is written as the `cas` command,
    ///   whatever its mode: the text protocol has no CAS form of the others.
    /// - A [`Delete`] of the key `noreply` that is not itself noreply is
    ///   written with memcached's legacy hold time, `delete noreply 0`: a
    ///   last token `noreply` always reads as the option.
    /// - [`Data::TooLarge`] holds no payload: only the request line is
    ///   written, announcing `len` bytes. These are exactly the bytes that
    ///   [`Frame::Request`](crate::Frame)'s `len` covered when it was parsed,
    ///   and parse back to the same request under the same limits, but the
    ///   payload must follow before a server can go on. A client never holds
    ///   such a request; a proxy forwards a refusal instead.
    /// - Numbers the parser could not read (`level: None`,
    ///   [`FlushDelay::Invalid`], [`ShutdownMode::Invalid`]) are written as
    ///   the word `invalid`, which reads back the same way.
    /// - An empty [`WatchKinds`] (which the parser never makes) is written
    ///   as `watch`, which reads back as `watch fetchers`.
    pub fn compose(&self, out: &mut Vec<u8>) {
        match self {
            // Storage commands return early: they end with their data block.
            Request::Store(s) => return store(out, s),
            Request::MetaSet(m) => return meta_set(out, m),
            Request::Get(g) => get(out, g),
            Request::Delete(d) => {
                out.extend_from_slice(b"delete ");
                out.extend_from_slice(d.key);
                if d.key == b"noreply" && !d.noreply {
                    // `delete noreply` is read as noreply; the legacy hold
                    // time `0` keeps the key from being the last token
                    out.extend_from_slice(b" 0");
                }
                noreply(out, d.noreply);
            }
            Request::Arith(a) => {
                out.extend_from_slice(if a.incr { b"incr " } else { b"decr " });
                out.extend_from_slice(a.key);
                out.push(b' ');
                put_u64(out, a.delta);
                noreply(out, a.noreply);
            }
            Request::Touch(t) => {
                out.extend_from_slice(b"touch ");
                out.extend_from_slice(t.key);
                out.push(b' ');
                put_i64(out, i64::from(t.exptime));
                noreply(out, t.noreply);
            }
            Request::FlushAll(f) => {
                out.extend_from_slice(b"flush_all");
                match f.delay {
                    FlushDelay::Now => {}
                    FlushDelay::Exptime(e) => {
                        out.push(b' ');
                        put_i64(out, i64::from(e));
                    }
                    FlushDelay::Invalid => {
                        out.push(b' ');
                        out.extend_from_slice(NOT_A_NUMBER);
                    }
                }
                noreply(out, f.noreply);
            }
            Request::Version => out.extend_from_slice(b"version"),
            Request::Verbosity { level, noreply: q } => {
                out.extend_from_slice(b"verbosity ");
                maybe_number(out, *level);
                noreply(out, *q);
            }
            Request::Quit => out.extend_from_slice(b"quit"),
            Request::RefreshCerts { noreply: q } => {
                out.extend_from_slice(b"refresh_certs");
                noreply(out, *q);
            }
            Request::Shutdown(mode) => out.extend_from_slice(match mode {
                ShutdownMode::Immediate => b"shutdown",
                ShutdownMode::Graceful => b"shutdown graceful",
                ShutdownMode::Invalid => b"shutdown invalid",
            }),
            Request::Stats(s) => {
                out.extend_from_slice(b"stats");
                for word in s.group().into_iter().chain(s.args()) {
                    out.push(b' ');
                    out.extend_from_slice(word);
                }
            }
            Request::CacheMemlimit {
                megabytes,
                noreply: q,
            } => {
                out.extend_from_slice(b"cache_memlimit ");
                maybe_number(out, *megabytes);
                noreply(out, *q);
            }
            Request::MetaGet(m) => meta_line(out, b"mg", &m.key, None, &m.flags),
            Request::MetaDelete(m) => meta_line(out, b"md", &m.key, None, &m.flags),
            Request::MetaArith(m) => meta_line(out, b"ma", &m.key, None, &m.flags),
            Request::MetaDebug(m) => {
                out.extend_from_slice(b"me ");
                meta_key(out, &m.key);
                if m.key.binary {
                    out.extend_from_slice(b" b");
                }
            }
            Request::MetaNoop => out.extend_from_slice(b"mn"),
            Request::Track { on } => out.extend_from_slice(if *on { b"mt" } else { b"mt off" }),
            Request::Replicate { history, after } => {
                out.extend_from_slice(b"replicate ");
                out.extend_from_slice(history);
                out.push(b' ');
                match after {
                    Some(n) => put_u64(out, *n),
                    None => out.extend_from_slice(NOT_A_NUMBER),
                }
            }
            Request::LruCrawler(c) => lru_crawler(out, c),
            Request::Watch(kinds) => {
                out.extend_from_slice(b"watch");
                for (k, name) in WatchKinds::NAMES {
                    if kinds.has(k) {
                        out.push(b' ');
                        out.extend_from_slice(name);
                    }
                }
            }
            Request::ReplicaOf { host, port } => {
                out.extend_from_slice(b"replicaof ");
                out.extend_from_slice(host);
                out.push(b' ');
                out.extend_from_slice(port);
            }
        }
        out.extend_from_slice(b"\r\n");
    }
}

fn lru_crawler(out: &mut Vec<u8>, c: &LruCrawler<'_>) {
    out.extend_from_slice(b"lru_crawler ");
    let (name, arg): (&[u8], Option<&[u8]>) = match c {
        LruCrawler::Enable => (b"enable", None),
        LruCrawler::Disable => (b"disable", None),
        LruCrawler::Crawl(a) => (b"crawl", Some(a)),
        LruCrawler::Metadump(a) => (b"metadump", Some(a)),
        LruCrawler::Mgdump(a) => (b"mgdump", Some(a)),
        LruCrawler::Tocrawl(n) | LruCrawler::Sleep(n) => {
            out.extend_from_slice(match c {
                LruCrawler::Tocrawl(_) => b"tocrawl ",
                _ => b"sleep ",
            });
            put_u64(out, u64::from(*n));
            return;
        }
    };
    out.extend_from_slice(name);
    if let Some(a) = arg {
        out.push(b' ');
        out.extend_from_slice(a);
    }
}

fn noreply(out: &mut Vec<u8>, noreply: bool) {
    if noreply {
        out.extend_from_slice(b" noreply");
    }
}

fn maybe_number(out: &mut Vec<u8>, n: Option<u32>) {
    match n {
        Some(n) => put_u64(out, u64::from(n)),
        None => out.extend_from_slice(NOT_A_NUMBER),
    }
}

fn get(out: &mut Vec<u8>, g: &Get<'_>) {
    out.extend_from_slice(match (g.cas, g.touch.is_some()) {
        (false, false) => b"get",
        (true, false) => b"gets",
        (false, true) => b"gat",
        (true, true) => b"gats",
    });
    if let Some(exptime) = g.touch {
        out.push(b' ');
        put_i64(out, i64::from(exptime));
    }
    for key in g.keys() {
        out.push(b' ');
        out.extend_from_slice(key);
    }
}

/// The length a data block announces, and its bytes when they are held.
fn data_parts<'a>(data: &Data<'a>) -> (usize, Option<&'a [u8]>) {
    match *data {
        Data::Bytes(b) => (b.len(), Some(b)),
        Data::TooLarge { len } => (len, None),
    }
}

/// Ends a storage request: the line's `\r\n`, then the data block if held.
fn data_block(out: &mut Vec<u8>, block: Option<&[u8]>) {
    out.extend_from_slice(b"\r\n");
    if let Some(block) = block {
        out.extend_from_slice(block);
        out.extend_from_slice(b"\r\n");
    }
}

fn store(out: &mut Vec<u8>, s: &Store<'_>) {
    out.extend_from_slice(match (s.cas, s.mode) {
        (Some(_), _) => b"cas ",
        (None, StoreMode::Set) => b"set ",
        (None, StoreMode::Add) => b"add ",
        (None, StoreMode::Replace) => b"replace ",
        (None, StoreMode::Append) => b"append ",
        (None, StoreMode::Prepend) => b"prepend ",
        (None, StoreMode::Rotate { .. }) => b"rotate ",
    });
    out.extend_from_slice(s.key);
    out.push(b' ');
    put_u64(out, u64::from(s.flags));
    out.push(b' ');
    put_i64(out, i64::from(s.exptime));
    out.push(b' ');
    let (len, block) = data_parts(&s.data);
    put_u64(out, len as u64);
    if let Some(cas) = s.cas {
        out.push(b' ');
        put_u64(out, cas);
    } else if let StoreMode::Rotate { max } = s.mode {
        out.push(b' ');
        put_u64(out, u64::from(max));
    }
    noreply(out, s.noreply);
    data_block(out, block);
}

fn meta_key(out: &mut Vec<u8>, key: &MetaKey<'_>) {
    if key.binary {
        put_base64(out, &key.bytes);
    } else {
        out.extend_from_slice(&key.bytes);
    }
}

/// `<cmd> <key>[ <datalen>]` and the flags, without the line ending.
fn meta_line(
    out: &mut Vec<u8>,
    cmd: &[u8],
    key: &MetaKey<'_>,
    data_len: Option<usize>,
    flags: &MetaFlags<'_>,
) {
    out.extend_from_slice(cmd);
    out.push(b' ');
    meta_key(out, key);
    if let Some(len) = data_len {
        out.push(b' ');
        put_u64(out, len as u64);
    }
    let mut has_b = false;
    for flag in flags.iter() {
        has_b |= flag.code == b'b';
        out.push(b' ');
        out.push(flag.code);
        out.extend_from_slice(flag.token);
    }
    if key.binary && !has_b {
        out.extend_from_slice(b" b");
    }
}

fn meta_set(out: &mut Vec<u8>, m: &MetaSet<'_>) {
    let (len, block) = data_parts(&m.data);
    meta_line(out, b"ms", &m.key, Some(len), &m.flags);
    data_block(out, block);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Frame, Limits};

    fn parse_one<'a>(wire: &'a [u8], limits: &Limits) -> (Request<'a>, usize) {
        match parse(wire, limits) {
            Frame::Request { request, len } => (request, len),
            other => panic!("{:?} parsed as {other:?}", String::from_utf8_lossy(wire)),
        }
    }

    #[test]
    fn canonical_requests_parse_back_equal() {
        let store = Store {
            mode: StoreMode::Append,
            cas: None,
            key: b"k",
            flags: 3,
            exptime: i32::MIN,
            data: Data::Bytes(b"a\r\nb"),
            noreply: true,
        };
        let mut meta_flags = MetaFlags::with_raw(b" T5 O9 b");
        meta_flags.ttl = Some(5);
        let requests = [
            Request::Store(store.clone()),
            Request::Store(Store {
                cas: Some(0),
                mode: StoreMode::Set,
                ..store
            }),
            Request::Delete(Delete {
                key: b"k",
                noreply: false,
            }),
            Request::Arith(Arith {
                key: b"k",
                incr: false,
                delta: 0,
                noreply: true,
            }),
            Request::Touch(Touch {
                key: b"\x80",
                exptime: i32::MAX,
                noreply: false,
            }),
            Request::FlushAll(FlushAll {
                delay: FlushDelay::Exptime(-5),
                noreply: true,
            }),
            Request::Verbosity {
                level: None,
                noreply: false,
            },
            Request::CacheMemlimit {
                megabytes: Some(u32::MAX),
                noreply: true,
            },
            Request::Shutdown(ShutdownMode::Graceful),
            Request::RefreshCerts { noreply: false },
            Request::RefreshCerts { noreply: true },
            Request::MetaSet(MetaSet {
                key: MetaKey {
                    bytes: std::borrow::Cow::Borrowed(b" \x00\n"),
                    binary: true,
                },
                mode: StoreMode::Set,
                data: Data::Bytes(b"v"),
                flags: meta_flags,
            }),
            Request::MetaNoop,
            Request::LruCrawler(LruCrawler::Metadump(b"1,2")),
            Request::LruCrawler(LruCrawler::Sleep(0)),
            Request::LruCrawler(LruCrawler::Disable),
            Request::Watch(WatchKinds::EVICTIONS.with(WatchKinds::PROXYUSER)),
        ];
        for request in requests {
            let mut wire = Vec::new();
            request.compose(&mut wire);
            let (parsed, len) = parse_one(&wire, &Limits::default());
            assert_eq!(len, wire.len());
            assert_eq!(parsed, request);
        }
    }

    #[test]
    fn binary_key_without_its_flag_gets_one() {
        let request = Request::MetaGet(MetaGet {
            key: MetaKey {
                bytes: std::borrow::Cow::Borrowed(b"\x00\x01"),
                binary: true,
            },
            flags: MetaFlags::with_raw(b" v"),
        });
        let mut wire = Vec::new();
        request.compose(&mut wire);
        assert_eq!(wire, b"mg AAE= v b\r\n");
    }

    #[test]
    fn too_large_writes_the_line_the_frame_covered() {
        let limits = Limits {
            item_size_max: 100,
            ..Limits::default()
        };
        for input in [&b"set k 0 0 500\r\n"[..], b"ms k 500 T0 q\r\n"] {
            let (request, len) = parse_one(input, &limits);
            assert!(matches!(
                request,
                Request::Store(Store {
                    data: Data::TooLarge { len: 500 },
                    ..
                }) | Request::MetaSet(MetaSet {
                    data: Data::TooLarge { len: 500 },
                    ..
                })
            ));
            let mut wire = Vec::new();
            request.compose(&mut wire);
            assert_eq!(wire, &input[..len]);
            assert_eq!(parse_one(&wire, &limits).0, request);
        }
    }
}
