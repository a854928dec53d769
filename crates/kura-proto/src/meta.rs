//! The meta commands `mg`, `ms`, `md`, `ma`, `me`, `mn`. Flags are parsed
//! once for every command, as memcached does; flags a command does not use
//! are accepted and ignored. kura also accepts the newer `E` (explicit CAS)
//! and `x` (drop the value on delete) flags.

use std::borrow::Cow;

use base64::Engine;

use crate::error::Error;
use crate::frame::{Limits, KEY_MAX_LENGTH};
use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::parsing::{after_token, data_length, err, valid_key, DataRequest, Parsed};
use crate::request::*;
use crate::tokens::Tokens;

/// memcached refuses meta requests with this many tokens or more
/// (counting its terminal token).
const MAX_META_TOKENS: usize = 20;

/// Longest opaque (`O`) token, including the `O`.
pub const MAX_OPAQUE_LENGTH: usize = 32;

pub(crate) fn parse<'a>(code: u8, line: &'a [u8], t: &Tokens<'a>, limits: &Limits) -> Parsed<'a> {
    match code {
        b'n' => Parsed::Line(Request::MetaNoop),
        b'g' => get(line, t),
        b's' => set(line, t, limits),
        b'd' => delete(line, t),
        b'a' => arith(line, t),
        b'e' => debug(t),
        b't' => track(t),
        _ => err(Error::UnknownCommand),
    }
}

/// `mt [on|off]`: kura's invalidation subscription (docs/protocol-extensions.md).
fn track<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    match (t.len(), t.get(1)) {
        (1, _) | (2, b"on") => Parsed::Line(Request::Track { on: true }),
        (2, b"off") => Parsed::Line(Request::Track { on: false }),
        _ => err(Error::BadFormat),
    }
}

fn decode_key(key: &[u8]) -> Option<Vec<u8>> {
    let decoded = base64::engine::general_purpose::STANDARD.decode(key).ok()?;
    (!decoded.is_empty()).then_some(decoded)
}

/// memcached's flag pre-parse: duplicates and unknown flags end parsing at
/// once; other bad tokens are noted and the last one noted is reported.
fn preparse<'a>(key: &'a [u8], raw: &'a [u8]) -> Result<(MetaKey<'a>, MetaFlags<'a>), Error> {
    let mut f = MetaFlags::with_raw(raw);
    let mut seen = [false; 128];
    let mut key = MetaKey {
        bytes: Cow::Borrowed(key),
        binary: false,
    };
    let mut error = None;
    for flag in f.clone().iter() {
        let c = flag.code;
        if c >= 127 || seen[usize::from(c)] {
            return Err(Error::DuplicateFlag);
        }
        seen[usize::from(c)] = true;
        let tok = flag.token;
        match c {
            b'b' => match decode_key(&key.bytes) {
                Some(k) => {
                    key.bytes = Cow::Owned(k);
                    key.binary = true;
                }
                None => error = Some(Error::KeyDecode),
            },
            b'N' => match parse_i32(tok) {
                Some(v) => f.vivify = Some(v),
                None => error = Some(Error::BadToken),
            },
            b'T' => match parse_i32(tok) {
                Some(v) => f.ttl = Some(v),
                None => error = Some(Error::BadToken),
            },
            b'R' => match parse_i32(tok) {
                Some(v) => f.recache = Some(v),
                None => error = Some(Error::BadToken),
            },
            b'F' => match parse_u32(tok) {
                Some(v) => f.client_flags = Some(v),
                None => error = Some(error.unwrap_or(Error::BadFormat)),
            },
            b'C' => match parse_u64(tok) {
                Some(v) => f.compare_cas = Some(v),
                None => error = Some(Error::BadToken),
            },
            b'E' => match parse_u64(tok) {
                Some(v) => f.explicit_cas = Some(v),
                None => error = Some(Error::BadToken),
            },
            b'M' => match tok {
                [m] => f.mode = Some(*m),
                _ => error = Some(Error::ModeTokenLength),
            },
            b'J' => match parse_u64(tok) {
                Some(v) => f.initial = Some(v),
                None => error = Some(Error::InvalidInitial),
            },
            b'D' => match parse_u64(tok) {
                Some(v) => f.delta = Some(v),
                None => error = Some(Error::InvalidDelta),
            },
            b'w' => match parse_u32(tok) {
                Some(v) => f.window = Some(v),
                None => error = Some(Error::BadToken),
            },
            b'q' => f.quiet = true,
            b'v' => f.value = true,
            b'u' => f.no_bump = true,
            b'I' => f.invalidate = true,
            b'x' => f.remove_value = true,
            b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'h' | b'l' => {}
            _ => return Err(Error::InvalidFlag),
        }
    }
    match error {
        Some(e) => Err(e),
        None => {
            if !key.binary && !valid_key(&key.bytes) {
                return Err(Error::BadFormat);
            }
            Ok((key, f))
        }
    }
}

fn opaque_too_long(f: &MetaFlags<'_>) -> bool {
    f.iter()
        .any(|fl| fl.code == b'O' && fl.token.len() + 1 > MAX_OPAQUE_LENGTH)
}

fn get<'a>(line: &'a [u8], t: &Tokens<'a>) -> Parsed<'a> {
    if t.len() < 2 {
        return err(Error::UnknownCommand);
    }
    if t.get(1).len() > KEY_MAX_LENGTH {
        return err(Error::BadFormat);
    }
    if t.ntokens() > MAX_META_TOKENS {
        return err(Error::GetFlagsTooLong);
    }
    match preparse(t.get(1), after_token(line, t, 1)) {
        Err(e) => err(e),
        Ok((_, f)) if opaque_too_long(&f) => err(Error::OpaqueTooLong),
        Ok((key, flags)) => Parsed::Line(Request::MetaGet(MetaGet { key, flags })),
    }
}

fn set<'a>(line: &'a [u8], t: &Tokens<'a>, limits: &Limits) -> Parsed<'a> {
    if t.len() < 2 {
        return err(Error::UnknownCommand);
    }
    if t.get(1).len() > KEY_MAX_LENGTH || t.len() == 2 {
        return err(Error::BadFormat);
    }
    if t.ntokens() > MAX_META_TOKENS {
        return err(Error::FlagsTooLong);
    }
    let Some(data_len) = parse_i32(t.get(2)).and_then(data_length) else {
        return err(Error::BadFormat);
    };
    let swallow = |error| Parsed::Error {
        error,
        swallow: data_len + 2,
        quiet: false,
    };
    let (key, flags) = match preparse(t.get(1), after_token(line, t, 2)) {
        Ok(kf) => kf,
        Err(e) => return swallow(e),
    };
    if opaque_too_long(&flags) {
        return swallow(Error::OpaqueTooLong);
    }
    let mode = match flags.mode {
        None | Some(b'S') => StoreMode::Set,
        Some(b'E') => StoreMode::Add,
        Some(b'A') => StoreMode::Append,
        Some(b'P') => StoreMode::Prepend,
        Some(b'R') => StoreMode::Replace,
        // kura's rotation mode: `w` gives the window, at least one byte.
        Some(b'W') => match flags.window {
            Some(max) if max > 0 => StoreMode::Rotate { max },
            _ => return swallow(Error::BadToken),
        },
        Some(_) => return swallow(Error::InvalidSetMode),
    };
    let too_large = limits.too_large(key.bytes.len(), flags.client_flags.unwrap_or(0), data_len);
    Parsed::WithData(DataRequest {
        request: Request::MetaSet(MetaSet {
            key,
            mode,
            data: Data::Bytes(&[]),
            flags,
        }),
        data_len,
        too_large,
        quiet_errors: false,
    })
}

fn delete<'a>(line: &'a [u8], t: &Tokens<'a>) -> Parsed<'a> {
    if t.len() < 2 {
        return err(Error::UnknownCommand);
    }
    if t.get(1).len() > KEY_MAX_LENGTH {
        return err(Error::BadFormat);
    }
    if t.ntokens() > MAX_META_TOKENS {
        return err(Error::FlagsTooLong);
    }
    match preparse(t.get(1), after_token(line, t, 1)) {
        Err(Error::BadFormat) => err(Error::BadFormat),
        Err(_) => err(Error::InvalidOrDuplicateFlag),
        Ok((_, f)) if opaque_too_long(&f) => err(Error::OpaqueTooLong),
        Ok((key, flags)) => Parsed::Line(Request::MetaDelete(MetaDelete { key, flags })),
    }
}

fn arith<'a>(line: &'a [u8], t: &Tokens<'a>) -> Parsed<'a> {
    if t.len() < 2 {
        return err(Error::UnknownCommand);
    }
    if t.get(1).len() > KEY_MAX_LENGTH {
        return err(Error::BadFormat);
    }
    if t.ntokens() > MAX_META_TOKENS {
        return err(Error::FlagsTooLong);
    }
    let (key, flags) = match preparse(t.get(1), after_token(line, t, 1)) {
        Err(Error::BadFormat) => return err(Error::BadFormat),
        Err(_) => return err(Error::InvalidOrDuplicateFlag),
        Ok(kf) => kf,
    };
    let incr = match flags.mode {
        None | Some(b'I') | Some(b'+') => true,
        Some(b'D') | Some(b'-') => false,
        Some(_) => return err(Error::InvalidArithMode),
    };
    if opaque_too_long(&flags) {
        return err(Error::OpaqueTooLong);
    }
    Parsed::Line(Request::MetaArith(MetaArith { key, incr, flags }))
}

fn debug<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    let raw = t.get(1);
    if t.len() < 2 || raw.len() > KEY_MAX_LENGTH {
        return err(Error::BadFormat);
    }
    let key = if t.len() >= 3 && t.get(2) == b"b" {
        match decode_key(raw) {
            Some(k) => MetaKey {
                bytes: Cow::Owned(k),
                binary: true,
            },
            None => return err(Error::BadFormat),
        }
    } else {
        if !valid_key(raw) {
            return err(Error::BadFormat);
        }
        MetaKey {
            bytes: Cow::Borrowed(raw),
            binary: false,
        }
    };
    Parsed::Line(Request::MetaDebug(MetaDebug { key }))
}
