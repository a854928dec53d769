//! The binary protocol: every opcode memcached 1.6 implements, with its
//! status codes, quiet forms and SASL PLAIN authentication. The store
//! operations are the text protocol's; only the framing and the replies
//! differ.

use kura_proto::binary::{
    error_response, message_response, opcode, BinFrame, BinRequest, Command, ErrorStage, Response,
    Status, ARITH_NO_CREATE,
};
use kura_proto::{Data, StoreMode};
use kura_store::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, Expiry, GetOptions, SetMode,
    SetOutcome, SetRequest,
};

use super::storage::{count_cas, set_mode, size_limit, too_large};
use super::{stats, Next, Session, Step};
use crate::auth::{PlainError, MAX_AUTH_FAILURES};
use crate::metrics::incr;
use crate::shared::VERSION;

/// The only SASL mechanism kura offers.
const MECHANISMS: &[u8] = b"PLAIN";

/// A binary exptime (unsigned, memcached's relative-or-absolute rule).
fn expiry(exptime: u32) -> Expiry {
    Expiry::from_exptime(i64::from(exptime))
}

/// Opcodes an unauthenticated connection may send under `-S`.
fn allowed_before_auth(op: u8) -> bool {
    matches!(
        op,
        opcode::SASL_LIST_MECHS | opcode::SASL_AUTH | opcode::SASL_STEP | opcode::VERSION
    )
}

impl Session<'_> {
    /// Answers one binary frame.
    pub fn step_binary(&mut self, frame: BinFrame<'_>) -> Step {
        match frame {
            BinFrame::Incomplete { needed } => Step::More { needed },
            BinFrame::Close => Step::Garbage,
            BinFrame::Request { request, len } => {
                if !self.authenticated && !allowed_before_auth(request.opcode) {
                    return self.refuse_unauthenticated(request.opcode, request.opaque, len);
                }
                let next = run(self, &request);
                if self.parked_now() {
                    return Step::Parked;
                }
                Step::Done { len, next }
            }
            BinFrame::Error {
                opcode,
                opaque,
                status,
                len,
                swallow,
                close,
                stage,
            } => {
                if stage == ErrorStage::Command
                    && !self.authenticated
                    && !allowed_before_auth(opcode)
                {
                    return self.refuse_unauthenticated(opcode, opaque, len);
                }
                error_response(&mut self.out, opcode, opaque, status);
                let next = if close {
                    Next::Close
                } else {
                    Next::Swallow(swallow)
                };
                Step::Done { len, next }
            }
        }
    }

    fn refuse_unauthenticated(&mut self, op: u8, opaque: u32, len: usize) -> Step {
        error_response(&mut self.out, op, opaque, Status::AuthError);
        Step::Done {
            len,
            next: Next::Close,
        }
    }
}

/// Appends a success response with no body unless the request is quiet.
fn ok(s: &mut Session<'_>, r: &BinRequest<'_>, cas: u64) {
    if !r.quiet {
        Response {
            opcode: r.opcode,
            opaque: r.opaque,
            cas,
            ..Default::default()
        }
        .encode_head(&mut s.out);
    }
}

fn fail(s: &mut Session<'_>, r: &BinRequest<'_>, status: Status) {
    error_response(&mut s.out, r.opcode, r.opaque, status);
}

/// The item key a request names, if any.
fn item_key<'a>(c: &Command<'a>) -> Option<&'a [u8]> {
    match c {
        Command::Get { key, .. }
        | Command::Store { key, .. }
        | Command::Delete { key }
        | Command::Arith { key, .. } => Some(key),
        _ => None,
    }
}

fn run(s: &mut Session<'_>, r: &BinRequest<'_>) -> Next {
    // Fixed-length tables are served over the text and meta protocols only.
    if item_key(&r.command).is_some_and(|k| s.keyspace.tables().route(k).is_some()) {
        fail(s, r, Status::InvalidArguments);
        return match &r.command {
            // The refused value's bytes are still to come.
            Command::Store {
                data: Data::TooLarge { len },
                ..
            } => Next::Swallow(*len),
            _ => Next::Continue,
        };
    }
    if r.command.changes_data() {
        if let Some(line) = s.refused_change() {
            // The text line's reason, without its SERVER_ERROR and CRLF.
            let msg = line
                .strip_prefix(b"SERVER_ERROR ")
                .and_then(|m| m.strip_suffix(b"\r\n"))
                .unwrap_or(&line);
            message_response(
                &mut s.out,
                r.opcode,
                r.opaque,
                Status::TemporaryFailure,
                msg,
            );
            return match &r.command {
                Command::Store {
                    data: Data::TooLarge { len },
                    ..
                } => Next::Swallow(*len),
                _ => Next::Continue,
            };
        }
    }
    match &r.command {
        Command::Get {
            key,
            touch,
            with_key,
            with_value,
        } => get(s, r, key, *touch, *with_key, *with_value),
        Command::Store {
            mode,
            key,
            flags,
            exptime,
            data,
        } => return store(s, r, *mode, key, *flags, *exptime, data),
        Command::Delete { key } => delete(s, r, key),
        Command::Arith {
            key,
            incr,
            delta,
            initial,
            exptime,
        } => arith(s, r, key, *incr, *delta, *initial, *exptime),
        Command::Quit => {
            ok(s, r, 0);
            return Next::Close;
        }
        Command::Flush { exptime } => flush(s, r, *exptime),
        Command::Noop => ok(s, r, 0),
        Command::Version => message_response(
            &mut s.out,
            r.opcode,
            r.opaque,
            Status::Success,
            VERSION.as_bytes(),
        ),
        Command::Stat { group } => stat(s, r, group),
        Command::SaslListMechs => {
            if s.shared.config.sasl {
                message_response(&mut s.out, r.opcode, r.opaque, Status::Success, MECHANISMS);
            } else {
                fail(s, r, Status::UnknownCommand);
            }
        }
        Command::SaslAuth { mechanism, data } => return sasl_auth(s, r, mechanism, data),
        Command::Replicate { history, after } => {
            // The connection carries the stream from here on (its answer
            // is the handshake line, as for the text command).
            s.replicate = Some((history.to_vec(), *after));
            return Next::Replicate;
        }
        Command::SaslStep { .. } => {
            if !s.shared.config.sasl {
                fail(s, r, Status::UnknownCommand);
            } else {
                // PLAIN completes in one step: there is nothing to continue.
                return auth_failed(s, r, "SASL step without a started exchange");
            }
        }
    }
    Next::Continue
}

fn get(
    s: &mut Session<'_>,
    r: &BinRequest<'_>,
    key: &[u8],
    touch: Option<u32>,
    with_key: bool,
    with_value: bool,
) {
    let opts = GetOptions {
        touch: touch.map(expiry),
        ..Default::default()
    };
    let Some(hit) = s.lookup(key, &opts) else {
        return;
    };
    super::get::count(s.stats, touch.is_some(), hit.is_some());
    super::inspect::fetched(s, key, hit.as_ref());
    match hit {
        Some(hit) => {
            let flags = hit.item.flags().to_be_bytes();
            let value_len = if with_value {
                hit.item.value().len()
            } else {
                0
            };
            Response {
                opcode: r.opcode,
                opaque: r.opaque,
                cas: hit.cas,
                extras: &flags,
                key: if with_key { key } else { b"" },
                value_len,
                ..Default::default()
            }
            .encode_head(&mut s.out);
            if with_value {
                s.out.push_value(&hit.item);
            }
        }
        None if r.quiet => {}
        None if with_key => kura_proto::binary::response(
            &mut s.out,
            &Response {
                opcode: r.opcode,
                status: Status::KeyNotFound as u16,
                opaque: r.opaque,
                key,
                ..Default::default()
            },
            b"",
        ),
        None => fail(s, r, Status::KeyNotFound),
    }
}

fn store(
    s: &mut Session<'_>,
    r: &BinRequest<'_>,
    mode: StoreMode,
    key: &[u8],
    flags: u32,
    exptime: u32,
    data: &Data<'_>,
) -> Next {
    let value = match data {
        Data::TooLarge { len } => {
            // As memcached: a set that cannot be stored drops the old
            // value. A binary value has no trailing \r\n to skip.
            let next = too_large(s, key, mode == StoreMode::Set, *len);
            let status = if s.no_room {
                Status::OutOfMemory
            } else {
                Status::TooLarge
            };
            fail(s, r, status);
            return next;
        }
        Data::Bytes(v) => v,
    };
    incr(&s.stats.cmd_set);
    let cas = (r.cas != 0).then_some(r.cas);
    // A CAS on set, add or replace is memcached's compare-and-swap.
    let set_as = match (mode, cas) {
        (StoreMode::Set | StoreMode::Add | StoreMode::Replace, Some(_)) => SetMode::Set,
        (m, _) => set_mode(m),
    };
    let outcome = s.writes().set(&SetRequest {
        mode: set_as,
        key,
        value,
        flags,
        expiry: Some(expiry(exptime)),
        cas,
        size_limit: size_limit(s),
        ..Default::default()
    });
    if cas.is_some() {
        count_cas(s, outcome);
    }
    let names = super::inspect::store_names(outcome, mode, cas.is_some());
    super::storage::stored(s, key, names, flags, exptime as i32, value.len());
    match outcome {
        SetOutcome::Stored { cas } => ok(s, r, cas),
        SetOutcome::Exists => fail(s, r, Status::KeyExists),
        SetOutcome::NotFound => fail(s, r, Status::KeyNotFound),
        SetOutcome::NotStored => fail(
            s,
            r,
            match mode {
                StoreMode::Add => Status::KeyExists,
                StoreMode::Replace => Status::KeyNotFound,
                _ => Status::NotStored,
            },
        ),
        SetOutcome::NoMemory => {
            incr(&s.stats.store_no_memory);
            message_response(
                &mut s.out,
                r.opcode,
                r.opaque,
                Status::OutOfMemory,
                b"Out of memory allocating item",
            );
        }
    }
    Next::Continue
}

fn delete(s: &mut Session<'_>, r: &BinRequest<'_>, key: &[u8]) {
    let req = DeleteRequest {
        cas: (r.cas != 0).then_some(r.cas),
        ..Default::default()
    };
    match s.writes().delete_with(key, &req) {
        DeleteOutcome::Deleted => {
            incr(&s.stats.delete_hits);
            ok(s, r, 0);
        }
        DeleteOutcome::Exists => fail(s, r, Status::KeyExists),
        DeleteOutcome::NotFound => {
            incr(&s.stats.delete_misses);
            fail(s, r, Status::KeyNotFound);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn arith(
    s: &mut Session<'_>,
    r: &BinRequest<'_>,
    key: &[u8],
    up: bool,
    delta: u64,
    initial: u64,
    exptime: u32,
) {
    let req = ArithRequest {
        cas: (r.cas != 0).then_some(r.cas),
        vivify: (exptime != ARITH_NO_CREATE).then(|| (initial, expiry(exptime))),
        ..ArithRequest::new(up, delta)
    };
    let (hits, misses) = if up {
        (&s.stats.incr_hits, &s.stats.incr_misses)
    } else {
        (&s.stats.decr_hits, &s.stats.decr_misses)
    };
    match s.writes().arith(key, &req) {
        ArithOutcome::Updated {
            value,
            cas,
            created,
            ..
        } => {
            // memcached counts a counter it creates as neither hit nor miss.
            if !created {
                incr(hits);
            }
            if !r.quiet {
                kura_proto::binary::response(
                    &mut s.out,
                    &Response {
                        opcode: r.opcode,
                        opaque: r.opaque,
                        cas,
                        ..Default::default()
                    },
                    &value.to_be_bytes(),
                );
            }
        }
        ArithOutcome::NotFound => {
            incr(misses);
            fail(s, r, Status::KeyNotFound);
        }
        ArithOutcome::NonNumeric => fail(s, r, Status::NonNumeric),
        ArithOutcome::Exists => fail(s, r, Status::KeyExists),
        ArithOutcome::NoMemory => message_response(
            &mut s.out,
            r.opcode,
            r.opaque,
            Status::OutOfMemory,
            b"Out of memory incrementing value",
        ),
    }
}

fn flush(s: &mut Session<'_>, r: &BinRequest<'_>, exptime: Option<u32>) {
    if s.shared.config.disable_flush_all {
        // memcached answers a refused flush with the authentication error.
        fail(s, r, Status::AuthError);
        return;
    }
    incr(&s.stats.cmd_flush);
    match exptime {
        Some(e) if e > 0 => s.writes().flush(Some(expiry(e))),
        _ => s.writes().flush(None),
    }
    ok(s, r, 0);
}

/// One STAT response per figure, then an empty one to end the list.
fn stat(s: &mut Session<'_>, r: &BinRequest<'_>, group: &[u8]) {
    let group = (!group.is_empty()).then_some(group);
    if group == Some(b"reset") {
        stats::reset(s);
    } else {
        let start = s.out.len();
        if !stats::listing(s, group) {
            fail(s, r, Status::KeyNotFound);
            return;
        }
        let text = s.out.split_off(start);
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(rest) = line.strip_prefix(b"STAT ") else {
                continue;
            };
            let (name, value) = match rest.iter().position(|&b| b == b' ') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &b""[..]),
            };
            stat_packet(s, r, name, value);
        }
    }
    stat_packet(s, r, b"", b"");
}

fn stat_packet(s: &mut Session<'_>, r: &BinRequest<'_>, name: &[u8], value: &[u8]) {
    kura_proto::binary::response(
        &mut s.out,
        &Response {
            opcode: opcode::STAT,
            opaque: r.opaque,
            key: name,
            ..Default::default()
        },
        value,
    );
}

fn sasl_auth(s: &mut Session<'_>, r: &BinRequest<'_>, mechanism: &[u8], data: &[u8]) -> Next {
    let Some(creds) = s
        .shared
        .credentials
        .as_ref()
        .filter(|_| s.shared.config.sasl)
        .map(|c| c.current())
    else {
        fail(s, r, Status::UnknownCommand);
        return Next::Continue;
    };
    if mechanism != MECHANISMS {
        return auth_failed(s, r, "unsupported SASL mechanism");
    }
    match creds.check_plain(data) {
        Ok(user) => {
            incr(&s.stats.auth_cmds);
            if s.shared.verbosity() >= 1 {
                tracing::info!(user = %String::from_utf8_lossy(user), "SASL authenticated");
            }
            s.authenticated = true;
            message_response(
                &mut s.out,
                r.opcode,
                r.opaque,
                Status::Success,
                b"Authenticated",
            );
            Next::Continue
        }
        Err(PlainError::Malformed) => auth_failed(s, r, "malformed PLAIN message"),
        Err(PlainError::Denied) => {
            let user = data.split(|&b| b == 0).nth(1).unwrap_or_default();
            tracing::warn!(
                user = %String::from_utf8_lossy(user),
                "SASL authentication failed"
            );
            auth_failed(s, r, "bad user or password")
        }
    }
}

/// Counts and answers a failed authentication; closes the connection once
/// it has failed too often.
fn auth_failed(s: &mut Session<'_>, r: &BinRequest<'_>, why: &str) -> Next {
    incr(&s.stats.auth_cmds);
    incr(&s.stats.auth_errors);
    s.auth_failures += 1;
    tracing::debug!(why, "authentication refused");
    fail(s, r, Status::AuthError);
    if s.auth_failures >= MAX_AUTH_FAILURES {
        tracing::warn!(
            failures = s.auth_failures,
            "closing a connection after repeated authentication failures"
        );
        Next::Close
    } else {
        Next::Continue
    }
}
