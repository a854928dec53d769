//! memcached's meta protocol: `mg key f v` for gets, quiet `mg key k f v q`
//! lines closed by `mn` for multi-gets, `ms key len F<flags>` for sets
//! (quiet: `q O<seq>`, so that a failure names the set it belongs to), and
//! `mn` as the no-op that closes a run.

use super::{
    is_error_line, line, parse_num, push_num, show, Failure, HitCursor, Op, Outcome, Parsed,
    Pending, Verifier,
};
use crate::keys::Keyspace;
use crate::value;

pub(super) fn encode(op: &Op, seq: u32, keys: &Keyspace, out: &mut Vec<u8>) {
    match op {
        Op::Get(k) => {
            out.extend_from_slice(b"mg ");
            keys.write_key(*k, out);
            out.extend_from_slice(b" f v\r\n");
        }
        Op::MultiGet(ks) => {
            for k in ks {
                out.extend_from_slice(b"mg ");
                keys.write_key(*k, out);
                out.extend_from_slice(b" k f v q\r\n");
            }
            out.extend_from_slice(b"mn\r\n");
        }
        Op::Set {
            key,
            salt,
            len,
            quiet,
        } => {
            out.extend_from_slice(b"ms ");
            keys.write_key(*key, out);
            out.push(b' ');
            push_num(out, *len as u64);
            out.extend_from_slice(b" F");
            push_num(out, u64::from(value::flags_for(*salt)));
            if *quiet {
                out.extend_from_slice(b" q O");
                push_num(out, u64::from(seq));
            }
            out.extend_from_slice(b"\r\n");
            value::fill(*key, *salt, *len, out);
            out.extend_from_slice(b"\r\n");
        }
        Op::Sync => out.extend_from_slice(b"mn\r\n"),
    }
}

pub(super) fn parse(buf: &[u8], pending: Option<&Pending>, v: &Verifier) -> Parsed {
    let Some(first) = line(buf) else {
        return Parsed::Incomplete;
    };
    // Only quiet sets carry an opaque: a status line with one is a quiet
    // set's failure, whatever is pending.
    if is_status_with_opaque(first) {
        return Parsed::QuietFailure {
            used: first.len() + 2,
            what: show(first),
        };
    }
    let Some(p) = pending else {
        return Parsed::Garbage(format!("reply to nothing: {:?}", show(first)));
    };
    match &p.op {
        Op::Get(k) => get_reply(buf, *k, v),
        Op::MultiGet(ks) => multi_get_reply(buf, ks, v),
        Op::Set { .. } => status_reply(first, b"HD"),
        Op::Sync => status_reply(first, b"MN"),
    }
}

/// `NS O12` and the like: a two-letter status other than `VA`, with an `O` token.
fn is_status_with_opaque(l: &[u8]) -> bool {
    let mut tokens = l.split(|&b| b == b' ');
    let status = tokens.next().unwrap_or_default();
    status.len() == 2
        && status.iter().all(u8::is_ascii_uppercase)
        && status != b"VA"
        && tokens.any(|t| t.first() == Some(&b'O'))
}

fn status_reply(l: &[u8], ok: &[u8]) -> Parsed {
    let failure = if l == ok {
        None
    } else if is_error_line(l) || matches!(l, b"NS" | b"EX" | b"NF") {
        Some(Failure::Server(show(l)))
    } else {
        return Parsed::Garbage(format!("unexpected reply {:?}", show(l)));
    };
    Parsed::Reply {
        used: l.len() + 2,
        outcome: Outcome {
            failure,
            ..Outcome::default()
        },
    }
}

/// A `VA` reply: its total length, the key token (without `k`) and the value.
struct Hit<'a> {
    used: usize,
    key: Option<&'a [u8]>,
    flags: Option<u32>,
    value: &'a [u8],
}

/// Reads `VA <len> <flags>\r\n<data>\r\n`; `Ok(None)` when incomplete.
fn value_reply<'a>(buf: &'a [u8], l: &'a [u8]) -> Result<Option<Hit<'a>>, Parsed> {
    let mut tokens = l.split(|&b| b == b' ').skip(1);
    let Some(len) = tokens.next().and_then(parse_num::<usize>) else {
        return Err(Parsed::Garbage(format!("malformed VA line {:?}", show(l))));
    };
    let mut hit = Hit {
        used: 0,
        key: None,
        flags: None,
        value: &[],
    };
    for t in tokens {
        match t.first() {
            Some(b'k') => hit.key = Some(&t[1..]),
            Some(b'f') => hit.flags = parse_num(&t[1..]),
            _ => {}
        }
    }
    let start = l.len() + 2;
    let end = start.saturating_add(len);
    if buf.len() < end.saturating_add(2) {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(Parsed::Garbage(format!(
            "value of {len} bytes not followed by CRLF"
        )));
    }
    hit.value = &buf[start..end];
    hit.used = end + 2;
    Ok(Some(hit))
}

fn get_reply(buf: &[u8], key: u64, v: &Verifier) -> Parsed {
    let Some(l) = line(buf) else {
        return Parsed::Incomplete;
    };
    if l == b"EN" {
        let outcome = Outcome {
            misses: 1,
            ..Outcome::default()
        };
        return Parsed::Reply { used: 4, outcome };
    }
    if !l.starts_with(b"VA ") {
        // not a value: an error line is this get's failure, the rest garbage
        return status_reply(l, b"VA");
    }
    match value_reply(buf, l) {
        Err(garbage) => garbage,
        Ok(None) => Parsed::Incomplete,
        Ok(Some(hit)) => {
            let wanted = [key];
            let mut cursor = HitCursor::new(&wanted);
            let failure = cursor.check_next(v, hit.flags, hit.value);
            Parsed::Reply {
                used: hit.used,
                outcome: cursor.outcome(failure),
            }
        }
    }
}

/// Hits of the quiet `mg`s (misses are silent), then `MN`.
fn multi_get_reply(buf: &[u8], wanted: &[u64], v: &Verifier) -> Parsed {
    let mut pos = 0;
    let mut cursor = HitCursor::new(wanted);
    let mut failure = None;
    loop {
        let Some(l) = line(&buf[pos..]) else {
            return Parsed::Incomplete;
        };
        if l == b"MN" {
            return Parsed::Reply {
                used: pos + 4,
                outcome: cursor.outcome(failure),
            };
        }
        if is_error_line(l) {
            failure = failure.or(Some(Failure::Server(show(l))));
            pos += l.len() + 2;
            continue;
        }
        if !l.starts_with(b"VA ") {
            return Parsed::Garbage(format!("expected VA or MN, got {:?}", show(l)));
        }
        let hit = match value_reply(&buf[pos..], l) {
            Err(garbage) => return garbage,
            Ok(None) => return Parsed::Incomplete,
            Ok(Some(hit)) => hit,
        };
        let found = cursor.check_named(v, hit.key, hit.flags, hit.value);
        failure = failure.or(found);
        pos += hit.used;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{pending, value, verifier};
    use super::*;

    fn reply(buf: &[u8], op: Op) -> Parsed {
        parse(buf, Some(&pending(op)), &verifier())
    }

    #[test]
    fn encodes_quiet_sets_with_their_opaque() {
        let v = verifier();
        let mut out = Vec::new();
        let set = Op::Set {
            key: 3,
            salt: 2,
            len: 20,
            quiet: true,
        };
        encode(&set, 41, &v.keys, &mut out);
        encode(&Op::MultiGet(vec![3, 4]), 42, &v.keys, &mut out);
        let want = [
            &b"ms k03 20 F2 q O41\r\n"[..],
            &value(3, 2),
            b"\r\nmg k03 k f v q\r\nmg k04 k f v q\r\nmn\r\n",
        ]
        .concat();
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want)
        );
    }

    #[test]
    fn gets_hits_misses_and_wrong_values() {
        let hit = [&b"VA 20 f4\r\n"[..], &value(3, 4), b"\r\n"].concat();
        let got = reply(&hit, Op::Get(3));
        let outcome = Outcome {
            hits: 1,
            ..Outcome::default()
        };
        assert_eq!(
            got,
            Parsed::Reply {
                used: hit.len(),
                outcome
            }
        );
        assert_eq!(reply(&hit[..hit.len() - 1], Op::Get(3)), Parsed::Incomplete);
        let miss = reply(b"EN\r\n", Op::Get(3));
        assert!(matches!(miss, Parsed::Reply { outcome, .. } if outcome.misses == 1));
        match reply(&hit, Op::Get(4)) {
            Parsed::Reply { outcome, .. } => {
                assert!(matches!(outcome.failure, Some(Failure::WrongValue(_))))
            }
            other => panic!("{other:?}"),
        }
        let multi = [&b"VA 20 kk04 f4\r\n"[..], &value(4, 4), b"\r\nMN\r\n"].concat();
        match reply(&multi, Op::MultiGet(vec![3, 4, 5])) {
            Parsed::Reply { used, outcome } => {
                assert_eq!(used, multi.len());
                assert_eq!((outcome.hits, outcome.misses), (1, 2));
                assert_eq!(outcome.failure, None);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn quiet_failures_are_told_apart() {
        let got = parse(b"NS O12\r\nHD\r\n", None, &verifier());
        let what = "NS O12".to_string();
        assert_eq!(got, Parsed::QuietFailure { used: 8, what });
        let set = Op::Set {
            key: 1,
            salt: 1,
            len: 20,
            quiet: false,
        };
        let ns = reply(b"NS\r\n", set.clone());
        assert!(matches!(ns, Parsed::Reply { outcome, .. } if outcome.failure.is_some()));
        assert!(matches!(reply(b"STORED\r\n", set), Parsed::Garbage(_)));
        assert!(matches!(
            reply(b"MN\r\n", Op::Sync),
            Parsed::Reply { used: 4, .. }
        ));
        let oom = reply(b"SERVER_ERROR Out of memory\r\n", Op::Get(1));
        assert!(matches!(oom, Parsed::Reply { outcome, .. } if outcome.failure.is_some()));
    }
}
