//! The framing of memcached's ASCII authentication (`-Y`), which a
//! connection speaks until it has authenticated: not the text protocol's.
//! memcached reads a line; unless it is `set` with at least five tokens and
//! a number as the fifth, the answer is `CLIENT_ERROR unauthenticated` and
//! only the line is consumed. Otherwise only that number is used (the key,
//! flags and exptime can be anything: the emcache client sends
//! `set _ _ _ 12`), and that many bytes plus two are read as the token,
//! whatever they hold.

use crate::number::parse_u64;
use crate::tokens::Tokens;
use crate::MAX_LINE_WITHOUT_NEWLINE;

/// The longest token (with its `\r\n`) memcached's 16 KiB read buffer holds
/// before the line is gone; with a longer one memcached closes the
/// connection once its buffer is full, kura as soon as it reads the line.
pub const MAX_AUTH_DATA: usize = 16 * 1024;

/// What is at the front of a connection's buffer before authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFrame<'a> {
    /// More bytes are needed: `needed` in all when known, else 0.
    Incomplete { needed: usize },
    /// A line that is not an authentication request (`len` bytes, the
    /// line): `CLIENT_ERROR unauthenticated`.
    NotAuth { len: usize },
    /// An authentication request of `len` bytes. `token` is its data
    /// without the final `\r\n`, or `None` when the data does not end with
    /// `\r\n` (`CLIENT_ERROR bad command line termination`).
    Token { len: usize, token: Option<&'a [u8]> },
    /// No newline within 2048 bytes, or a token longer than
    /// [`MAX_AUTH_DATA`]: close the connection.
    Close,
}

/// Frames the request at the front of `buf` before authentication.
pub fn parse_auth(buf: &[u8]) -> AuthFrame<'_> {
    // memcached waits for two bytes before it looks (no request is shorter).
    if buf.len() < 2 {
        return AuthFrame::Incomplete { needed: 0 };
    }
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > MAX_LINE_WITHOUT_NEWLINE {
            AuthFrame::Close
        } else {
            AuthFrame::Incomplete { needed: 0 }
        };
    };
    let line_len = nl + 1;
    // The line as memcached tokenizes it: up to the newline (a `\r` stays
    // on the last token, where the number parser skips it) or a NUL.
    let mut line = &buf[..nl];
    if let Some(nul) = line.iter().position(|&b| b == 0) {
        line = &line[..nul];
    }
    let t = Tokens::new(line);
    // strtoul's reading, truncated to the 32 bits memcached keeps.
    let size = parse_u64(t.get(4)).map(|n| n as u32);
    let size = match size {
        Some(n) if t.len() >= 5 && t.get(0) == b"set" => n as usize,
        _ => return AuthFrame::NotAuth { len: line_len },
    };
    if size + 2 > MAX_AUTH_DATA {
        return AuthFrame::Close;
    }
    let len = line_len + size + 2;
    if buf.len() < len {
        return AuthFrame::Incomplete { needed: len };
    }
    let data = &buf[line_len..len];
    let token = data.strip_suffix(b"\r\n");
    AuthFrame::Token { len, token }
}

/// The user and password of a token: its first two space-separated words
/// (before any NUL); `None` when it has fewer (`CLIENT_ERROR bad
/// authentication token format`).
pub fn user_password(token: &[u8]) -> Option<(&[u8], &[u8])> {
    let token = token.split(|&b| b == 0).next().unwrap_or_default();
    let t = Tokens::new(token);
    (t.len() >= 2).then(|| (t.get(0), t.get(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_length_of_the_set_line_counts() {
        for (wire, token) in [
            (
                &b"set _ _ _ 12\r\nalice s3cret\r\n"[..],
                &b"alice s3cret"[..],
            ),
            (b"set k 0 0 12 noreply\r\nalice s3cret\r\n", b"alice s3cret"),
            (b"set a b c +6 x y\nbob pw\r\n", b"bob pw"),
            // 2^32 + 6: memcached keeps the low 32 bits.
            (b"set _ _ _ 4294967302\r\nbob pw\r\n", b"bob pw"),
        ] {
            assert_eq!(
                parse_auth(wire),
                AuthFrame::Token {
                    len: wire.len(),
                    token: Some(token)
                },
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn other_lines_are_not_authentication() {
        for wire in [
            &b"get a\r\nx"[..],
            b"set _ _ _\r\n",
            b"set _ _ _ x\r\n",
            b"set _ _ _ -1\r\n",
            b"set _ _ _ 12x\r\n",
            b"add _ _ _ 12\r\n",
            b"SET _ _ _ 12\r\n",
            b"set _\0 _ _ 12\r\n",
            b"\r\n",
        ] {
            let line = wire.iter().position(|&b| b == b'\n').unwrap() + 1;
            assert_eq!(
                parse_auth(wire),
                AuthFrame::NotAuth { len: line },
                "{wire:?}"
            );
        }
    }

    #[test]
    fn framing_edges() {
        assert_eq!(parse_auth(b"s"), AuthFrame::Incomplete { needed: 0 });
        assert_eq!(
            parse_auth(b"set _ _ _ 6"),
            AuthFrame::Incomplete { needed: 0 }
        );
        assert_eq!(
            parse_auth(b"set _ _ _ 6\r\nbob"),
            AuthFrame::Incomplete { needed: 21 }
        );
        assert_eq!(
            parse_auth(b"set _ _ _ 6\r\nbob pwXY"),
            AuthFrame::Token {
                len: 21,
                token: None
            }
        );
        assert_eq!(parse_auth(&[b'x'; 2049]), AuthFrame::Close);
        assert_eq!(parse_auth(b"set _ _ _ 16383\r\n"), AuthFrame::Close);
        assert_eq!(
            parse_auth(b"set _ _ _ 16382\r\n"),
            AuthFrame::Incomplete { needed: 16401 }
        );
    }

    #[test]
    fn tokens_hold_a_user_and_a_password() {
        assert_eq!(
            user_password(b"alice s3cret"),
            Some((&b"alice"[..], &b"s3cret"[..]))
        );
        assert_eq!(
            user_password(b"  bob  pw extra"),
            Some((&b"bob"[..], &b"pw"[..]))
        );
        assert_eq!(user_password(b"alice"), None);
        assert_eq!(user_password(b"alice \0s3cret"), None);
        assert_eq!(user_password(b""), None);
    }
}
