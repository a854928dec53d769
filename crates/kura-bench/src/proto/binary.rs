//! memcached's binary protocol, client side. Every packet is a 24-byte
//! header (all numbers big-endian) and a body of extras, key and value:
//!
//! ```text
//! request:  magic 0x80, opcode, key length (2), extras length, data type, vbucket (2),
//!           body length (4), opaque (4), cas (8)
//! response: magic 0x81, the same, with a status (2) in place of the vbucket
//! ```
//!
//! Gets are GET (its reply has the flags as 4 bytes of extras and no key),
//! multi-gets are one GETKQ per key (hits answer with their key, misses not
//! at all) closed by a NOOP, sets are SET (quiet: SETQ, answered only on
//! failure) with flags and exptime as 8 bytes of extras. The opaque is the
//! request's sequence number and must come back unchanged.

use super::{show, Failure, HitCursor, Op, Outcome, Parsed, Pending, Verifier};
use crate::keys::Keyspace;
use crate::value;

const REQUEST: u8 = 0x80;
const RESPONSE: u8 = 0x81;
const HEADER: usize = 24;

const GET: u8 = 0x00;
const SET: u8 = 0x01;
const NOOP: u8 = 0x0a;
const GETKQ: u8 = 0x0d;
const SETQ: u8 = 0x11;

const SUCCESS: u16 = 0x0000;
const KEY_NOT_FOUND: u16 = 0x0001;

/// Refuse bodies beyond this: a length this large means the stream is lost.
const MAX_BODY: usize = 1 << 30;

fn header(out: &mut Vec<u8>, opcode: u8, key_len: usize, extras: u8, body: usize, seq: u32) {
    out.extend_from_slice(&[REQUEST, opcode]);
    out.extend_from_slice(&(key_len as u16).to_be_bytes());
    out.extend_from_slice(&[extras, 0, 0, 0]);
    out.extend_from_slice(&(body as u32).to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&[0; 8]);
}

pub(super) fn encode(op: &Op, seq: u32, keys: &Keyspace, out: &mut Vec<u8>) {
    let key_len = keys.key_len();
    match op {
        Op::Get(k) => {
            header(out, GET, key_len, 0, key_len, seq);
            keys.write_key(*k, out);
        }
        Op::MultiGet(ks) => {
            for k in ks {
                header(out, GETKQ, key_len, 0, key_len, seq);
                keys.write_key(*k, out);
            }
            header(out, NOOP, 0, 0, 0, seq);
        }
        Op::Set {
            key,
            salt,
            len,
            quiet,
        } => {
            let opcode = if *quiet { SETQ } else { SET };
            header(out, opcode, key_len, 8, 8 + key_len + len, seq);
            out.extend_from_slice(&value::flags_for(*salt).to_be_bytes());
            out.extend_from_slice(&0u32.to_be_bytes());
            keys.write_key(*key, out);
            value::fill(*key, *salt, *len, out);
        }
        Op::Sync => header(out, NOOP, 0, 0, 0, seq),
    }
}

/// One response packet, borrowed from the buffer.
struct Packet<'a> {
    opcode: u8,
    status: u16,
    opaque: u32,
    extras: &'a [u8],
    key: &'a [u8],
    value: &'a [u8],
    len: usize,
}

impl Packet<'_> {
    /// The flags of a get reply (4 bytes of extras).
    fn flags(&self) -> Option<u32> {
        Some(u32::from_be_bytes(self.extras.try_into().ok()?))
    }

    fn failure(&self) -> Failure {
        let what = match self.status {
            0x0002 => "key exists",
            0x0003 => "value too large",
            0x0004 => "invalid arguments",
            0x0005 => "not stored",
            0x0081 => "unknown command",
            0x0082 => "out of memory",
            _ => "error",
        };
        Failure::Server(format!(
            "status 0x{:04x} ({what}): {}",
            self.status,
            show(self.value)
        ))
    }
}

/// The packet at the start of `buf`: `Ok(None)` when incomplete.
fn packet(buf: &[u8]) -> Result<Option<Packet<'_>>, Parsed> {
    if buf.len() < HEADER {
        return Ok(None);
    }
    if buf[0] != RESPONSE {
        return Err(Parsed::Garbage(format!("bad magic 0x{:02x}", buf[0])));
    }
    let key_len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    let extras_len = usize::from(buf[4]);
    let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if body > MAX_BODY || key_len + extras_len > body {
        return Err(Parsed::Garbage(format!(
            "impossible lengths: body {body}, key {key_len}, extras {extras_len}"
        )));
    }
    let len = HEADER + body;
    if buf.len() < len {
        return Ok(None);
    }
    let b = &buf[HEADER..len];
    Ok(Some(Packet {
        opcode: buf[1],
        status: u16::from_be_bytes([buf[6], buf[7]]),
        opaque: u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]),
        extras: &b[..extras_len],
        key: &b[extras_len..extras_len + key_len],
        value: &b[extras_len + key_len..],
        len,
    }))
}

pub(super) fn parse(buf: &[u8], pending: Option<&Pending>, v: &Verifier) -> Parsed {
    let first = match packet(buf) {
        Err(garbage) => return garbage,
        Ok(None) => return Parsed::Incomplete,
        Ok(Some(p)) => p,
    };
    if first.opcode == SETQ {
        return Parsed::QuietFailure {
            used: first.len,
            what: format!("SETQ opaque {}: {:?}", first.opaque, first.failure()),
        };
    }
    let Some(p) = pending else {
        return Parsed::Garbage(format!("reply to nothing (opcode 0x{:02x})", first.opcode));
    };
    if first.opaque != p.seq {
        return Parsed::Garbage(format!("opaque {} answers request {}", first.opaque, p.seq));
    }
    let expect = |opcode: u8| -> Result<(), Parsed> {
        if first.opcode == opcode {
            Ok(())
        } else {
            Err(Parsed::Garbage(format!(
                "opcode 0x{:02x} answers a request of opcode 0x{opcode:02x}",
                first.opcode
            )))
        }
    };
    let mut outcome = Outcome::default();
    match &p.op {
        Op::MultiGet(ks) => return multi_get_reply(buf, ks, p.seq, v),
        Op::Get(k) => {
            if let Err(g) = expect(GET) {
                return g;
            }
            match first.status {
                SUCCESS => {
                    let wanted = [*k];
                    let mut cursor = HitCursor::new(&wanted);
                    let failure = cursor.check_next(v, first.flags(), first.value);
                    outcome = cursor.outcome(failure);
                }
                KEY_NOT_FOUND => outcome.misses = 1,
                _ => outcome.failure = Some(first.failure()),
            }
        }
        Op::Set { .. } | Op::Sync => {
            let opcode = if matches!(p.op, Op::Sync) { NOOP } else { SET };
            if let Err(g) = expect(opcode) {
                return g;
            }
            if first.status != SUCCESS {
                outcome.failure = Some(first.failure());
            }
        }
    }
    Parsed::Reply {
        used: first.len,
        outcome,
    }
}

/// GETKQ hits (and failures), then the NOOP.
fn multi_get_reply(buf: &[u8], wanted: &[u64], seq: u32, v: &Verifier) -> Parsed {
    let mut pos = 0;
    let mut cursor = HitCursor::new(wanted);
    let mut failure = None;
    loop {
        let p = match packet(&buf[pos..]) {
            Err(garbage) => return garbage,
            Ok(None) => return Parsed::Incomplete,
            Ok(Some(p)) => p,
        };
        if p.opaque != seq {
            return Parsed::Garbage(format!("opaque {} inside the reply to {seq}", p.opaque));
        }
        pos += p.len;
        match p.opcode {
            NOOP => {
                return Parsed::Reply {
                    used: pos,
                    outcome: cursor.outcome(failure),
                }
            }
            GETKQ if p.status == SUCCESS => {
                let found = cursor.check_named(v, Some(p.key), p.flags(), p.value);
                failure = failure.or(found);
            }
            GETKQ => failure = failure.or(Some(p.failure())),
            other => {
                return Parsed::Garbage(format!("opcode 0x{other:02x} inside a multi-get reply"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{pending, value, verifier};
    use super::*;

    /// A response packet.
    fn response(
        opcode: u8,
        status: u16,
        opaque: u32,
        extras: &[u8],
        key: &[u8],
        val: &[u8],
    ) -> Vec<u8> {
        let mut out = vec![RESPONSE, opcode];
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.push(extras.len() as u8);
        out.push(0);
        out.extend_from_slice(&status.to_be_bytes());
        let body = extras.len() + key.len() + val.len();
        out.extend_from_slice(&(body as u32).to_be_bytes());
        out.extend_from_slice(&opaque.to_be_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(extras);
        out.extend_from_slice(key);
        out.extend_from_slice(val);
        out
    }

    #[test]
    fn encodes_a_set_as_memcached_expects() {
        let v = verifier();
        let mut out = Vec::new();
        let set = Op::Set {
            key: 1,
            salt: 0x0102,
            len: 20,
            quiet: false,
        };
        encode(&set, 0xa0b0c0d0, &v.keys, &mut out);
        assert_eq!(out.len(), 24 + 8 + 3 + 20);
        assert_eq!(&out[..12], &[0x80, 0x01, 0, 3, 8, 0, 0, 0, 0, 0, 0, 31]);
        assert_eq!(&out[12..16], &[0xa0, 0xb0, 0xc0, 0xd0]);
        assert_eq!(&out[24..32], &[0, 0, 1, 2, 0, 0, 0, 0]);
        assert_eq!(&out[32..35], b"k01");
        assert_eq!(&out[35..], &value(1, 0x0102)[..]);
    }

    #[test]
    fn gets_hits_misses_and_wrong_values() {
        let flags = value::flags_for(4).to_be_bytes();
        let hit = response(GET, 0, 7, &flags, b"", &value(3, 4));
        let got = parse(&hit, Some(&pending(Op::Get(3))), &verifier());
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
        for cut in 0..hit.len() {
            let got = parse(&hit[..cut], Some(&pending(Op::Get(3))), &verifier());
            assert_eq!(got, Parsed::Incomplete);
        }
        let wrong = parse(&hit, Some(&pending(Op::Get(5))), &verifier());
        assert!(matches!(wrong, Parsed::Reply { outcome, .. } if outcome.failure.is_some()));
        let miss = response(GET, 1, 7, b"", b"", b"Not found");
        let got = parse(&miss, Some(&pending(Op::Get(3))), &verifier());
        assert!(matches!(got, Parsed::Reply { outcome, .. } if outcome.misses == 1));
        let stray = response(GET, 1, 8, b"", b"", b"Not found");
        let got = parse(&stray, Some(&pending(Op::Get(3))), &verifier());
        assert!(matches!(got, Parsed::Garbage(_)));
    }

    #[test]
    fn multi_gets_and_quiet_failures() {
        let flags = value::flags_for(4).to_be_bytes();
        let mut reply = response(GETKQ, 0, 7, &flags, b"k04", &value(4, 4));
        reply.extend(response(NOOP, 0, 7, b"", b"", b""));
        let got = parse(
            &reply,
            Some(&pending(Op::MultiGet(vec![2, 4]))),
            &verifier(),
        );
        let outcome = Outcome {
            hits: 1,
            misses: 1,
            failure: None,
        };
        assert_eq!(
            got,
            Parsed::Reply {
                used: reply.len(),
                outcome
            }
        );
        let quiet = response(SETQ, 0x82, 3, b"", b"", b"Out of memory");
        let got = parse(&quiet, None, &verifier());
        assert!(matches!(got, Parsed::QuietFailure { used, .. } if used == quiet.len()));
        assert!(matches!(
            parse(b"VALUE key:01 0 1\r\nx\r\nEND\r\n", None, &verifier()),
            Parsed::Garbage(_)
        ));
    }
}
