//! memcached's binary protocol, translated to meta commands: each opcode
//! (quiet forms included) becomes one meta command to the key's backend,
//! and the meta reply becomes the binary response memcached would send.
//! Keys the meta protocol cannot carry as they are (spaces, control bytes)
//! go base64-encoded (`b`).

use std::sync::Arc;

use kura_proto::binary::{
    self, error_response, message_response, BinFrame, BinRequest, Command, Response, Status,
};
use kura_proto::client::{meta, Reply, Status as Meta};
use kura_proto::{Data, StoreMode};

use crate::call::{num, unavailable, Call};
use crate::config::{DownReply, Op};
use crate::ctx::Ctx;
use crate::reply::{ready, Out, ReplyFut, Step};
use crate::router::Router;

pub async fn step(ctx: &Arc<Ctx>, lane: usize, buf: &[u8]) -> Step {
    match binary::parse(buf, &crate::text::LIMITS) {
        BinFrame::Incomplete { .. } => Step::Incomplete,
        BinFrame::Close => Step::Close(None),
        BinFrame::Error {
            opcode,
            opaque,
            status,
            len,
            swallow,
            close,
            ..
        } => {
            let mut out = Vec::new();
            error_response(&mut out, opcode, opaque, status);
            if close {
                Step::Close(Some(ready(out)))
            } else {
                Step::Done {
                    len,
                    swallow,
                    reply: Some(ready(out)),
                }
            }
        }
        BinFrame::Request { request, len } => route(ctx, lane, &request, len).await,
    }
}

/// The header fields a response echoes.
#[derive(Clone, Copy)]
struct Echo {
    opcode: u8,
    opaque: u32,
    quiet: bool,
}

impl Echo {
    fn error(self, status: Status) -> Vec<u8> {
        let mut out = Vec::new();
        error_response(&mut out, self.opcode, self.opaque, status);
        out
    }

    fn message(self, status: Status, msg: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        message_response(&mut out, self.opcode, self.opaque, status, msg);
        out
    }

    fn ok(self, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        if self.quiet {
            return Vec::new();
        }
        let mut out = Vec::new();
        binary::response(
            &mut out,
            &Response {
                opcode: self.opcode,
                opaque: self.opaque,
                cas,
                extras,
                key,
                ..Default::default()
            },
            value,
        );
        out
    }

    /// A backend's error line as a binary status.
    fn backend_error(self, r: &Reply) -> Vec<u8> {
        let t = &r.tokens[..];
        let status = if t.starts_with(b"CLIENT_ERROR cannot increment") {
            Status::NonNumeric
        } else if t.starts_with(b"SERVER_ERROR out of memory") {
            Status::OutOfMemory
        } else if t.starts_with(b"SERVER_ERROR object too large") {
            Status::TooLarge
        } else {
            return self.message(Status::TemporaryFailure, t);
        };
        self.error(status)
    }

    fn failed(self, e: &kura_client::Error) -> Vec<u8> {
        self.message(Status::TemporaryFailure, e.to_string().as_bytes())
    }
}

fn reply_of(
    call: Call,
    f: impl FnOnce(Reply) -> Vec<u8> + 'static,
    down: impl FnOnce(&kura_client::Error) -> Vec<u8> + 'static,
) -> ReplyFut {
    Box::pin(async move {
        Out::Bytes(match call.reply().await {
            Ok(r) => f(r),
            Err(e) => down(&e),
        })
    })
}

/// One request's routing: its backends, the fields its response echoes
/// and its frame's length.
struct Req<'a> {
    ctx: &'a Arc<Ctx>,
    lane: usize,
    router: Arc<Router>,
    e: Echo,
    /// The header's CAS.
    cas: u64,
    len: usize,
}

async fn route(ctx: &Arc<Ctx>, lane: usize, r: &BinRequest<'_>, len: usize) -> Step {
    let e = Echo {
        opcode: r.opcode,
        opaque: r.opaque,
        quiet: r.quiet,
    };
    let q = Req {
        ctx,
        lane,
        router: ctx.router(),
        e,
        cas: r.cas,
        len,
    };
    match &r.command {
        Command::Get {
            key,
            touch,
            with_key,
            with_value,
        } => get(&q, key, *touch, *with_key, *with_value).await,
        Command::Store {
            mode,
            key,
            flags,
            exptime,
            data,
        } => store(&q, *mode, key, (*flags, *exptime), data).await,
        Command::Delete { key } => delete(&q, key).await,
        Command::Arith {
            key,
            incr,
            delta,
            initial,
            exptime,
        } => arith(&q, key, *incr, *delta, (*initial, *exptime)).await,
        Command::Quit => Step::Close((!r.quiet).then(|| ready(e.ok(0, b"", b"", b"")))),
        Command::Noop => Step::reply(len, ready(Echo { quiet: false, ..e }.ok(0, b"", b"", b""))),
        Command::Version => Step::reply(
            len,
            ready(e.message(Status::Success, crate::stats::VERSION.as_bytes())),
        ),
        Command::Stat { group } => stat(ctx, e, group, len),
        Command::Flush { exptime } => flush(ctx, e, *exptime, len),
        _ => Step::reply(len, ready(e.error(Status::UnknownCommand))),
    }
}

/// GET, GETK, GAT, GATK, TOUCH (and the quiet forms) as `mg`.
async fn get(
    q: &Req<'_>,
    key: &[u8],
    touch: Option<u32>,
    with_key: bool,
    with_value: bool,
) -> Step {
    let e = q.e;
    q.ctx.stats.count_get(1, touch.is_some());
    let mut args = if with_value {
        b" v f c".to_vec()
    } else {
        b" f c".to_vec()
    };
    if let Some(t) = touch {
        args.extend_from_slice(b" T");
        num(&mut args, t);
    }
    let what = match touch {
        Some(_) if !with_value => Op::Touch,
        _ => Op::retrieval(false, touch.is_some()),
    };
    let call = Call::simple(&q.router, q.lane, key, what, b"mg", &args).await;
    let key = if with_key { key.to_vec() } else { Vec::new() };
    let key2 = key.clone();
    let miss_on_down = q.router.down_reply == DownReply::Miss;
    let stats = q.ctx.stats.clone();
    let stats2 = q.ctx.stats.clone();
    let miss = move |e: Echo, key: &[u8]| {
        if e.quiet {
            Vec::new()
        } else if key.is_empty() {
            e.error(Status::KeyNotFound)
        } else {
            let mut out = Vec::new();
            binary::response(
                &mut out,
                &Response {
                    opcode: e.opcode,
                    status: Status::KeyNotFound as u16,
                    opaque: e.opaque,
                    key,
                    ..Default::default()
                },
                b"",
            );
            out
        }
    };
    let reply = reply_of(
        call,
        move |rep| match rep.status {
            Meta::Value | Meta::Done => {
                stats.count_hits(1, 0);
                let flags = rep.number::<u32>(b'f').unwrap_or(0).to_be_bytes();
                let cas = rep.number::<u64>(b'c').unwrap_or(0);
                let value = rep.value.as_deref().unwrap_or_default();
                Echo { quiet: false, ..e }.ok(cas, &flags, &key, value)
            }
            Meta::Miss => {
                stats.count_hits(0, 1);
                miss(e, &key)
            }
            _ => e.backend_error(&rep),
        },
        move |err| {
            if miss_on_down && unavailable(err) {
                stats2.count_hits(0, 1);
                miss(e, &key2)
            } else {
                e.failed(err)
            }
        },
    );
    Step::reply(q.len, reply)
}

/// SET, ADD, REPLACE, APPEND, PREPEND as `ms` (the key in base64 when meta
/// cannot carry it); `fe` is the flags and exptime.
async fn store(q: &Req<'_>, mode: StoreMode, key: &[u8], fe: (u32, u32), data: &Data<'_>) -> Step {
    let (e, (flags, exptime)) = (q.e, fe);
    q.ctx.stats.count_set();
    let Data::Bytes(data) = data else {
        let Data::TooLarge { len: n } = data else {
            unreachable!()
        };
        return Step::Done {
            len: q.len,
            swallow: *n,
            reply: Some(ready(e.error(Status::TooLarge))),
        };
    };
    let mode_flag = match mode {
        StoreMode::Set | StoreMode::Rotate { .. } => b'S',
        StoreMode::Add => b'E',
        StoreMode::Replace => b'R',
        StoreMode::Append => b'A',
        StoreMode::Prepend => b'P',
    };
    let set = meta::Set {
        key,
        value: data,
        flags,
        ttl: i64::from(exptime),
        mode: mode_flag,
        rotate: None,
        cas: (q.cas != 0).then_some(q.cas),
        return_cas: true,
    };
    let size = 2 * key.len() + data.len() + 72;
    let what = Op::store(mode, q.cas != 0);
    let (call, _) = Call::one(&q.router, q.lane, key, what, size, |b, op| {
        set.write(b, op, false);
    })
    .await;
    let reply = reply_of(
        call,
        move |rep| match rep.status {
            Meta::Done => e.ok(rep.number::<u64>(b'c').unwrap_or(0), b"", b"", b""),
            Meta::NotStored => e.error(match mode {
                StoreMode::Add => Status::KeyExists,
                StoreMode::Replace => Status::KeyNotFound,
                _ => Status::NotStored,
            }),
            Meta::Exists => e.error(Status::KeyExists),
            Meta::NotFound => e.error(Status::KeyNotFound),
            _ => e.backend_error(&rep),
        },
        move |err| e.failed(err),
    );
    Step::reply(q.len, reply)
}

/// DELETE as `md`.
async fn delete(q: &Req<'_>, key: &[u8]) -> Step {
    let e = q.e;
    let mut args = Vec::new();
    if q.cas != 0 {
        args.extend_from_slice(b" C");
        num(&mut args, q.cas);
    }
    let call = Call::simple(&q.router, q.lane, key, Op::Delete, b"md", &args).await;
    let reply = reply_of(
        call,
        move |rep| match rep.status {
            Meta::Done => e.ok(0, b"", b"", b""),
            Meta::NotFound => e.error(Status::KeyNotFound),
            Meta::Exists => e.error(Status::KeyExists),
            _ => e.backend_error(&rep),
        },
        move |err| e.failed(err),
    );
    Step::reply(q.len, reply)
}

/// INCREMENT and DECREMENT as `ma` (`N` and `J` to create a missing
/// counter); `ie` is the initial value and exptime.
async fn arith(q: &Req<'_>, key: &[u8], incr: bool, delta: u64, ie: (u64, u32)) -> Step {
    let (e, (initial, exptime)) = (q.e, ie);
    let mut args = if incr {
        b" v c MI D".to_vec()
    } else {
        b" v c MD D".to_vec()
    };
    num(&mut args, delta);
    if exptime != binary::ARITH_NO_CREATE {
        args.extend_from_slice(b" N");
        num(&mut args, exptime);
        args.extend_from_slice(b" J");
        num(&mut args, initial);
    }
    if q.cas != 0 {
        args.extend_from_slice(b" C");
        num(&mut args, q.cas);
    }
    let op = if incr { Op::Incr } else { Op::Decr };
    let call = Call::simple(&q.router, q.lane, key, op, b"ma", &args).await;
    let reply = reply_of(
        call,
        move |rep| match (rep.status, &rep.value) {
            (Meta::Value, Some(v)) => {
                let n: u64 = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                e.ok(
                    rep.number::<u64>(b'c').unwrap_or(0),
                    b"",
                    b"",
                    &n.to_be_bytes(),
                )
            }
            (Meta::NotFound, _) => e.error(Status::KeyNotFound),
            (Meta::Exists, _) => e.error(Status::KeyExists),
            _ => e.backend_error(&rep),
        },
        move |err| e.failed(err),
    );
    Step::reply(q.len, reply)
}

/// STAT: the proxy's and its backends' pairs, once every earlier reply is
/// written.
fn stat(ctx: &Arc<Ctx>, e: Echo, group: &[u8], len: usize) -> Step {
    let group = (!group.is_empty()).then(|| group.to_vec());
    let ctx = ctx.clone();
    let run = async move {
        let mut out = Vec::new();
        match crate::stats::pairs_with_backends(&ctx, group.as_deref()).await {
            Some(pairs) => {
                let end = (String::new(), String::new());
                for (k, v) in pairs.iter().chain(std::iter::once(&end)) {
                    binary::response(
                        &mut out,
                        &Response {
                            opcode: e.opcode,
                            opaque: e.opaque,
                            key: k.as_bytes(),
                            ..Default::default()
                        },
                        v.as_bytes(),
                    );
                }
            }
            None => out = e.error(Status::KeyNotFound),
        }
        Out::Bytes(out)
    };
    Step::Barrier {
        len,
        run: Box::pin(run),
    }
}

/// FLUSH on every backend, as `flush_all`.
fn flush(ctx: &Arc<Ctx>, e: Echo, exptime: Option<u32>, len: usize) -> Step {
    let arg = exptime.map_or_else(String::new, |t| format!(" {t}"));
    let flush = crate::admin::flush_all(ctx, arg);
    Step::Barrier {
        len,
        run: Box::pin(async move {
            let b = flush.await;
            Out::Bytes(if b == kura_proto::reply::OK {
                e.ok(0, b"", b"", b"")
            } else {
                e.message(Status::TemporaryFailure, b.trim_ascii_end())
            })
        }),
    }
}
