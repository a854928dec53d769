//! `incr` and `decr`: decimal u64 counters; incr wraps at 2^64, decr stops
//! at 0, and a non-numeric value is an error.

use kura_proto::{reply, Arith};
use kura_store::{ArithOutcome, ArithRequest};

use super::Session;
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, a: &Arith<'_>) {
    let outcome = s.writes().arith(a.key, &ArithRequest::new(a.incr, a.delta));
    let (hits, misses) = if a.incr {
        (&s.stats.incr_hits, &s.stats.incr_misses)
    } else {
        (&s.stats.decr_hits, &s.stats.decr_misses)
    };
    match outcome {
        ArithOutcome::Updated { value, .. } => {
            incr(hits);
            if !a.noreply {
                reply::put_u64(&mut s.out, value);
                s.out.extend_from_slice(b"\r\n");
            }
        }
        ArithOutcome::NotFound => {
            incr(misses);
            s.reply(a.noreply, reply::NOT_FOUND);
        }
        ArithOutcome::NonNumeric => s.reply(a.noreply, reply::NON_NUMERIC),
        ArithOutcome::NoMemory => s.reply(a.noreply, reply::ARITH_OUT_OF_MEMORY),
        ArithOutcome::Exists => s.reply(a.noreply, reply::EXISTS),
    }
}
