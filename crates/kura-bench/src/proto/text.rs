//! memcached's text protocol: `get k1 k2 ...`, `set k flags 0 len [noreply]`,
//! and `version` as the no-op that closes a run. `noreply` sets are silent
//! even when they fail, so a text run cannot count their failures.

use super::{
    is_error_line, line, parse_num, push_num, show, Failure, HitCursor, Op, Outcome, Parsed,
    Pending, Verifier,
};
use crate::keys::Keyspace;
use crate::value;

pub(super) fn encode(op: &Op, keys: &Keyspace, out: &mut Vec<u8>) {
    match op {
        Op::Get(k) => {
            out.extend_from_slice(b"get ");
            keys.write_key(*k, out);
            out.extend_from_slice(b"\r\n");
        }
        Op::MultiGet(ks) => {
            out.extend_from_slice(b"get");
            for k in ks {
                out.push(b' ');
                keys.write_key(*k, out);
            }
            out.extend_from_slice(b"\r\n");
        }
        Op::Set {
            key,
            salt,
            len,
            quiet,
        } => {
            out.extend_from_slice(b"set ");
            keys.write_key(*key, out);
            out.push(b' ');
            push_num(out, u64::from(value::flags_for(*salt)));
            out.extend_from_slice(b" 0 ");
            push_num(out, *len as u64);
            if *quiet {
                out.extend_from_slice(b" noreply");
            }
            out.extend_from_slice(b"\r\n");
            value::fill(*key, *salt, *len, out);
            out.extend_from_slice(b"\r\n");
        }
        Op::Sync => out.extend_from_slice(b"version\r\n"),
    }
}

pub(super) fn parse(buf: &[u8], pending: Option<&Pending>, v: &Verifier) -> Parsed {
    if buf.is_empty() {
        return Parsed::Incomplete;
    }
    let Some(p) = pending else {
        return Parsed::Garbage(format!("reply to nothing: {:?}", show(buf)));
    };
    match &p.op {
        Op::Get(k) => get_reply(buf, std::slice::from_ref(k), v),
        Op::MultiGet(ks) => get_reply(buf, ks, v),
        Op::Set { .. } => status_reply(buf, b"STORED"),
        Op::Sync => match line(buf) {
            None => Parsed::Incomplete,
            Some(l) if l.starts_with(b"VERSION ") => Parsed::Reply {
                used: l.len() + 2,
                outcome: Outcome::default(),
            },
            Some(l) => Parsed::Garbage(format!("expected VERSION, got {:?}", show(l))),
        },
    }
}

/// A one-line reply: `ok` or a failure status.
fn status_reply(buf: &[u8], ok: &[u8]) -> Parsed {
    let Some(l) = line(buf) else {
        return Parsed::Incomplete;
    };
    let used = l.len() + 2;
    let failure = if l == ok {
        None
    } else if is_error_line(l) || matches!(l, b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND") {
        Some(Failure::Server(show(l)))
    } else {
        return Parsed::Garbage(format!("unexpected reply {:?}", show(l)));
    };
    Parsed::Reply {
        used,
        outcome: Outcome {
            failure,
            ..Outcome::default()
        },
    }
}

/// `VALUE key flags bytes\r\ndata\r\n` for each hit, then `END`.
fn get_reply(buf: &[u8], wanted: &[u64], v: &Verifier) -> Parsed {
    let mut pos = 0;
    let mut cursor = HitCursor::new(wanted);
    let mut failure = None;
    loop {
        let Some(l) = line(&buf[pos..]) else {
            return Parsed::Incomplete;
        };
        let next = pos + l.len() + 2;
        if l == b"END" {
            return Parsed::Reply {
                used: next,
                outcome: cursor.outcome(failure),
            };
        }
        if pos == 0 && is_error_line(l) {
            let failure = Some(Failure::Server(show(l)));
            return Parsed::Reply {
                used: next,
                outcome: Outcome {
                    failure,
                    ..Outcome::default()
                },
            };
        }
        let mut tokens = match l.strip_prefix(b"VALUE ") {
            Some(rest) => rest.split(|&b| b == b' '),
            None => return Parsed::Garbage(format!("expected VALUE or END, got {:?}", show(l))),
        };
        let (Some(key), Some(flags), Some(bytes)) = (
            tokens.next(),
            tokens.next().and_then(parse_num::<u32>),
            tokens.next().and_then(parse_num::<usize>),
        ) else {
            return Parsed::Garbage(format!("malformed VALUE line {:?}", show(l)));
        };
        let end = next.saturating_add(bytes);
        if buf.len() < end.saturating_add(2) {
            return Parsed::Incomplete;
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Parsed::Garbage(format!("value of {bytes} bytes not followed by CRLF"));
        }
        let found = cursor.check_named(v, Some(key), Some(flags), &buf[next..end]);
        failure = failure.or(found);
        pos = end + 2;
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
    fn encodes_gets_sets_and_sync() {
        let v = verifier();
        let mut out = Vec::new();
        encode(&Op::MultiGet(vec![1, 22]), &v.keys, &mut out);
        encode(&Op::Sync, &v.keys, &mut out);
        encode(
            &Op::Set {
                key: 5,
                salt: 9,
                len: 20,
                quiet: true,
            },
            &v.keys,
            &mut out,
        );
        let want = [
            &b"get k01 k22\r\nversion\r\nset k05 9 0 20 noreply\r\n"[..],
            &value(5, 9),
            b"\r\n",
        ]
        .concat();
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want)
        );
    }

    #[test]
    fn counts_hits_and_misses_and_checks_values() {
        let good = [&b"VALUE k03 4 20\r\n"[..], &value(3, 4), b"\r\nEND\r\nX"].concat();
        let got = reply(&good, Op::MultiGet(vec![2, 3, 4]));
        let outcome = Outcome {
            hits: 1,
            misses: 2,
            failure: None,
        };
        let used = good.len() - 1;
        assert_eq!(got, Parsed::Reply { used, outcome });
        for cut in 0..good.len() - 1 {
            assert_eq!(reply(&good[..cut], Op::Get(3)), Parsed::Incomplete);
        }
        // flags that are not the value's salt
        let flags = [&b"VALUE k03 5 20\r\n"[..], &value(3, 4), b"\r\nEND\r\n"].concat();
        // another key's value under this key
        let swapped = [&b"VALUE k03 4 20\r\n"[..], &value(2, 4), b"\r\nEND\r\n"].concat();
        // a key that was not asked for
        let stranger = [&b"VALUE k09 4 20\r\n"[..], &value(9, 4), b"\r\nEND\r\n"].concat();
        for bad in [flags, swapped, stranger] {
            match reply(&bad, Op::Get(3)) {
                Parsed::Reply { outcome, .. } => {
                    assert!(matches!(outcome.failure, Some(Failure::WrongValue(_))));
                    assert_eq!(outcome.hits, 0, "a wrong value is no hit");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn errors_and_garbage() {
        let set = Op::Set {
            key: 1,
            salt: 1,
            len: 20,
            quiet: false,
        };
        let stored = reply(b"STORED\r\n", set.clone());
        assert!(matches!(stored, Parsed::Reply { used: 8, outcome } if outcome.failure.is_none()));
        let oom = reply(b"SERVER_ERROR out of memory\r\n", set.clone());
        assert!(matches!(oom, Parsed::Reply { outcome, .. } if outcome.failure.is_some()));
        assert!(matches!(reply(b"HD\r\n", set), Parsed::Garbage(_)));
        assert!(matches!(
            reply(b"VALUE k01 0 x\r\n", Op::Get(1)),
            Parsed::Garbage(_)
        ));
        let version = reply(b"VERSION 1.6.18\r\n", Op::Sync);
        assert!(matches!(version, Parsed::Reply { used: 16, .. }));
        assert!(matches!(
            parse(b"END\r\n", None, &verifier()),
            Parsed::Garbage(_)
        ));
    }
}
