//! Requests on fixed-length table keys (`NAME:ID`, `--table`): get, gets
//! (with ranges `NAME:[lo,hi)`), set, add, replace, append, prepend,
//! rotate, delete, and the meta `mg`, `ms`, `md`. See docs/tables.md.
//!
//! [`route`] is called first for every request when tables are declared; it
//! returns `None` for requests that touch no table key, which then run as
//! usual. A `get` mixing table keys and ordinary keys answers each from
//! where it lives, in order.
//!
//! With `--data-dir`, every write that changes a record is logged as its
//! result (kura-keyspace's durable/tables.rs), numbered under the record's lock
//! ([`Table::edit`]'s hook); the connection then settles as for any write.

use kura_proto::{reply, Data, MetaKey, Request, StoreMode};
use kura_store::GetOptions;
use kura_table::{Edit, RangeSpec, Table};

use super::{echo_flag, expiry, get, Next, Session};
use crate::metrics::incr;

/// Records one range of a `get` may return; a client reads on from the
/// last id it got.
pub const RANGE_LIMIT: usize = 10_000;

const BAD_ID: &[u8] = b"CLIENT_ERROR bad table id: expected a number from 1 to the table's max, or a range like [10,20)\r\n";
const NO_EXPIRY: &[u8] = b"CLIENT_ERROR table records do not expire: exptime must be 0\r\n";
const NO_CAS: &[u8] =
    b"CLIENT_ERROR table records have no CAS: use set, add, replace, append, prepend or rotate\r\n";
const UNSUPPORTED: &[u8] = b"CLIENT_ERROR not supported on table records\r\n";
const NO_RANGE: &[u8] = b"CLIENT_ERROR ranges are read with get\r\n";

/// What the part of a table key after `NAME:` names.
enum Target {
    Id(u64),
    Range(RangeSpec),
}

fn target(t: &Table, rest: &[u8]) -> Option<Target> {
    let s = std::str::from_utf8(rest).ok()?;
    if s.starts_with(['[', '(']) {
        return s.parse().ok().map(Target::Range);
    }
    let id: u64 = s.parse().ok()?;
    (1..=t.max()).contains(&id).then_some(Target::Id(id))
}

/// The id of a single-record key, or the error line to answer.
fn one_id(t: &Table, rest: &[u8]) -> Result<u64, &'static [u8]> {
    match target(t, rest) {
        Some(Target::Id(id)) => Ok(id),
        Some(Target::Range(_)) => Err(NO_RANGE),
        None => Err(BAD_ID),
    }
}

/// A record's new state, as the log hears of it.
type New<'v> = Option<(&'v [u8], u32)>;

/// The table `NAME` of a key `NAME:REST`, given `REST`.
fn name_of<'k>(key: &'k [u8], rest: &[u8]) -> &'k [u8] {
    &key[..key.len() - rest.len() - 1]
}

/// Logs a change of record `id` of table `name`, when the server has a data
/// dir: called under the record's lock.
fn logger<'r>(s: &'r Session<'_>, name: &'r [u8], id: u64) -> impl FnOnce(New<'_>) + 'r {
    s.keyspace.table_logger(name, id, &s.report)
}

/// Runs `req` if it is about a table key.
pub(super) fn route(s: &mut Session<'_>, req: &Request<'_>) -> Option<Next> {
    let tables = s.keyspace.tables();
    let key_is_table = |k: &[u8]| tables.route(k).is_some();
    match req {
        Request::Get(g) if g.keys().any(key_is_table) => {
            get_keys(s, g);
            Some(Next::Continue)
        }
        Request::Store(c) if key_is_table(c.key) => Some(store(s, c)),
        Request::Delete(d) if key_is_table(d.key) => {
            delete(s, d.key, d.noreply);
            Some(Next::Continue)
        }
        Request::Arith(a) if key_is_table(a.key) => {
            s.reply(a.noreply, UNSUPPORTED);
            Some(Next::Continue)
        }
        Request::Touch(t) if key_is_table(t.key) => {
            s.reply(t.noreply, UNSUPPORTED);
            Some(Next::Continue)
        }
        Request::MetaGet(m) if key_is_table(&m.key.bytes) => {
            meta_get(s, &m.key, &m.flags);
            Some(Next::Continue)
        }
        Request::MetaSet(m) if key_is_table(&m.key.bytes) => Some(meta_set(s, m)),
        Request::MetaDelete(m) if key_is_table(&m.key.bytes) => {
            meta_delete(s, &m.key, &m.flags);
            Some(Next::Continue)
        }
        Request::MetaArith(m) if key_is_table(&m.key.bytes) => {
            s.out.extend_from_slice(UNSUPPORTED);
            Some(Next::Continue)
        }
        Request::MetaDebug(m) if key_is_table(&m.key.bytes) => {
            s.out.extend_from_slice(UNSUPPORTED);
            Some(Next::Continue)
        }
        _ => None,
    }
}

fn get_keys(s: &mut Session<'_>, g: &kura_proto::Get<'_>) {
    // Refuse the whole request if a table key is bad, before any reply.
    for key in g.keys() {
        if let Some((t, rest)) = s.keyspace.tables().route(key) {
            if target(t, rest).is_none() {
                s.out.extend_from_slice(BAD_ID);
                return;
            }
            if g.touch.is_some() {
                s.out.extend_from_slice(UNSUPPORTED);
                return;
            }
        }
    }
    let opts = GetOptions {
        touch: g.touch.map(expiry),
        ..Default::default()
    };
    let mut buf = Vec::new();
    // Run again after waiting for flash, it goes on from the key it
    // stopped at.
    for (i, key) in g.keys().enumerate().skip(s.resume_at()) {
        let Some((t, rest)) = s.keyspace.tables().route(key) else {
            if !get::one(s, key, &opts, g.cas) {
                s.park_rest(i, g.keys().skip(i + 1), g.touch.is_some());
                return;
            }
            continue;
        };
        let cas = g.cas.then_some(0);
        match target(t, rest) {
            Some(Target::Id(id)) => {
                let hit = t.get_into(id, &mut buf).ok().flatten();
                get::count(s.stats, false, hit.is_some());
                if let Some(flags) = hit {
                    reply::value(&mut s.out, key, flags, &buf, cas);
                }
            }
            Some(Target::Range(range)) => {
                let name = &key[..key.len() - rest.len()];
                let out = &mut s.out;
                let n = t.range(&range, RANGE_LIMIT, |id, v, flags| {
                    let mut k = name.to_vec();
                    reply::put_u64(&mut k, id);
                    reply::value(out, &k, flags, v, cas);
                });
                for _ in 0..n {
                    get::count(s.stats, false, true);
                }
            }
            None => {}
        }
    }
    s.out.extend_from_slice(reply::END);
}

/// A storage command on a table record.
fn store(s: &mut Session<'_>, c: &kura_proto::Store<'_>) -> Next {
    let value = match c.data {
        Data::TooLarge { len } => {
            incr(&s.stats.store_too_large);
            s.reply(c.noreply, reply::TOO_LARGE);
            return Next::Swallow(len + 2);
        }
        Data::Bytes(v) => v,
    };
    incr(&s.stats.cmd_set);
    let Some((t, rest)) = s.keyspace.tables().route(c.key) else {
        return Next::Continue;
    };
    let line = match one_id(t, rest) {
        Err(e) => e,
        Ok(_) if c.cas.is_some() => NO_CAS,
        Ok(_) if c.exptime != 0 => NO_EXPIRY,
        Ok(id) => match apply(
            t,
            id,
            c.mode,
            value,
            c.flags,
            logger(s, name_of(c.key, rest), id),
        ) {
            Ok(true) => reply::STORED,
            Ok(false) => reply::NOT_STORED,
            Err(line) => line,
        },
    };
    s.reply(c.noreply, line);
    Next::Continue
}

/// Carries out a storage mode on record `id`: whether it stored, or the
/// error line.
/// `log` hears of the change, under the record's lock.
fn apply(
    t: &Table,
    id: u64,
    mode: StoreMode,
    value: &[u8],
    flags: u32,
    log: impl FnOnce(New<'_>),
) -> Result<bool, &'static [u8]> {
    let width = t.width() as usize;
    if let StoreMode::Rotate { max } = mode {
        return t
            .rotate_then(id, value, max as usize, flags, log)
            .map(|_| true)
            .map_err(|_| BAD_ID);
    }
    if value.len() > width {
        return Err(reply::TOO_LARGE);
    }
    let mut stored = false;
    let r = t.edit(
        id,
        |old| {
            let new = match (mode, old) {
                (StoreMode::Set, _) | (StoreMode::Add, None) | (StoreMode::Replace, Some(_)) => {
                    Some((value.to_vec(), flags))
                }
                (StoreMode::Append, Some((v, f))) => Some(([v, value].concat(), f)),
                (StoreMode::Prepend, Some((v, f))) => Some(([value, v].concat(), f)),
                _ => None,
            };
            match new {
                // memcached answers an append past the item size limit
                // NOT_STORED.
                Some((v, _)) if v.len() > width => Edit::Keep,
                Some((v, f)) => {
                    stored = true;
                    Edit::Put(v, f)
                }
                None => Edit::Keep,
            }
        },
        log,
    );
    match r {
        Err(_) => Err(BAD_ID),
        Ok(_) => Ok(stored),
    }
}

/// Deletes record `id`: whether it was there (`log` hears of it).
fn remove(t: &Table, id: u64, log: impl FnOnce(New<'_>)) -> bool {
    matches!(t.edit(id, |_| Edit::Delete, log), Ok(true))
}

fn delete(s: &mut Session<'_>, key: &[u8], noreply: bool) {
    let Some((t, rest)) = s.keyspace.tables().route(key) else {
        return;
    };
    let line = match one_id(t, rest) {
        Err(e) => e,
        Ok(id) => match remove(t, id, logger(s, name_of(key, rest), id)) {
            true => {
                incr(&s.stats.delete_hits);
                reply::DELETED
            }
            false => {
                incr(&s.stats.delete_misses);
                reply::NOT_FOUND
            }
        },
    };
    s.reply(noreply, line);
}

/// Meta flags that mean nothing for a table record are refused, rather
/// than silently ignored.
fn meta_supported(f: &kura_proto::MetaFlags<'_>, allowed: &[u8]) -> bool {
    f.iter().all(|fl| allowed.contains(&fl.code))
}

/// The table and id a meta request names, or `None` after answering the
/// error: a bad id, a base64 key, or a flag outside `allowed`.
fn meta_record<'a>(
    s: &mut Session<'a>,
    key: &MetaKey<'_>,
    f: &kura_proto::MetaFlags<'_>,
    allowed: &[u8],
) -> Option<(&'a Table, u64)> {
    let keyspace: &'a kura_keyspace::Keyspace = s.keyspace;
    let (t, rest) = keyspace.tables().route(&key.bytes)?;
    match one_id(t, rest) {
        Err(e) => s.out.extend_from_slice(e),
        Ok(_) if key.binary || !meta_supported(f, allowed) => s.out.extend_from_slice(UNSUPPORTED),
        Ok(id) => return Some((t, id)),
    }
    None
}

/// The table name of a meta request's key (a table key: checked before).
fn meta_name<'k>(s: &Session<'_>, key: &'k MetaKey<'_>) -> &'k [u8] {
    match s.keyspace.tables().route(&key.bytes) {
        Some((_, rest)) => name_of(&key.bytes, rest),
        None => &[],
    }
}

fn meta_get(s: &mut Session<'_>, key: &MetaKey<'_>, f: &kura_proto::MetaFlags<'_>) {
    incr(&s.stats.cmd_meta);
    let Some((t, id)) = meta_record(s, key, f, b"vfsktcqOu") else {
        return;
    };
    let mut buf = Vec::new();
    let hit = t.get_into(id, &mut buf).ok().flatten();
    get::count(s.stats, false, hit.is_some());
    let Some(flags) = hit else {
        if !f.quiet {
            s.out.extend_from_slice(reply::EN);
        }
        return;
    };
    let o = &mut s.out;
    if f.value {
        o.extend_from_slice(b"VA ");
        reply::put_u64(o, buf.len() as u64);
    } else {
        o.extend_from_slice(b"HD");
    }
    for fl in f.iter() {
        if echo_flag(o, fl, key) {
            continue;
        }
        match fl.code {
            b'f' => reply::meta_num(o, b'f', u64::from(flags)),
            b's' => reply::meta_num(o, b's', buf.len() as u64),
            b't' => reply::meta_signed(o, b't', -1),
            b'c' => reply::meta_num(o, b'c', 0),
            _ => {}
        }
    }
    o.extend_from_slice(b"\r\n");
    if f.value {
        o.extend_from_slice(&buf);
        o.extend_from_slice(b"\r\n");
    }
}

fn meta_set(s: &mut Session<'_>, m: &kura_proto::MetaSet<'_>) -> Next {
    incr(&s.stats.cmd_meta);
    let f = &m.flags;
    let value = match m.data {
        Data::TooLarge { len } => {
            incr(&s.stats.store_too_large);
            s.out.extend_from_slice(reply::TOO_LARGE);
            return Next::Swallow(len + 2);
        }
        Data::Bytes(v) => v,
    };
    incr(&s.stats.cmd_set);
    let Some((t, id)) = meta_record(s, &m.key, f, b"FTMwqkO") else {
        return Next::Continue;
    };
    if f.ttl.is_some_and(|t| t != 0) {
        s.out.extend_from_slice(NO_EXPIRY);
        return Next::Continue;
    }
    let name = meta_name(s, &m.key);
    let log = logger(s, name, id);
    let code: &[u8] = match apply(t, id, m.mode, value, f.client_flags.unwrap_or(0), log) {
        Ok(true) if f.quiet => return Next::Continue,
        Ok(true) => b"HD",
        Ok(false) => b"NS",
        Err(line) => {
            s.out.extend_from_slice(line);
            return Next::Continue;
        }
    };
    super::meta_status(&mut s.out, code, f, &m.key);
    Next::Continue
}

fn meta_delete(s: &mut Session<'_>, key: &MetaKey<'_>, f: &kura_proto::MetaFlags<'_>) {
    incr(&s.stats.cmd_meta);
    let Some((t, id)) = meta_record(s, key, f, b"qkO") else {
        return;
    };
    let log = logger(s, meta_name(s, key), id);
    let code: &[u8] = match remove(t, id, log) {
        true if f.quiet => return,
        true => b"HD",
        false => b"NF",
    };
    super::meta_status(&mut s.out, code, f, key);
}
