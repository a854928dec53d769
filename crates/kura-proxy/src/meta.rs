//! Meta commands (`mg`, `ms`, `md`, `ma`), forwarded with the client's
//! flags in their order: the client's opaque `O` is replaced by the
//! proxy's own (so the backend connection can check that a reply is this
//! request's) and put back in the reply. A quiet (`q`) request goes to the
//! backend quiet, followed by `mn`: the backend itself decides what quiet
//! hides (an `ma q` that creates its counter still answers, as memcached
//! does), and the proxy passes on whatever came before the `MN`.

use bytes::{BufMut, Bytes, BytesMut};
use kura_client::raw::Expect;
use kura_proto::client::{Reply, Status};
use kura_proto::{reply, Data, MetaFlags, MetaKey, Request};

use crate::call::{num, server_error, unavailable, Call};
use crate::config::{DownReply, Op};
use crate::ctx::Ctx;
use crate::reply::{Out, Step};
use crate::router::opaque;

/// A meta request, rebuilt for the backend.
struct Forward {
    bytes: BytesMut,
    expect: Expect,
    op: u32,
    quiet: bool,
    /// The client's `O` token.
    client_opaque: Option<Vec<u8>>,
}

fn build(
    cmd: &[u8],
    key: &MetaKey<'_>,
    size: Option<usize>,
    flags: &MetaFlags<'_>,
    data: Option<&[u8]>,
) -> Forward {
    let mut b = BytesMut::with_capacity(64 + key.bytes.len() + data.map_or(0, |d| d.len()));
    b.put_slice(cmd);
    b.put_slice(b" ");
    if key.binary {
        let mut enc = Vec::new();
        reply::put_base64(&mut enc, &key.bytes);
        b.put_slice(&enc);
    } else {
        b.put_slice(&key.bytes);
    }
    if let Some(n) = size {
        b.put_slice(b" ");
        num(&mut b, n);
    }
    let quiet = flags.quiet;
    let op = if quiet { 0 } else { opaque() };
    let mut client_opaque = None;
    // Ours takes the place of the client's `O`, so the reply's flags come
    // in the order the client's would.
    for f in flags.iter() {
        match f.code {
            b'O' => {
                client_opaque = Some(f.token.to_vec());
                b.put_slice(b" O");
                num(&mut b, op);
            }
            b'q' => {}
            _ => {
                b.put_slice(b" ");
                b.put_u8(f.code);
                b.put_slice(f.token);
            }
        }
    }
    if client_opaque.is_none() {
        b.put_slice(b" O");
        num(&mut b, op);
    }
    if quiet {
        b.put_slice(b" q");
    }
    b.put_slice(b"\r\n");
    if let Some(d) = data {
        b.put_slice(d);
        b.put_slice(b"\r\n");
    }
    if quiet {
        b.put_slice(b"mn\r\n");
    }
    Forward {
        bytes: b,
        expect: if quiet {
            Expect::MetaBatch(1)
        } else {
            Expect::Meta(op)
        },
        op,
        quiet,
        client_opaque,
    }
}

/// The client's form of a backend's meta reply.
fn rewrite(r: &Reply, op: u32, client_opaque: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + r.value.as_ref().map_or(0, Bytes::len));
    let code: &[u8] = match r.status {
        Status::Value => b"VA",
        Status::Done => b"HD",
        Status::Miss => b"EN",
        Status::NotFound => b"NF",
        Status::NotStored => b"NS",
        Status::Exists => b"EX",
        Status::Noop => b"MN",
        _ => {
            out.extend_from_slice(&r.tokens);
            out.extend_from_slice(b"\r\n");
            return out;
        }
    };
    out.extend_from_slice(code);
    if let (Status::Value, Some(v)) = (r.status, &r.value) {
        out.push(b' ');
        reply::put_u64(&mut out, v.len() as u64);
    }
    let ours = format!("O{op}");
    for t in r.tokens.split(|&c| c == b' ').filter(|t| !t.is_empty()) {
        if t == ours.as_bytes() {
            if let Some(c) = client_opaque {
                out.extend_from_slice(b" O");
                out.extend_from_slice(c);
            }
        } else {
            out.push(b' ');
            out.extend_from_slice(t);
        }
    }
    out.extend_from_slice(b"\r\n");
    if let Some(v) = &r.value {
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Routes `mg`, `ms`, `md` and `ma`.
pub async fn route(ctx: &Ctx, lane: usize, req: &Request<'_>, len: usize) -> Step {
    let (fwd, key, what, read) = match req {
        Request::MetaGet(m) => {
            // A touch or a vivify changes no value: not journaled.
            ctx.stats.count_get(1, m.flags.ttl.is_some());
            (
                build(b"mg", &m.key, None, &m.flags, None),
                &m.key,
                match m.flags.ttl {
                    Some(_) if !m.flags.value => Op::Touch,
                    _ => Op::retrieval(false, m.flags.ttl.is_some()),
                },
                true,
            )
        }
        Request::MetaSet(m) => {
            ctx.stats.count_set();
            let Data::Bytes(data) = m.data else {
                let Data::TooLarge { len: n } = m.data else {
                    unreachable!()
                };
                let f =
                    crate::call::too_large(ctx, lane, &m.key.bytes, true, reply::TOO_LARGE).await;
                return Step::Done {
                    len,
                    swallow: n + 2,
                    reply: Some(Box::pin(async move { Out::Bytes(f.await) })),
                };
            };
            (
                build(b"ms", &m.key, Some(data.len()), &m.flags, Some(data)),
                &m.key,
                Op::store(m.mode, m.flags.compare_cas.is_some()),
                false,
            )
        }
        Request::MetaDelete(m) => (
            build(b"md", &m.key, None, &m.flags, None),
            &m.key,
            Op::Delete,
            false,
        ),
        Request::MetaArith(m) => (
            build(b"ma", &m.key, None, &m.flags, None),
            &m.key,
            if m.incr { Op::Incr } else { Op::Decr },
            false,
        ),
        _ => unreachable!("meta::route is given meta commands"),
    };
    let router = ctx.router();
    let call = Call::route(&router, lane, &key.bytes, what, fwd.bytes, fwd.expect).await;
    let down_miss = read && router.down_reply == DownReply::Miss;
    let stats = ctx.stats.clone();
    let (op, quiet, client_opaque) = (fwd.op, fwd.quiet, fwd.client_opaque);
    Step::reply(
        len,
        Box::pin(async move {
            let out = match call.finish().await {
                Ok(replies) => {
                    let mut out = Vec::new();
                    for r in replies.iter().filter(|r| r.status != Status::Noop) {
                        if read {
                            stats.count_hits(
                                usize::from(r.status == Status::Value),
                                usize::from(r.status == Status::Miss),
                            );
                        }
                        out.extend_from_slice(&rewrite(r, op, client_opaque.as_deref()));
                    }
                    if read && quiet && replies.iter().all(|r| r.status == Status::Noop) {
                        stats.count_hits(0, 1);
                    }
                    out
                }
                Err(e) if down_miss && unavailable(&e) => {
                    if quiet {
                        Vec::new()
                    } else {
                        let mut out = b"EN".to_vec();
                        if let Some(c) = &client_opaque {
                            out.extend_from_slice(b" O");
                            out.extend_from_slice(c);
                        }
                        out.extend_from_slice(b"\r\n");
                        out
                    }
                }
                Err(e) => server_error(&e),
            };
            Out::Bytes(out)
        }),
    )
}
