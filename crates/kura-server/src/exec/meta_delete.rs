//! `md`: delete, conditionally on `C`; with `I` mark stale instead (and
//! `T` sets a new TTL); with `x` keep the item but drop its value.

use kura_proto::MetaDelete;
use kura_store::{DeleteOutcome, DeleteRequest};

use super::{expiry, meta_status, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, m: &MetaDelete<'_>) {
    let f = &m.flags;
    incr(&s.stats.cmd_meta);
    let outcome = s.writes().delete_with(
        &m.key.bytes,
        &DeleteRequest {
            cas: f.compare_cas,
            invalidate: f.invalidate,
            touch: f.ttl.filter(|_| f.invalidate).map(expiry),
            remove_value: f.remove_value.then(|| f.client_flags.unwrap_or(0)),
            new_cas: f.explicit_cas,
        },
    );
    let code: &[u8] = match outcome {
        DeleteOutcome::Deleted => {
            incr(&s.stats.delete_hits);
            if f.quiet {
                return;
            }
            b"HD"
        }
        DeleteOutcome::NotFound => {
            incr(&s.stats.delete_misses);
            b"NF"
        }
        DeleteOutcome::Exists => {
            incr(&s.stats.delete_misses);
            b"EX"
        }
    };
    meta_status(&mut s.out, code, f, &m.key);
}
