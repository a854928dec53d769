//! The commands that name no key. `version`, `verbosity`, `mn` and
//! `stats` are answered by the proxy, `refresh_certs` reads the
//! listener's certificate files again; `flush_all` goes to every backend;
//! `quit` closes; the server-only commands (`shutdown`, replication,
//! `mt`, `me`, `cache_memlimit`) are refused. docs/proxy.md has why.

use std::sync::Arc;

use futures_util::future::join_all;
use kura_proto::{reply, FlushDelay, Request, ShutdownMode};

use crate::ctx::Ctx;
use crate::reply::{ready, Out, Step};

pub async fn route(ctx: &Arc<Ctx>, lane: usize, req: &Request<'_>, len: usize) -> Step {
    let _ = lane;
    let line = |b: &[u8]| Step::reply(len, ready(b.to_vec()));
    match req {
        Request::Version => line(format!("VERSION {}\r\n", crate::stats::VERSION).as_bytes()),
        Request::Verbosity { noreply, .. } => Step::Done {
            len,
            swallow: 0,
            reply: (!noreply).then(|| ready(reply::OK.to_vec())),
        },
        Request::Quit => Step::Close(None),
        Request::Shutdown(ShutdownMode::Invalid) => line(reply::SHUTDOWN_INVALID),
        Request::Shutdown(_) => line(reply::SHUTDOWN_DISABLED),
        Request::MetaNoop => line(reply::MN),
        // memcached's: the listener's certificate files read again.
        Request::RefreshCerts { noreply } => {
            let r = match ctx.refresh_certs() {
                Ok(()) => reply::OK.to_vec(),
                Err(why) => format!("ERROR {why}\r\n").into_bytes(),
            };
            Step::Done {
                len,
                swallow: 0,
                reply: (!noreply).then(|| ready(r)),
            }
        }
        Request::Stats(s) => {
            let group = s.group().map(<[u8]>::to_vec);
            let ctx = ctx.clone();
            Step::Barrier {
                len,
                run: Box::pin(async move {
                    Out::Bytes(crate::stats::render(&ctx, group.as_deref()).await)
                }),
            }
        }
        Request::FlushAll(f) => {
            let arg = match f.delay {
                FlushDelay::Now => String::new(),
                FlushDelay::Exptime(t) => format!(" {t}"),
                FlushDelay::Invalid => {
                    return Step::Done {
                        len,
                        swallow: 0,
                        reply: (!f.noreply)
                            .then(|| ready(kura_proto::Error::InvalidExptime.as_bytes().to_vec())),
                    }
                }
            };
            let noreply = f.noreply;
            let flush = flush_all(ctx, arg);
            Step::Barrier {
                len,
                run: Box::pin(async move {
                    let r = flush.await;
                    Out::Bytes(if noreply { Vec::new() } else { r })
                }),
            }
        }
        Request::MetaGet(_)
        | Request::MetaSet(_)
        | Request::MetaDelete(_)
        | Request::MetaArith(_) => crate::meta::route(ctx, lane, req, len).await,
        // me, mt, replication, cache_memlimit: a server's own business.
        _ => line(b"ERROR\r\n"),
    }
}

/// `flush_all` (with ` <delay>` in `arg`) on every backend: `OK` when all
/// said so, else the first failure. A backend that did not flush may keep
/// any old value: its journal is marked overflowed, so it is flushed (or
/// kept out) before it serves again.
pub fn flush_all(ctx: &Ctx, arg: String) -> impl std::future::Future<Output = Vec<u8>> + 'static {
    ctx.stats.count_flush();
    let cmd = format!("flush_all{arg}\r\n").into_bytes();
    let nodes = ctx.router().nodes.clone();
    async move {
        let sends = nodes.iter().map(|n| n.text_command(&cmd));
        let mut failed = None;
        for (n, r) in nodes.iter().zip(join_all(sends).await) {
            match r {
                Ok(l) if l == reply::OK => {}
                Ok(l) => {
                    n.journal_everything();
                    failed.get_or_insert(l);
                }
                Err(e) => {
                    // It may keep every old value: flushed (or
                    // kept out) before it serves again.
                    n.journal_everything();
                    failed.get_or_insert(format!("SERVER_ERROR {e}\r\n").into_bytes());
                }
            }
        }
        failed.unwrap_or_else(|| reply::OK.to_vec())
    }
}
