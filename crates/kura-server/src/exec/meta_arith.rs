//! `ma`: incr/decr by `D` (default 1), optionally creating the counter on a
//! miss (`N` with initial value `J`), returning the value (`v`), CAS or TTL.
//! As in memcached, `T` and `N` act in request order (a `t` before them
//! reports the TTL they replace), `C0` compares nothing, and `q` hides the
//! reply of an update but not that of a counter it creates.

use kura_proto::{reply, MetaArith};
use kura_store::{ArithOutcome, ArithRequest};

use super::{expiry, flag_position, meta_status, ttl_remaining, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, m: &MetaArith<'_>) {
    let f = &m.flags;
    incr(&s.stats.cmd_meta);
    // A created counter ends with the TTL of the later of `N` and `T`.
    let vivify = match (f.vivify, f.ttl) {
        (Some(_), Some(t)) if flag_position(f, b'T') > flag_position(f, b'N') => Some(t),
        (n, _) => n,
    };
    let req = ArithRequest {
        incr: m.incr,
        delta: f.delta.unwrap_or(1),
        cas: f.compare_cas.filter(|&c| c != 0),
        vivify: vivify.map(|n| (f.initial.unwrap_or(0), expiry(n))),
        touch: f.ttl.map(expiry),
        new_cas: f.explicit_cas,
    };
    let outcome = s.writes().arith(&m.key.bytes, &req);
    let (hits, misses) = if m.incr {
        (&s.stats.incr_hits, &s.stats.incr_misses)
    } else {
        (&s.stats.decr_hits, &s.stats.decr_misses)
    };
    let now = s.store().now();
    let o = &mut s.out;
    match outcome {
        ArithOutcome::Updated {
            value,
            cas,
            exptime_before,
            created,
            ..
        } => {
            incr(hits);
            if f.quiet && !created {
                return;
            }
            let mut digits = itoa_buf(value);
            if f.value {
                o.extend_from_slice(b"VA ");
                reply::put_u64(o, digits.len() as u64);
            } else {
                o.extend_from_slice(b"HD");
            }
            // The TTL as the flags so far left it (a created counter
            // starts with none).
            let mut ttl = if created { 0 } else { exptime_before };
            for fl in f.iter() {
                match fl.code {
                    b'c' => reply::meta_num(o, b'c', cas),
                    b't' => reply::meta_signed(o, b't', ttl_remaining(ttl, now)),
                    b'T' => ttl = req.touch.map_or(0, |t| t.deadline(now)),
                    b'N' if created => {
                        ttl = f.vivify.map_or(0, |n| expiry(n).deadline(now));
                    }
                    b'O' => reply::meta_opaque(o, fl.token),
                    b'k' => reply::meta_key(o, &m.key.bytes, m.key.binary),
                    _ => {}
                }
            }
            if f.value {
                o.extend_from_slice(b"\r\n");
                o.append(&mut digits);
            }
        }
        ArithOutcome::NonNumeric => {
            o.extend_from_slice(reply::NON_NUMERIC);
            return;
        }
        ArithOutcome::NoMemory => {
            o.extend_from_slice(reply::ARITH_OUT_OF_MEMORY);
            return;
        }
        ArithOutcome::NotFound | ArithOutcome::Exists => {
            let code: &[u8] = if outcome == ArithOutcome::NotFound {
                incr(misses);
                b"NF"
            } else {
                b"EX"
            };
            meta_status(o, code, f, &m.key);
            return;
        }
    }
    o.extend_from_slice(b"\r\n");
}

fn itoa_buf(v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    reply::put_u64(&mut out, v);
    out
}
