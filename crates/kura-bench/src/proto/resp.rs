//! Redis's protocol (RESP2), so that the same open-loop load can drive a
//! Redis server as it drives a memcached one: `GET`, `MGET` for
//! multi-gets, `SET` and `PING` as the no-op that closes a run. Redis has
//! no client flags and no quiet sets: a value's salt, which the other
//! protocols also store as its flags, is read back from the value's own
//! header, and `--noreply` is refused for this protocol (BenchArgs::check).

use super::Verifier;
use super::{line, parse_num, push_num, show, Failure, HitCursor, Op, Outcome, Parsed, Pending};
use crate::keys::Keyspace;
use crate::value;

/// Appends `$<len>\r\n<bytes>\r\n` for the key `k`.
fn bulk_key(keys: &Keyspace, k: u64, out: &mut Vec<u8>) {
    out.push(b'$');
    push_num(out, keys.key_len() as u64);
    out.extend_from_slice(b"\r\n");
    keys.write_key(k, out);
    out.extend_from_slice(b"\r\n");
}

pub(super) fn encode(op: &Op, keys: &Keyspace, out: &mut Vec<u8>) {
    match op {
        Op::Get(k) => {
            out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
            bulk_key(keys, *k, out);
        }
        Op::MultiGet(ks) => {
            out.push(b'*');
            push_num(out, ks.len() as u64 + 1);
            out.extend_from_slice(b"\r\n$4\r\nMGET\r\n");
            for k in ks {
                bulk_key(keys, *k, out);
            }
        }
        Op::Set { key, salt, len, .. } => {
            out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
            bulk_key(keys, *key, out);
            out.push(b'$');
            push_num(out, *len as u64);
            out.extend_from_slice(b"\r\n");
            value::fill(*key, *salt, *len, out);
            out.extend_from_slice(b"\r\n");
        }
        Op::Sync => out.extend_from_slice(b"*1\r\n$4\r\nPING\r\n"),
    }
}

pub(super) fn parse(buf: &[u8], pending: Option<&Pending>, v: &Verifier) -> Parsed {
    let Some(first) = line(buf) else {
        return Parsed::Incomplete;
    };
    let Some(p) = pending else {
        return Parsed::Garbage(format!("reply to nothing: {:?}", show(first)));
    };
    if let Some(err) = first.strip_prefix(b"-") {
        return Parsed::Reply {
            used: first.len() + 2,
            outcome: Outcome {
                failure: Some(Failure::Server(show(err))),
                ..Outcome::default()
            },
        };
    }
    match &p.op {
        Op::Get(k) => {
            let mut cursor = HitCursor::new(std::slice::from_ref(k));
            match bulk(buf, 0, &mut cursor, v) {
                Bulk::Incomplete => Parsed::Incomplete,
                Bulk::Garbage(why) => Parsed::Garbage(why),
                Bulk::Done { used, failure } => Parsed::Reply {
                    used,
                    outcome: cursor.outcome(failure),
                },
            }
        }
        Op::MultiGet(ks) => multi_get_reply(buf, first, ks, v),
        Op::Set { .. } => simple(first, b"+OK"),
        Op::Sync => simple(first, b"+PONG"),
    }
}

/// A one-line reply that must be `ok`.
fn simple(l: &[u8], ok: &[u8]) -> Parsed {
    if l != ok {
        return Parsed::Garbage(format!("unexpected reply {:?}", show(l)));
    }
    Parsed::Reply {
        used: l.len() + 2,
        outcome: Outcome::default(),
    }
}

/// One bulk string read at `pos`.
enum Bulk {
    Incomplete,
    Garbage(String),
    /// It ends before `used`; a value failed its check when `failure`.
    Done {
        used: usize,
        failure: Option<Failure>,
    },
}

/// Reads `$-1\r\n` (a miss) or `$<len>\r\n<value>\r\n` at `pos`, checking
/// the value as the next key's.
fn bulk(buf: &[u8], pos: usize, cursor: &mut HitCursor, v: &Verifier) -> Bulk {
    let Some(l) = line(&buf[pos..]) else {
        return Bulk::Incomplete;
    };
    let next = pos + l.len() + 2;
    if l == b"$-1" {
        cursor.skip();
        return Bulk::Done {
            used: next,
            failure: None,
        };
    }
    let Some(len) = l.strip_prefix(b"$").and_then(parse_num::<usize>) else {
        return Bulk::Garbage(format!("expected a bulk string, got {:?}", show(l)));
    };
    let end = next.saturating_add(len);
    if buf.len() < end.saturating_add(2) {
        return Bulk::Incomplete;
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Bulk::Garbage(format!("value of {len} bytes not followed by CRLF"));
    }
    let data = &buf[next..end];
    let failure = cursor.check_next(v, value::salt_of(data), data);
    Bulk::Done {
        used: end + 2,
        failure,
    }
}

/// `*<n>\r\n` then one bulk string per key asked, in order.
fn multi_get_reply(buf: &[u8], first: &[u8], wanted: &[u64], v: &Verifier) -> Parsed {
    let Some(n) = first.strip_prefix(b"*").and_then(parse_num::<usize>) else {
        return Parsed::Garbage(format!("expected an array, got {:?}", show(first)));
    };
    if n != wanted.len() {
        return Parsed::Garbage(format!("{n} values for {} keys", wanted.len()));
    }
    let mut cursor = HitCursor::new(wanted);
    let mut pos = first.len() + 2;
    let mut failure = None;
    for _ in 0..n {
        match bulk(buf, pos, &mut cursor, v) {
            Bulk::Incomplete => return Parsed::Incomplete,
            Bulk::Garbage(why) => return Parsed::Garbage(why),
            Bulk::Done { used, failure: f } => {
                pos = used;
                failure = failure.or(f);
            }
        }
    }
    Parsed::Reply {
        used: pos,
        outcome: cursor.outcome(failure),
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
    fn encodes_commands_as_arrays_of_bulk_strings() {
        let v = verifier();
        let mut out = Vec::new();
        encode(&Op::Get(7), &v.keys, &mut out);
        encode(&Op::MultiGet(vec![1, 22]), &v.keys, &mut out);
        let set = Op::Set {
            key: 5,
            salt: 9,
            len: 20,
            quiet: false,
        };
        encode(&set, &v.keys, &mut out);
        encode(&Op::Sync, &v.keys, &mut out);
        let want = [
            &b"*2\r\n$3\r\nGET\r\n$3\r\nk07\r\n"[..],
            b"*3\r\n$4\r\nMGET\r\n$3\r\nk01\r\n$3\r\nk22\r\n",
            b"*3\r\n$3\r\nSET\r\n$3\r\nk05\r\n$20\r\n",
            &value(5, 9),
            b"\r\n*1\r\n$4\r\nPING\r\n",
        ]
        .concat();
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want)
        );
    }

    #[test]
    fn gets_hits_misses_and_wrong_values() {
        let hit = [&b"$20\r\n"[..], &value(3, 4), b"\r\n"].concat();
        let got = reply(&hit, Op::Get(3));
        let outcome = Outcome {
            hits: 1,
            ..Outcome::default()
        };
        let used = hit.len();
        assert_eq!(got, Parsed::Reply { used, outcome });
        for cut in 0..hit.len() {
            assert_eq!(reply(&hit[..cut], Op::Get(3)), Parsed::Incomplete);
        }
        let miss = reply(b"$-1\r\n", Op::Get(3));
        assert!(matches!(miss, Parsed::Reply { used: 5, outcome } if outcome.misses == 1));
        match reply(&hit, Op::Get(4)) {
            Parsed::Reply { outcome, .. } => {
                assert!(matches!(outcome.failure, Some(Failure::WrongValue(_))));
                assert_eq!(outcome.hits, 0);
            }
            other => panic!("{other:?}"),
        }
        let multi = [&b"*3\r\n$-1\r\n$20\r\n"[..], &value(4, 4), b"\r\n$-1\r\nX"].concat();
        match reply(&multi, Op::MultiGet(vec![3, 4, 5])) {
            Parsed::Reply { used, outcome } => {
                assert_eq!(used, multi.len() - 1);
                assert_eq!((outcome.hits, outcome.misses), (1, 2));
                assert_eq!(outcome.failure, None);
            }
            other => panic!("{other:?}"),
        }
        let short = reply(b"*2\r\n$-1\r\n$-1\r\n", Op::MultiGet(vec![3, 4, 5]));
        assert!(matches!(short, Parsed::Garbage(_)));
    }

    #[test]
    fn statuses_errors_and_garbage() {
        let set = Op::Set {
            key: 1,
            salt: 1,
            len: 20,
            quiet: false,
        };
        let ok = reply(b"+OK\r\n", set.clone());
        assert!(matches!(ok, Parsed::Reply { used: 5, outcome } if outcome.failure.is_none()));
        let oom = reply(b"-OOM command not allowed\r\n", set.clone());
        assert!(matches!(oom, Parsed::Reply { outcome, .. } if outcome.failure.is_some()));
        let ro = reply(b"-READONLY You can't write\r\n", Op::Get(1));
        assert!(matches!(ro, Parsed::Reply { outcome, .. } if outcome.failure.is_some()));
        assert!(matches!(reply(b"STORED\r\n", set), Parsed::Garbage(_)));
        assert!(matches!(
            reply(b"+PONG\r\n", Op::Sync),
            Parsed::Reply { used: 7, .. }
        ));
        assert!(matches!(
            reply(b"VALUE x\r\n", Op::Get(1)),
            Parsed::Garbage(_)
        ));
        assert!(matches!(
            parse(b"+OK\r\n", None, &verifier()),
            Parsed::Garbage(_)
        ));
    }
}
