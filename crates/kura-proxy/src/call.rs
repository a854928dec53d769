//! One request for one key, routed now and awaited later: the piece every
//! protocol's translation is built from. A plain pool sends it to the
//! key's backend. A replicated pool sends a write to every replica and
//! aggregates the replies by its write mode (`fire-and-forget` answers at
//! once), and sends a read to the replica its `read` picks, failing over
//! to the next when that one fails (or, with `miss_failover`, misses). A
//! sampled share goes to a shadow pool as well (its replies are dropped).
//! A pool over its rate limit answers the refusal itself.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::join_all;
use kura_client::raw::Expect;
use kura_client::Error;
use kura_proto::client::{meta, Reply, Status};

use crate::backend::Pending;
use crate::config::{Op, WriteMode};
use crate::router::{opaque, Node, PoolCounters, Router};

type Sent = (Arc<Node>, Result<Pending, Error>);

enum Kind {
    One(Sent),
    /// A read with replicas to fail over to.
    Failover {
        first: Sent,
        rest: Vec<Arc<Node>>,
        lane: usize,
        bytes: Bytes,
        expect: Expect,
        /// A miss tries the next replica too (counted in the pool's).
        miss_failover: Option<Arc<PoolCounters>>,
    },
    /// A write to every replica.
    All(Vec<Sent>, WriteMode),
    /// Answered by the proxy (a rate limit's refusal, a write not waited
    /// for).
    Answered(Vec<Reply>),
}

/// A routed request.
pub struct Call {
    kind: Kind,
    /// The key a write changes (journaled where the write fails).
    write_key: Option<Vec<u8>>,
}

/// How bad a replica's outcome is, mcrouter's way round: an error of the
/// proxy's (unreachable, timeout) is worst, then a backend's error reply,
/// then "not stored"/"exists", then "not found"/miss; success is best.
fn severity(r: &Result<Vec<Reply>, Error>) -> u8 {
    match r {
        Err(_) => 5,
        Ok(replies) => match replies.iter().rev().find(|r| r.status != Status::Noop) {
            None => 0,
            Some(r) => match r.status {
                Status::Value | Status::Done | Status::Noop | Status::Version => 0,
                Status::Miss | Status::NotFound | Status::End => 1,
                Status::NotStored | Status::Exists => 2,
                Status::Error => 4,
            },
        },
    }
}

async fn wait(sent: Sent, write_key: Option<&[u8]>) -> Result<Vec<Reply>, Error> {
    let (node, r) = sent;
    match r {
        Ok(p) => node.wait(p, write_key).await,
        Err(e) => Err(e),
    }
}

impl Call {
    /// Queues the request `build` writes (given the opaque to carry) for
    /// `key`, of about `size` bytes; returns the call and that opaque.
    pub async fn one(
        router: &Router,
        lane: usize,
        key: &[u8],
        what: Op,
        size: usize,
        build: impl FnOnce(&mut BytesMut, u32),
    ) -> (Call, u32) {
        let op = opaque();
        if let Some(node) = router.single(key, what) {
            // Written straight into the backend connection's buffer.
            let node = node.clone();
            let write_key = what.is_write().then_some(key);
            let sent = node
                .send_with(lane, |out| build(out, op), Expect::Meta(op), write_key)
                .await;
            return (Call::alone(node, sent, write_key), op);
        }
        let mut buf = BytesMut::with_capacity(size);
        build(&mut buf, op);
        let call = Call::route(router, lane, key, what, buf, Expect::Meta(op)).await;
        (call, op)
    }

    /// Queues `<cmd> <key>[ b]<args> O<opaque>` for `key`: the meta
    /// commands without a data block. A key meta cannot carry as it is goes
    /// base64 with the `b` flag.
    pub async fn simple(
        router: &Router,
        lane: usize,
        key: &[u8],
        what: Op,
        cmd: &[u8],
        args: &[u8],
    ) -> Call {
        let build = |b: &mut BytesMut, op: u32| {
            b.put_slice(cmd);
            b.put_slice(b" ");
            meta::put_key(b, key);
            b_flag(b, key);
            b.put_slice(args);
            b.put_slice(b" O");
            num(b, op);
            b.put_slice(b"\r\n");
        };
        let size = cmd.len() + 2 * key.len() + args.len() + 24;
        Call::one(router, lane, key, what, size, build).await.0
    }

    /// Queues `bytes` for `key`'s backend(s). They are frozen (kept for a
    /// shadow or failover) only when the request may be sent again:
    /// freezing a buffer with room to spare allocates.
    pub async fn route(
        router: &Router,
        lane: usize,
        key: &[u8],
        what: Op,
        bytes: BytesMut,
        expect: Expect,
    ) -> Call {
        let write = what.is_write();
        let write_key = write.then_some(key);
        if let Some(node) = router.single(key, what) {
            let node = node.clone();
            let sent = node.send(lane, &bytes, expect, write_key).await;
            return Call::alone(node, sent, write_key);
        }
        let bytes = bytes.freeze();
        let t = router.target(key, what);
        if !router.admit(t.pool) {
            let line = format!(
                "SERVER_ERROR pool {}: over its rate limit",
                router.pools[t.pool].name
            );
            let refused = Reply::new(Status::Error, Bytes::from(line), None);
            return Call::answered(vec![refused]);
        }
        if let Some(s) = t.shadow {
            let (b, lane) = (bytes.clone(), lane);
            tokio::task::spawn_local(async move {
                if let Ok(p) = s.send(lane, &b, expect, None).await {
                    let _ = s.wait(p, None).await;
                }
            });
        }
        let kind = match (write, t.nodes.len()) {
            (_, 0 | 1) => {
                let node = match t.nodes.into_iter().next() {
                    Some(n) => n,
                    None => router.node_for(key, what),
                };
                match t.gutter.filter(|_| !node.available()) {
                    // The server does not serve: its gutter takes the
                    // request, writes with their TTL capped, and the key is
                    // journaled for the server all the same.
                    Some((g, ttl)) => {
                        // Its copy there is deleted before the server
                        // serves again: once this write is answered.
                        let guard = write_key.map(|k| node.gutter_write(&g, k, ttl));
                        let bytes = if write { cap_ttl(&bytes, ttl) } else { bytes };
                        let sent = g.send(lane, &bytes, expect, None).await;
                        if let (Ok(p), Some(guard)) = (&sent, guard) {
                            p.hold(guard);
                        }
                        Kind::One((g, sent))
                    }
                    None => {
                        let sent = node.send(lane, &bytes, expect, write_key).await;
                        Kind::One((node, sent))
                    }
                }
            }
            (true, _) => {
                let mut parts = Vec::with_capacity(t.nodes.len());
                for n in t.nodes {
                    let sent = n.send(lane, &bytes, expect, write_key).await;
                    parts.push((n, sent));
                }
                match t.write {
                    // incr/decr answer a number only a replica knows.
                    WriteMode::FireAndForget if !matches!(what, Op::Incr | Op::Decr) => {
                        let counters = &router.pools[t.pool].counters;
                        counters.unawaited_writes.fetch_add(1, Ordering::Relaxed);
                        Kind::Answered(unawaited(parts, write_key, expect))
                    }
                    WriteMode::FireAndForget => Kind::All(parts, WriteMode::AllAsync),
                    mode => Kind::All(parts, mode),
                }
            }
            (false, _) => {
                let node = router.node_for(key, what);
                let rest = t
                    .nodes
                    .into_iter()
                    .filter(|n| !Arc::ptr_eq(n, &node))
                    .collect();
                let sent = node.send(lane, &bytes, expect, None).await;
                let counters = &router.pools[t.pool].counters;
                Kind::Failover {
                    first: (node, sent),
                    rest,
                    lane,
                    bytes,
                    expect,
                    miss_failover: t.miss_failover.then(|| counters.clone()),
                }
            }
        };
        Call {
            kind,
            write_key: write_key.map(<[u8]>::to_vec),
        }
    }

    /// The replies.
    ///
    /// # Errors
    /// The backend (every replica tried, for a read) was unavailable or
    /// failed; for a replicated write, as its write mode says.
    pub async fn finish(self) -> Result<Vec<Reply>, Error> {
        let key = self.write_key;
        match self.kind {
            Kind::One(sent) => wait(sent, key.as_deref()).await,
            Kind::Failover {
                first,
                rest,
                lane,
                bytes,
                expect,
                miss_failover,
            } => {
                let mut r = wait(first, None).await;
                // The first miss, answered if no later replica can.
                let mut miss = None;
                for n in rest {
                    match &r {
                        Err(e) if unavailable(e) => {}
                        Ok(got) if miss_failover.is_some() && is_miss(got) => {
                            miss = Some(r);
                            if !n.available() {
                                r = Err(Error::ServerDown(n.addr.clone()));
                                continue;
                            }
                            if let Some(c) = &miss_failover {
                                c.miss_failovers.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => break,
                    }
                    let sent = n.send(lane, &bytes, expect, None).await;
                    r = wait((n, sent), None).await;
                }
                match (r, miss) {
                    (Err(e), Some(m)) if unavailable(&e) => m,
                    (r, _) => r,
                }
            }
            Kind::Answered(replies) => Ok(replies),
            Kind::All(parts, WriteMode::AllAsync) => {
                let mut parts = parts.into_iter();
                let first = parts.next();
                for p in parts {
                    let key = key.clone();
                    tokio::task::spawn_local(async move { wait(p, key.as_deref()).await });
                }
                match first {
                    Some(p) => wait(p, key.as_deref()).await,
                    None => Err(Error::Config("a pool without replicas".into())),
                }
            }
            Kind::All(parts, mode) => {
                let n = parts.len();
                let results = join_all(parts.into_iter().map(|p| wait(p, key.as_deref()))).await;
                let ok = results.iter().filter(|r| severity(r) == 0).count();
                let pick = if mode == WriteMode::Majority && ok * 2 > n {
                    results.into_iter().find(|r| severity(r) == 0)
                } else {
                    results.into_iter().max_by_key(severity)
                };
                pick.unwrap_or_else(|| Err(Error::Config("a pool without replicas".into())))
            }
        }
    }

    /// The single reply of a request expecting one.
    ///
    /// # Errors
    /// As [`Call::finish`], or no reply at all.
    pub async fn reply(self) -> Result<Reply, Error> {
        self.finish().await?.pop().ok_or_else(|| Error::Protocol {
            server: "proxy".into(),
            what: "no reply".into(),
        })
    }

    /// A call answered already.
    fn answered(replies: Vec<Reply>) -> Call {
        Call {
            kind: Kind::Answered(replies),
            write_key: None,
        }
    }

    /// A request sent to one node.
    fn alone(node: Arc<Node>, sent: Result<Pending, Error>, write_key: Option<&[u8]>) -> Call {
        Call {
            kind: Kind::One((node, sent)),
            write_key: write_key.map(<[u8]>::to_vec),
        }
    }

    /// Queues the request `write` appends for `node` alone, straight into
    /// its connection's output buffer.
    pub async fn to_with(
        node: Arc<Node>,
        lane: usize,
        write: impl FnOnce(&mut BytesMut),
        expect: Expect,
    ) -> Call {
        let sent = node.send_with(lane, write, expect, None).await;
        Call {
            kind: Kind::One((node, sent)),
            write_key: None,
        }
    }

    /// Queues `bytes` for `node` alone.
    pub async fn to(node: Arc<Node>, lane: usize, bytes: &[u8], expect: Expect) -> Call {
        let sent = node.send(lane, bytes, expect, None).await;
        Call {
            kind: Kind::One((node, sent)),
            write_key: None,
        }
    }
}

/// A meta request with its TTLs (`T`, and `N` of a vivifying `ma`) at most
/// `cap` seconds: 0 (never expires) and absolute times become `cap`. Only
/// the first line changes; a data block follows as it was.
pub fn cap_ttl(bytes: &Bytes, cap: u32) -> Bytes {
    let Some(end) = bytes.iter().position(|&b| b == b'\r') else {
        return bytes.clone();
    };
    let mut out = BytesMut::with_capacity(bytes.len() + 8);
    for (i, w) in bytes[..end].split(|&b| b == b' ').enumerate() {
        if i > 0 {
            out.put_u8(b' ');
        }
        let ttl = (i >= 2 && matches!(w.first(), Some(b'T' | b'N')))
            .then(|| std::str::from_utf8(&w[1..]).ok()?.parse::<i64>().ok())
            .flatten();
        match ttl {
            Some(t) if t == 0 || t > i64::from(cap) => {
                out.put_u8(w[0]);
                num(&mut out, cap);
            }
            _ => out.put_slice(w),
        }
    }
    out.put_slice(&bytes[end..]);
    out.freeze()
}

/// Whether a read's replies say it missed: no value and no other outcome
/// (a quiet `mg`'s miss is its `MN` alone).
fn is_miss(replies: &[Reply]) -> bool {
    replies
        .iter()
        .all(|r| matches!(r.status, Status::Miss | Status::End | Status::Noop))
}

/// A write sent to every replica and not waited for (`fire-and-forget`):
/// each replica's reply is awaited in the background, its failure
/// journaled as always; the client's answer is a success now: `HD` with
/// the request's opaque (STORED, DELETED...), nothing for a quiet one.
fn unawaited(parts: Vec<Sent>, write_key: Option<&[u8]>, expect: Expect) -> Vec<Reply> {
    for p in parts {
        let key = write_key.map(<[u8]>::to_vec);
        tokio::task::spawn_local(async move { wait(p, key.as_deref()).await });
    }
    match expect {
        Expect::Meta(op) => {
            let mut tokens = BytesMut::with_capacity(12);
            tokens.put_u8(b'O');
            num(&mut tokens, op);
            vec![Reply::new(Status::Done, tokens.freeze(), None)]
        }
        Expect::MetaBatch(_) => vec![Reply::new(Status::Noop, Bytes::new(), None)],
        Expect::Text(_) => vec![Reply::new(Status::Done, Bytes::new(), None)],
    }
}

/// `SERVER_ERROR <why>\r\n` for a backend's failure.
pub fn server_error(e: &Error) -> Vec<u8> {
    let msg = e.to_string().replace(['\r', '\n'], " ");
    format!("SERVER_ERROR {msg}\r\n").into_bytes()
}

/// Whether the error means the key's backend could not answer (as opposed
/// to a bad request), so the down policy and failover apply.
pub fn unavailable(e: &Error) -> bool {
    e.is_server_failure() || matches!(e, Error::ServerDown(_))
}

/// ` b` when `key` goes base64 (kura-proto's `meta::put_key`).
fn b_flag(b: &mut BytesMut, key: &[u8]) {
    if !meta::plain(key) {
        b.put_slice(b" b");
    }
}

pub fn num(buf: &mut impl BufMut, n: impl itoa::Integer) {
    buf.put_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A store refused for its size: memcached's error, and the old value
/// dropped on the backend when `drop_old`.
pub async fn too_large(
    ctx: &crate::ctx::Ctx,
    lane: usize,
    key: &[u8],
    drop_old: bool,
    line: &'static [u8],
) -> impl std::future::Future<Output = Vec<u8>> + 'static {
    let call = if drop_old {
        let c = Call::simple(&ctx.router(), lane, key, Op::Delete, b"md", b"").await;
        Some(c)
    } else {
        None
    };
    async move {
        if let Some(c) = call {
            let _ = c.finish().await;
        }
        line.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gutter_ttls_are_capped_on_the_request_line_only() {
        let capped =
            |s: &str| String::from_utf8(cap_ttl(&Bytes::from(s.to_string()), 10).to_vec()).unwrap();
        assert_eq!(
            capped("ms k 2 F0 T0 MS O1\r\nT0\r\n"),
            "ms k 2 F0 T10 MS O1\r\nT0\r\n"
        );
        assert_eq!(capped("ms k 2 T5 O1\r\nab\r\n"), "ms k 2 T5 O1\r\nab\r\n");
        assert_eq!(
            capped("ms k 2 T2000000000 O1\r\nab\r\n"),
            "ms k 2 T10 O1\r\nab\r\n"
        );
        assert_eq!(capped("ma k v N0 J5 O1\r\n"), "ma k v N10 J5 O1\r\n");
        assert_eq!(
            capped("ms Tkey 2 T-1 O1\r\nab\r\n"),
            "ms Tkey 2 T-1 O1\r\nab\r\n"
        );
        assert_eq!(capped("md k O1\r\n"), "md k O1\r\n");
    }
}
