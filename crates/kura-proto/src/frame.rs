//! Framing: finds one whole request at the front of a read buffer and parses
//! it. "Need more bytes" is the cheap [`Frame::Incomplete`] value; a bad
//! request is a [`Frame::Error`] carrying memcached's reply and how many
//! bytes to drop so the connection stays in step.

use crate::error::Error;
use crate::parsing::{err, Parsed};
use crate::request::Request;
use crate::tokens::Tokens;
use crate::{meta, text};

/// Longest key the text protocols accept.
pub const KEY_MAX_LENGTH: usize = 250;

/// A request line with no newline within this many bytes closes the
/// connection, unless it is a `get`/`gets` (memcached's rule).
pub const MAX_LINE_WITHOUT_NEWLINE: usize = 2048;

/// Server limits the parser needs to frame requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The item size limit (`-I`), in bytes.
    pub item_size_max: usize,
    /// Whether CAS is enabled (it costs 8 bytes per item in memcached's
    /// accounting, which kura reproduces for the item size limit).
    pub cas_enabled: bool,
    /// Longest multi-get line accepted before the connection is closed.
    pub max_get_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            item_size_max: 1024 * 1024,
            cas_enabled: true,
            max_get_line: 1024 * 1024,
        }
    }
}

impl Limits {
    /// memcached's item size test: its item header (48 bytes), the key and
    /// a NUL, the data with its `\r\n`, 8 bytes of CAS when enabled and 4
    /// bytes of client flags when nonzero must fit in `item_size_max`.
    pub fn too_large(&self, key_len: usize, flags: u32, data_len: usize) -> bool {
        let total = 48
            + key_len
            + 1
            + data_len.saturating_add(2)
            + if self.cas_enabled { 8 } else { 0 }
            + if flags != 0 { 4 } else { 0 };
        total > self.item_size_max
    }
}

/// The outcome of looking for one request at the front of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// More bytes are needed. `needed` is the total length of the frame when
    /// already known (a storage command waiting for its data), else 0.
    Incomplete { needed: usize },
    /// A request occupying the first `len` bytes. For a storage request
    /// whose data is [`Data::TooLarge`](crate::Data), `len` covers the
    /// request line only and the `len + 2` payload bytes that follow must
    /// be discarded as they arrive.
    Request { request: Request<'a>, len: usize },
    /// A bad request occupying the first `len` bytes; afterwards `swallow`
    /// more bytes (a payload that may not have arrived yet) are discarded.
    /// The reply is [`Error::as_bytes`], unless `quiet` (a `noreply`
    /// request, whose errors memcached does not send either).
    Error {
        error: Error,
        len: usize,
        swallow: usize,
        quiet: bool,
    },
    /// Close the connection: a garbage line with no newline, or a request
    /// line that looks like HTTP (memcached's defence against cross-protocol
    /// requests).
    Close,
}

/// Finds and parses the request at the front of `buf`.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Frame<'a> {
    frame(buf, limits, true)
}

/// [`parse`], with or without the shortcut for one-key gets (its tests
/// compare the two).
fn frame<'a>(buf: &'a [u8], limits: &Limits, shortcut: bool) -> Frame<'a> {
    // The line ends at its newline; memcached reads it as a C string, so
    // its request ends at a NUL before that. One scan finds whichever
    // comes first.
    let (nl, nul) = match line_end(buf) {
        Some(i) if buf[i] == b'\n' => (Some(i), None),
        Some(i) => (memchr::memchr(b'\n', &buf[i..]).map(|j| i + j), Some(i)),
        None => (None, None),
    };
    let Some(nl) = nl else {
        if buf.len() > MAX_LINE_WITHOUT_NEWLINE {
            return if is_multiget_prefix(buf) && buf.len() <= limits.max_get_line {
                Frame::Incomplete { needed: 0 }
            } else {
                Frame::Close
            };
        }
        return Frame::Incomplete { needed: 0 };
    };
    let line_len = nl + 1;
    let line = match nul {
        Some(nul) => &buf[..nul],
        None if nl > 1 && buf[nl - 1] == b'\r' => &buf[..nl - 1],
        None => &buf[..nl],
    };
    if shortcut {
        if let Some(request) = text::one_key_get(line) {
            return Frame::Request {
                request,
                len: line_len,
            };
        }
    }
    let tokens = Tokens::new(line);
    let parsed = dispatch(line, &tokens, limits);
    match parsed {
        Parsed::Close => Frame::Close,
        Parsed::Line(request) => Frame::Request {
            request,
            len: line_len,
        },
        Parsed::Error {
            error,
            swallow,
            quiet,
        } => Frame::Error {
            error,
            len: line_len,
            swallow,
            quiet,
        },
        Parsed::WithData(d) => {
            if d.too_large {
                let len = d.data_len;
                return Frame::Request {
                    request: d.with_data(crate::Data::TooLarge { len }),
                    len: line_len,
                };
            }
            let total = line_len + d.data_len + 2;
            if buf.len() < total {
                return Frame::Incomplete { needed: total };
            }
            if &buf[total - 2..total] != b"\r\n" {
                return Frame::Error {
                    error: Error::BadDataChunk,
                    len: total,
                    swallow: 0,
                    quiet: d.quiet_errors,
                };
            }
            let data = &buf[line_len..line_len + d.data_len];
            Frame::Request {
                request: d.with_data(crate::Data::Bytes(data)),
                len: total,
            }
        }
    }
}

/// Where a line's newline or NUL is: memchr's word-at-a-time scan over
/// the first bytes, where nearly every request line ends (its vector scan
/// pays more to set up than a short line costs to read), then its vector
/// scan over the rest.
fn line_end(buf: &[u8]) -> Option<usize> {
    let (head, rest) = buf.split_at(buf.len().min(SHORT_LINE));
    memchr::arch::all::memchr::Two::new(b'\n', 0)
        .find(head)
        .or_else(|| memchr::memchr2(b'\n', 0, rest).map(|i| head.len() + i))
}

/// The bytes scanned word by word before the vector scan takes over.
const SHORT_LINE: usize = 64;

fn dispatch<'a>(line: &'a [u8], t: &Tokens<'a>, limits: &Limits) -> Parsed<'a> {
    let cmd = t.get(0);
    if t.is_empty() || cmd.len() < 2 {
        return err(Error::UnknownCommand);
    }
    if cmd[0] == b'm' && cmd.len() == 2 {
        return meta::parse(cmd[1], line, t, limits);
    }
    text::parse(cmd, line, t, limits)
}

fn is_multiget_prefix(buf: &[u8]) -> bool {
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

#[cfg(test)]
mod shortcut_tests {
    use super::*;
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::sample::select(vec![
                "get", "gets", "gat", "bget", "get ", "gets ", " ", "  ", "\r", "\n", "\r\n", "\0",
                "\t", "k", "key:1", "noreply", "g", "e", "t", "s", "0",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
            (1usize..300).prop_map(|n| vec![b'x'; n]),
            prop::collection::vec(any::<u8>(), 0..8),
        ]
    }

    proptest! {
        /// The one-key get shortcut frames every input as the general path
        /// does: the same request, length, error or want of bytes.
        #[test]
        fn the_get_shortcut_changes_no_frame(
            head in prop::sample::select(vec!["get ", "gets ", "get", "gets", "", " get "]),
            parts in prop::collection::vec(piece(), 0..6),
        ) {
            let mut buf = head.as_bytes().to_vec();
            for p in parts {
                buf.extend_from_slice(&p);
            }
            buf.extend_from_slice(b"\r\n");
            let limits = Limits::default();
            prop_assert_eq!(frame(&buf, &limits, true), frame(&buf, &limits, false));
        }

        /// The line's end is found wherever it is: within the first
        /// SHORT_LINE bytes, at their edge or beyond.
        #[test]
        fn a_line_ends_at_its_first_newline_or_nul(
            len in 0usize..200,
            marks in prop::collection::vec((0usize..200, prop::sample::select(vec![b'\n', 0u8])), 0..3),
        ) {
            let mut buf = vec![b'x'; len];
            for (at, byte) in marks {
                if at < len {
                    buf[at] = byte;
                }
            }
            let want = buf.iter().position(|&b| b == b'\n' || b == 0);
            prop_assert_eq!(line_end(&buf), want);
        }
    }

    #[test]
    fn one_key_gets_take_the_shortcut() {
        for (line, cas) in [(&b"get a"[..], false), (b"gets key:1\r", true)] {
            assert_eq!(
                crate::text::one_key_get(line),
                Some(Request::Get(crate::Get::new(
                    cas,
                    None,
                    &line[3 + usize::from(cas)..]
                )))
            );
        }
        for line in [
            &b"get a b"[..],
            b"get  a",
            b"get ",
            b"gat 0 a",
            b"got a",
            &[b"get ".as_slice(), &[b'x'; 251]].concat(),
        ] {
            assert_eq!(crate::text::one_key_get(line), None, "{line:?}");
        }
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;
    use crate::Request;

    #[test]
    fn keys_take_any_byte_but_space_and_nul() {
        // memaslap's keys start with eight 0x10 bytes.
        let wire = b"set \x10\x10\x10\x10\x10\x10\x10\x10k\x01\t\x7f\x80\xff 0 0 1\r\nx\r\n";
        match parse(wire, &Limits::default()) {
            Frame::Request {
                request: Request::Store(s),
                len,
            } => {
                assert_eq!(len, wire.len());
                assert_eq!(
                    s.key,
                    b"\x10\x10\x10\x10\x10\x10\x10\x10k\x01\t\x7f\x80\xff"
                );
            }
            other => panic!("{other:?}"),
        }
        for wire in [
            &b"get a\rb \x1b\r\n"[..],
            b"mg \x01\x7f v\r\n",
            b"md \x10\x10\r\n",
            b"ma \x10\x10\r\n",
            b"me \x10\x10\r\n",
            b"delete \x10\r\n",
            b"incr \x10 1\r\n",
            b"touch \x10 1\r\n",
        ] {
            assert!(
                matches!(parse(wire, &Limits::default()), Frame::Request { .. }),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn a_nul_ends_the_request_line() {
        let limits = Limits::default();
        match parse(b"get a\0b c\r\n", &limits) {
            Frame::Request {
                request: Request::Get(g),
                len: 11,
            } => assert_eq!(g.keys().collect::<Vec<_>>(), [&b"a"[..]]),
            other => panic!("{other:?}"),
        }
        // `set a` alone has too few tokens: ERROR, and nothing swallowed.
        assert_eq!(
            parse(b"set a\0 0 0 1\r\nx\r\n", &limits),
            Frame::Error {
                error: Error::UnknownCommand,
                len: 14,
                swallow: 0,
                quiet: false,
            }
        );
        assert_eq!(
            parse(b"ms a\0m 1\r\nx\r\n", &limits),
            Frame::Error {
                error: Error::BadFormat,
                len: 10,
                swallow: 0,
                quiet: false,
            }
        );
        assert!(matches!(
            parse(b"\0version\r\n", &limits),
            Frame::Error {
                error: Error::UnknownCommand,
                ..
            }
        ));
    }

    #[test]
    fn keys_over_250_bytes_are_refused() {
        let mut wire = b"set ".to_vec();
        wire.extend(std::iter::repeat_n(0x10, 251));
        wire.extend_from_slice(b" 0 0 1\r\nx\r\n");
        assert!(matches!(
            parse(&wire, &Limits::default()),
            Frame::Error {
                error: Error::BadFormat,
                ..
            }
        ));
    }
}
