//! `set`, `add`, `replace`, `append`, `prepend`, `cas`.

use kura_proto::{reply, Data, Store as StoreCmd, StoreMode};
use kura_store::{SetMode, SetOutcome, SetRequest, SizeLimit};

use super::{expiry, Next, Session};
use crate::metrics::incr;

pub(crate) fn set_mode(m: StoreMode) -> SetMode {
    match m {
        StoreMode::Set => SetMode::Set,
        StoreMode::Add => SetMode::Add,
        StoreMode::Replace => SetMode::Replace,
        StoreMode::Append => SetMode::Append,
        StoreMode::Prepend => SetMode::Prepend,
        StoreMode::Rotate { max } => SetMode::Rotate { max },
    }
}

/// The item size limit append and prepend must respect.
pub(crate) fn size_limit(s: &Session<'_>) -> Option<SizeLimit> {
    let l = &s.shared.limits;
    Some(SizeLimit {
        item_size_max: l.item_size_max,
        cas: l.cas_enabled,
    })
}

/// Counts a store refused before its value was read (too large, or no
/// room to receive it: [`Session::no_room`]) and, like memcached, drops the
/// old value of a plain set (not `cas`) so it is not served as current.
/// Then the connection skips the `swallow` bytes of the refused value as
/// they come.
pub(crate) fn too_large(s: &mut Session<'_>, key: &[u8], drop_old: bool, swallow: usize) -> Next {
    if s.no_room {
        incr(&s.stats.store_no_memory);
    } else {
        incr(&s.stats.store_too_large);
    }
    incr(&s.stats.cmd_set);
    if drop_old {
        s.writes().delete(key);
    }
    Next::Swallow(swallow)
}

/// The reply to a store refused before its value was read.
pub(crate) fn refusal(s: &Session<'_>) -> &'static [u8] {
    if s.no_room {
        reply::OUT_OF_MEMORY
    } else {
        reply::TOO_LARGE
    }
}

/// The `mutations` line of a store, when watched: `names` are its
/// status and command.
#[inline]
pub(crate) fn stored(
    s: &Session<'_>,
    key: &[u8],
    (status, cmd): (&str, &str),
    flags: u32,
    exptime: i32,
    len: usize,
) {
    super::inspect::stored(
        s,
        &super::inspect::Mutation {
            key,
            status,
            cmd,
            flags,
            exptime,
            len,
        },
    );
}

/// Counts the outcome of a CAS-checked store.
pub(crate) fn count_cas(s: &Session<'_>, outcome: SetOutcome) {
    match outcome {
        SetOutcome::Stored { .. } => incr(&s.stats.cas_hits),
        SetOutcome::Exists => incr(&s.stats.cas_badval),
        SetOutcome::NotFound => incr(&s.stats.cas_misses),
        _ => {}
    }
}

pub(super) fn run(s: &mut Session<'_>, c: &StoreCmd<'_>) -> Next {
    let value = match c.data {
        Data::TooLarge { len } => {
            let plain_set = c.mode == StoreMode::Set && c.cas.is_none();
            // The text protocol's value ends with \r\n.
            let next = too_large(s, c.key, plain_set, len + 2);
            s.reply(c.noreply, refusal(s));
            let status = if s.no_room { "no_memory" } else { "too_large" };
            let cmd = super::inspect::cmd_name(c.mode, c.cas.is_some());
            stored(s, c.key, (status, cmd), c.flags, c.exptime, 0);
            return next;
        }
        Data::Bytes(v) => v,
    };
    incr(&s.stats.cmd_set);
    let outcome = s.writes().set(&SetRequest {
        mode: set_mode(c.mode),
        key: c.key,
        value,
        flags: c.flags,
        expiry: Some(expiry(c.exptime)),
        cas: c.cas,
        size_limit: size_limit(s),
        ..Default::default()
    });
    if c.cas.is_some() {
        count_cas(s, outcome);
    }
    let names = super::inspect::store_names(outcome, c.mode, c.cas.is_some());
    stored(s, c.key, names, c.flags, c.exptime, value.len());
    let line = match outcome {
        SetOutcome::Stored { .. } => reply::STORED,
        SetOutcome::NotStored => reply::NOT_STORED,
        SetOutcome::Exists => reply::EXISTS,
        SetOutcome::NotFound => reply::NOT_FOUND,
        SetOutcome::NoMemory => {
            incr(&s.stats.store_no_memory);
            reply::OUT_OF_MEMORY
        }
    };
    s.reply(c.noreply, line);
    Next::Continue
}
