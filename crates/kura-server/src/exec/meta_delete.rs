//! `md`: delete, conditionally on `C`; with `I` mark stale instead (and
//! `T` sets a new TTL); with `x` keep the item but drop its value.

use kura_proto::{reply, MetaDelete};
use kura_store::{DeleteOutcome, DeleteRequest};

use super::{expiry, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, m: &MetaDelete<'_>) {
    let f = &m.flags;
    incr(&s.stats.cmd_meta);
    let outcome = s.store().delete_with(
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
    let o = &mut s.out;
    o.extend_from_slice(code);
    for fl in f.iter() {
        match fl.code {
            b'O' => reply::meta_opaque(o, fl.token),
            b'k' => reply::meta_key(o, &m.key.bytes, m.key.binary),
            _ => {}
        }
    }
    o.extend_from_slice(b"\r\n");
}
