//! The text protocol's commands, each turned into meta commands to the
//! key's backend and the meta replies turned back into the text replies
//! memcached gives. Meta commands go to `meta.rs`, the commands that name
//! no key (`stats`, `version`, `flush_all`, ...) to `admin.rs`.

use std::sync::Arc;

use kura_proto::client::{meta, Reply, Status};
use std::borrow::Cow;

use kura_proto::{
    parse, reply, Arith, Data, Delete, Frame, Get, Limits, Request, Store, StoreMode, Touch,
    KEY_MAX_LENGTH,
};

use crate::call::{num, server_error, unavailable, Call};
use crate::config::{DownReply, Op};
use crate::ctx::Ctx;
use crate::reply::{ready, Out, ReplyFut, Step};

/// memcached's defaults: 1 MiB items, CAS on.
pub const LIMITS: Limits = Limits {
    item_size_max: 1024 * 1024,
    cas_enabled: true,
    max_get_line: 1024 * 1024,
};

/// Frames and routes the request at the front of `buf`.
pub async fn step(ctx: &Arc<Ctx>, lane: usize, buf: &[u8]) -> Step {
    match parse(buf, &LIMITS) {
        Frame::Incomplete { .. } => Step::Incomplete,
        Frame::Close => Step::Close(None),
        Frame::Error {
            error,
            len,
            swallow,
            quiet,
        } => Step::Done {
            len,
            swallow,
            reply: (!quiet).then(|| ready(error.as_bytes().to_vec())),
        },
        Frame::Request { request, len } => route(ctx, lane, &request, len).await,
    }
}

/// The reply of a request whose backend reply is one meta reply, with
/// `noreply` honoured (the future still runs: its failure is journaled).
fn quiet_unless(noreply: bool, f: impl std::future::Future<Output = Out> + 'static) -> ReplyFut {
    Box::pin(async move {
        let b = f.await;
        if noreply {
            Out::Static(b"")
        } else {
            b
        }
    })
}

/// The text reply line of an error meta reply.
pub fn error_line(r: &Reply) -> Vec<u8> {
    let mut line = r.tokens.to_vec();
    line.extend_from_slice(b"\r\n");
    line
}

async fn route(ctx: &Arc<Ctx>, lane: usize, req: &Request<'_>, len: usize) -> Step {
    match req {
        Request::Get(g) => get(ctx, lane, g, len).await,
        Request::Store(s) => store(ctx, lane, s, len).await,
        Request::Delete(d) => delete(ctx, lane, d, len).await,
        Request::Arith(a) => arith(ctx, lane, a, len).await,
        Request::Touch(t) => touch(ctx, lane, t, len).await,
        _ => crate::admin::route(ctx, lane, req, len).await,
    }
}

/// `get`, `gets`, `gat`, `gats`: one key alone as one `mg` where no
/// route mirrors or warms, else a multi-get (`get.rs`).
async fn get(ctx: &Arc<Ctx>, lane: usize, g: &Get<'_>, len: usize) -> Step {
    let (n, bytes) = g.keys().fold((0, 0), |(n, b), k| (n + 1, b + k.len()));
    let mut each = g.keys();
    ctx.stats.count_get(n, g.touch.is_some());
    if let (Some(key), None) = (each.next(), each.next()) {
        if key.starts_with(crate::mcrouter::PREFIX) {
            return Step::reply(len, ready(crate::mcrouter::answer(ctx, key)));
        }
        let router = ctx.router();
        if router.plain_reads {
            // One key alone goes as one `mg`; several as text gets (get.rs).
            let args: Cow<[u8]> = match (g.cas, g.touch) {
                (false, None) => Cow::Borrowed(b" v f"),
                (cas, touch) => {
                    let mut args = b" v f".to_vec();
                    if cas {
                        args.extend_from_slice(b" c");
                    }
                    if let Some(t) = touch {
                        args.extend_from_slice(b" T");
                        num(&mut args, t);
                    }
                    Cow::Owned(args)
                }
            };
            let op = Op::retrieval(g.cas, g.touch.is_some());
            return one_get(ctx, &router, lane, (key, op), &args, g.cas, len).await;
        }
    }
    let mut owned = crate::get::Keys::with_capacity(n, bytes);
    g.keys().for_each(|k| owned.push(k));
    let found = crate::get::start(ctx, lane, owned, g.cas, g.touch).await;
    let stats = ctx.stats.clone();
    Step::reply(
        len,
        Box::pin(async move {
            let found = found.await;
            if let Some(e) = found.error {
                return Out::Bytes(e);
            }
            let (out, hits) = hits_reply(&found);
            stats.count_hits(hits, n - hits);
            Out::Bytes(out)
        }),
    )
}

/// The storage commands as `ms` (a value over the limit refused here).
async fn store(ctx: &Arc<Ctx>, lane: usize, s: &Store<'_>, len: usize) -> Step {
    ctx.stats.count_set();
    let Data::Bytes(data) = s.data else {
        let Data::TooLarge { len: n } = s.data else {
            unreachable!()
        };
        // memcached drops the old value of a plain set it refuses.
        let drop_old = s.mode == StoreMode::Set && s.cas.is_none();
        let reply = crate::call::too_large(ctx, lane, s.key, drop_old, reply::TOO_LARGE).await;
        return Step::Done {
            len,
            swallow: n + 2,
            reply: Some(quiet_unless(s.noreply, async { Out::Bytes(reply.await) })),
        };
    };
    let mode = match s.mode {
        StoreMode::Set => b'S',
        StoreMode::Add => b'E',
        StoreMode::Replace => b'R',
        StoreMode::Append => b'A',
        StoreMode::Prepend => b'P',
        StoreMode::Rotate { .. } => b'W',
    };
    let rotate = match s.mode {
        StoreMode::Rotate { max } => Some(max),
        _ => None,
    };
    let set = meta::Set {
        key: s.key,
        value: data,
        flags: s.flags,
        ttl: i64::from(s.exptime),
        mode,
        rotate,
        cas: s.cas,
        return_cas: false,
    };
    let size = 2 * s.key.len() + data.len() + 64;
    let what = Op::store(s.mode, s.cas.is_some());
    let (call, _) = Call::one(&ctx.router(), lane, s.key, what, size, |b, op| {
        set.write(b, op, false);
    })
    .await;
    Step::reply(
        len,
        quiet_unless(s.noreply, async move {
            match call.reply().await {
                Ok(r) => match r.status {
                    Status::Done => Out::Static(reply::STORED),
                    Status::NotStored => Out::Static(reply::NOT_STORED),
                    Status::Exists => Out::Static(reply::EXISTS),
                    Status::NotFound => Out::Static(reply::NOT_FOUND),
                    _ => Out::Bytes(error_line(&r)),
                },
                Err(e) => Out::Bytes(server_error(&e)),
            }
        }),
    )
}

/// `delete` as `md`.
async fn delete(ctx: &Arc<Ctx>, lane: usize, d: &Delete<'_>, len: usize) -> Step {
    let call = Call::simple(&ctx.router(), lane, d.key, Op::Delete, b"md", b"").await;
    Step::reply(
        len,
        quiet_unless(d.noreply, async move {
            match call.reply().await {
                Ok(r) => match r.status {
                    Status::Done => Out::Static(reply::DELETED),
                    Status::NotFound => Out::Static(reply::NOT_FOUND),
                    _ => Out::Bytes(error_line(&r)),
                },
                Err(e) => Out::Bytes(server_error(&e)),
            }
        }),
    )
}

/// `incr` and `decr` as `ma`.
async fn arith(ctx: &Arc<Ctx>, lane: usize, a: &Arith<'_>, len: usize) -> Step {
    let mut args = if a.incr {
        b" v MI D".to_vec()
    } else {
        b" v MD D".to_vec()
    };
    num(&mut args, a.delta);
    let op = if a.incr { Op::Incr } else { Op::Decr };
    let call = Call::simple(&ctx.router(), lane, a.key, op, b"ma", &args).await;
    Step::reply(
        len,
        quiet_unless(a.noreply, async move {
            match call.reply().await {
                Ok(r) => match (r.status, &r.value) {
                    (Status::Value, Some(v)) => Out::Bytes([&v[..], b"\r\n"].concat()),
                    (Status::NotFound, _) => Out::Static(reply::NOT_FOUND),
                    _ => Out::Bytes(error_line(&r)),
                },
                Err(e) => Out::Bytes(server_error(&e)),
            }
        }),
    )
}

/// `touch` as `mg` with `T`.
async fn touch(ctx: &Arc<Ctx>, lane: usize, t: &Touch<'_>, len: usize) -> Step {
    ctx.stats.count_touch();
    let down_reply = ctx.router().down_reply;
    let mut args = b" T".to_vec();
    num(&mut args, t.exptime);
    let call = Call::simple(&ctx.router(), lane, t.key, Op::Touch, b"mg", &args).await;
    Step::reply(
        len,
        quiet_unless(t.noreply, async move {
            match call.reply().await {
                Ok(r) => match r.status {
                    Status::Done => Out::Static(reply::TOUCHED),
                    Status::Miss => Out::Static(reply::NOT_FOUND),
                    _ => Out::Bytes(error_line(&r)),
                },
                Err(e) if unavailable(&e) && down_reply == DownReply::Miss => {
                    Out::Static(reply::NOT_FOUND)
                }
                Err(e) => Out::Bytes(server_error(&e)),
            }
        }),
    )
}

/// The text reply of a retrieval's hits (their `VALUE` entries, in the
/// client's order, then `END`) and how many there were.
fn hits_reply(found: &crate::get::Found) -> (Vec<u8>, usize) {
    let hits = || found.hits.iter().flatten().map(|h| found.entry(h));
    let size: usize = hits().map(<[u8]>::len).sum();
    let mut out = Vec::with_capacity(size + reply::END.len());
    let mut n = 0;
    for e in hits() {
        n += 1;
        out.extend_from_slice(e);
    }
    out.extend_from_slice(reply::END);
    (out, n)
}

/// A `get` of one key where no route mirrors or warms: one `mg` (not a
/// batch), answered as [`crate::get`] answers a key (the backend's error
/// line, the down policy's miss, or `SERVER_ERROR`).
async fn one_get(
    ctx: &Ctx,
    router: &crate::router::Router,
    lane: usize,
    (key, op): (&[u8], Op),
    args: &[u8],
    with_cas: bool,
    len: usize,
) -> Step {
    let call = Call::simple(router, lane, key, op, b"mg", args).await;
    let down_miss = router.down_reply == DownReply::Miss;
    let stats = ctx.stats.clone();
    // Kept in the reply's future itself (a text key is at most 250 bytes).
    let key = InlineKey::new(key);
    Step::reply(
        len,
        Box::pin(async move {
            match call.reply().await {
                Ok(h) if h.status == Status::Value => {
                    stats.count_hits(1, 0);
                    let data = h.value.as_deref().unwrap_or_default();
                    let flags = h.number::<u32>(b'f').unwrap_or(0);
                    let cas = with_cas.then(|| h.number::<u64>(b'c').unwrap_or(0));
                    let key = key.get();
                    // `VALUE <key> <flags> <bytes>[ <cas>]`: 48 bytes hold the rest.
                    let size = key.len() + 48 + data.len() + 2 + reply::END.len();
                    let mut out = Vec::with_capacity(size);
                    reply::value(&mut out, key, flags, data, cas);
                    out.extend_from_slice(reply::END);
                    Out::Bytes(out)
                }
                Ok(r) if r.status == Status::Error => Out::Bytes(error_line(&r)),
                Ok(_) => {
                    stats.count_hits(0, 1);
                    Out::Static(reply::END)
                }
                Err(e) if down_miss && unavailable(&e) => {
                    stats.count_hits(0, 1);
                    Out::Static(reply::END)
                }
                Err(e) => Out::Bytes(server_error(&e)),
            }
        }),
    )
}

/// A text key copied out of the client's buffer without an allocation:
/// the parser takes keys of at most [`KEY_MAX_LENGTH`] bytes.
struct InlineKey {
    len: u8,
    bytes: [u8; KEY_MAX_LENGTH],
}

impl InlineKey {
    fn new(key: &[u8]) -> InlineKey {
        let mut k = InlineKey {
            len: 0,
            bytes: [0; KEY_MAX_LENGTH],
        };
        // A longer key never comes from the parser; it would be cut, not
        // overrun.
        let n = key.len().min(KEY_MAX_LENGTH);
        k.bytes[..n].copy_from_slice(&key[..n]);
        k.len = n as u8;
        k
    }

    fn get(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}
