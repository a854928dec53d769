//! `ms`: a store whose mode (`M`), CAS (`C`, `E`), invalidation (`I`),
//! flags (`F`) and TTL (`T`) come from flags. `q` hides only `HD`.

use kura_proto::{reply, Data, MetaSet, StoreMode};
use kura_store::{SetMode, SetOutcome, SetRequest};

use super::storage::{count_cas, refusal, set_mode, size_limit, too_large};
use super::{echo_flag, expiry, Next, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, m: &MetaSet<'_>) -> Next {
    let f = &m.flags;
    incr(&s.stats.cmd_meta);
    let value = match m.data {
        Data::TooLarge { len } => {
            // memcached drops the old value whatever the mode.
            let next = too_large(s, &m.key.bytes, true, len + 2);
            let line = refusal(s);
            s.out.extend_from_slice(line);
            return next;
        }
        Data::Bytes(v) => v,
    };
    incr(&s.stats.cmd_set);
    let mode = set_mode(m.mode);
    let cas_mode = f.compare_cas.is_some() && matches!(mode, SetMode::Set | SetMode::Replace);
    let outcome = s.writes().set(&SetRequest {
        mode,
        key: &m.key.bytes,
        value,
        flags: f.client_flags.unwrap_or(0),
        expiry: Some(expiry(f.ttl.unwrap_or(0))),
        cas: f.compare_cas,
        invalidate: f.invalidate && cas_mode,
        new_cas: f.explicit_cas,
        binary_key: m.key.binary,
        size_limit: size_limit(s),
    });
    if cas_mode || (f.compare_cas.is_some() && m.mode != StoreMode::Add) {
        count_cas(s, outcome);
    }
    let names = super::inspect::store_names(outcome, m.mode, f.compare_cas.is_some());
    let flags = f.client_flags.unwrap_or(0);
    super::storage::stored(
        s,
        &m.key.bytes,
        names,
        flags,
        f.ttl.unwrap_or(0),
        value.len(),
    );
    let (code, cas): (&[u8], u64) = match outcome {
        SetOutcome::Stored { cas } => {
            if f.quiet {
                return Next::Continue;
            }
            (b"HD", cas)
        }
        SetOutcome::NotStored => (b"NS", 0),
        SetOutcome::Exists => (b"EX", 0),
        SetOutcome::NotFound => (b"NF", 0),
        SetOutcome::NoMemory => {
            incr(&s.stats.store_no_memory);
            s.out.extend_from_slice(reply::OUT_OF_MEMORY);
            return Next::Continue;
        }
    };
    let o = &mut s.out;
    o.extend_from_slice(code);
    for fl in f.iter() {
        if !echo_flag(o, fl, &m.key) && fl.code == b'c' {
            reply::meta_num(o, b'c', cas);
        }
    }
    o.extend_from_slice(b"\r\n");
    Next::Continue
}
