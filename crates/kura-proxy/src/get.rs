//! Retrievals of many keys (`get`/`gets`/`gat`/`gats`): the keys are
//! grouped by backend, each backend gets the client's own command with its
//! share of the keys (`get a c d`), every batch is queued before any is
//! awaited, and the hits are put back in the client's order. A server
//! answers a text retrieval's keys in the order asked, skipping misses, so
//! each hit is matched to the next asked key with its name. The text
//! command costs a backend less than a quiet batch of `mg`s, and its
//! `VALUE` lines go to the client as the backend wrote them.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kura_client::raw::Expect;
use kura_proto::client::{meta, Reply, Status};

use crate::call::{num, unavailable, Call};
use crate::config::{DownReply, Op};
use crate::ctx::Ctx;
use crate::router::Node;
use kura_proto::client::values;

/// The client's error when a backend answers a key it was not asked.
const UNASKED: &[u8] = b"SERVER_ERROR backend answered a key it was not asked\r\n";

/// One batch: a backend and the positions of its keys in the request.
struct Batch {
    node: Arc<Node>,
    at: Vec<usize>,
}

/// A request's keys, copied out of the client's buffer into one
/// allocation (a multi-get outlives the buffer it was read from).
pub struct Keys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Keys {
    /// Room for `n` keys of `bytes` bytes in all.
    pub fn with_capacity(n: usize, bytes: usize) -> Keys {
        Keys {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(n),
        }
    }

    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    /// The key at position `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }
}

/// A hit: its `VALUE` entry as the client gets it (`VALUE <key> <flags>
/// <bytes>[ <cas>]\r\n<data>\r\n`), at `range` in run `run` of [`Found`].
#[derive(Clone)]
pub struct Hit {
    run: usize,
    range: std::ops::Range<usize>,
}

/// A batch's keys as its hits come: a hit is one of those after the last
/// hit's.
struct Asked<'a> {
    keys: &'a Keys,
    at: &'a [usize],
    next: usize,
}

impl Asked<'_> {
    /// The first key from the next on that `is_it`, which is then the last.
    fn find(&mut self, is_it: impl Fn(&[u8]) -> bool) -> Option<usize> {
        let k = self.at[self.next..]
            .iter()
            .position(|&i| is_it(self.keys.get(i)))?;
        self.next += k + 1;
        Some(self.at[self.next - 1])
    }
}

/// What came back for a request's keys.
pub struct Found {
    /// The hit of each key, in the request's order.
    pub hits: Vec<Option<Hit>>,
    /// The bytes the hits are in: the backends' runs of entries as they
    /// wrote them (kura-proto's `client/values.rs`), and entries made here.
    pub runs: Vec<Bytes>,
    /// The first failure, unless the down policy turns failures into misses.
    pub error: Option<Vec<u8>>,
}

impl Found {
    /// The entry of a hit.
    pub fn entry(&self, h: &Hit) -> &[u8] {
        &self.runs[h.run][h.range.clone()]
    }

    /// Matches a batch's replies to its keys (their positions `at`, in the
    /// order they were asked): a backend answers a retrieval's keys in
    /// that order, skipping misses, so each hit is the next asked key
    /// with its name.
    fn take(&mut self, replies: Vec<Reply>, keys: &Keys, at: &[usize]) {
        let mut asked = Asked { keys, at, next: 0 };
        for rep in replies {
            match rep.status {
                // A run of entries as the backend wrote them (kura_proto::client::values).
                Status::Value if rep.value.is_none() => self.take_run(rep.tokens, &mut asked),
                // One the text framer made (values.rs left it to it).
                Status::Value => {
                    let key = rep.tokens.split(|&c| c == b' ').next().unwrap_or_default();
                    match asked.find(|k| k == key) {
                        Some(i) => self.put(i, entry_of(&rep)),
                        None => self.unasked(),
                    }
                }
                Status::Error => {
                    let mut line = rep.tokens.to_vec();
                    line.extend_from_slice(b"\r\n");
                    self.error.get_or_insert(line);
                }
                _ => {}
            }
        }
    }

    /// Takes the hits of a run of entries.
    fn take_run(&mut self, run: Bytes, asked: &mut Asked<'_>) {
        let at = self.runs.len();
        let mut start = 0;
        // The framer took whole entries only: the walk ends at the run's end.
        while let Some(line) = run.get(start + b"VALUE ".len()..) {
            let named = |k: &[u8]| line.get(k.len()) == Some(&b' ') && line.starts_with(k);
            let i = asked.find(named);
            let end = match i {
                Some(i) => values::skip(&run, start, asked.keys.get(i).len()),
                None => values::end(&run, start),
            };
            let Some(end) = end.filter(|&e| e <= run.len()) else {
                break;
            };
            match i {
                Some(i) => {
                    let range = start..end;
                    self.hits[i] = Some(Hit { run: at, range });
                }
                None => self.unasked(),
            }
            start = end;
        }
        self.runs.push(run);
    }

    fn unasked(&mut self) {
        self.error.get_or_insert(UNASKED.to_vec());
    }

    /// Adds an entry made here as the hit of key `i`.
    fn put(&mut self, i: usize, entry: Bytes) {
        self.hits[i] = Some(Hit {
            run: self.runs.len(),
            range: 0..entry.len(),
        });
        self.runs.push(entry);
    }
}

/// The entry of a text `VALUE` reply kura-proto's text framer made (one
/// values.rs left to it): `VALUE <tokens>\r\n<data>\r\n`.
fn entry_of(r: &Reply) -> Bytes {
    let value = r.value.as_deref().unwrap_or_default();
    let mut e = BytesMut::with_capacity(r.tokens.len() + value.len() + 10);
    e.put_slice(b"VALUE ");
    e.put_slice(&r.tokens);
    e.put_slice(b"\r\n");
    e.put_slice(value);
    e.put_slice(b"\r\n");
    e.freeze()
}

/// Groups the keys at positions `at` by the node `pick` chooses for each.
fn group(
    at: impl Iterator<Item = usize>,
    mut pick: impl FnMut(usize) -> Option<Arc<Node>>,
) -> Vec<Batch> {
    // Room for every key in each batch: no batch grows as it fills.
    let hint = at.size_hint().0;
    let mut batches: Vec<Batch> = Vec::with_capacity(4);
    for i in at {
        let Some(node) = pick(i) else { continue };
        match batches.iter_mut().find(|b| Arc::ptr_eq(&b.node, &node)) {
            Some(b) => b.at.push(i),
            None => {
                let mut at = Vec::with_capacity(hint);
                at.push(i);
                batches.push(Batch { node, at });
            }
        }
    }
    batches
}

/// The text command of a retrieval: `get`, `gets`, `gat <exptime>`,
/// `gats <exptime>`.
pub fn command(cas: bool, touch: Option<i32>) -> Cow<'static, [u8]> {
    let name: &'static [u8] = match (touch.is_some(), cas) {
        (false, false) => b"get",
        (false, true) => b"gets",
        (true, false) => b"gat",
        (true, true) => b"gats",
    };
    let Some(t) = touch else {
        return Cow::Borrowed(name);
    };
    let mut cmd = Vec::with_capacity(16);
    cmd.extend_from_slice(name);
    cmd.push(b' ');
    num(&mut cmd, t);
    Cow::Owned(cmd)
}

/// Queues each batch: `<command> <key> <key> ...`, written straight into
/// its backend connection's output buffer.
async fn send(batches: Vec<Batch>, keys: &Keys, cmd: &[u8], lane: usize) -> Vec<(Call, Batch)> {
    let mut calls = Vec::with_capacity(batches.len());
    for b in batches {
        let write = |out: &mut BytesMut| {
            out.put_slice(cmd);
            for &i in &b.at {
                out.put_slice(b" ");
                out.put_slice(keys.get(i));
            }
            out.put_slice(b"\r\n");
        };
        let call = Call::to_with(b.node.clone(), lane, write, Expect::Text(1)).await;
        calls.push((call, b));
    }
    calls
}

/// Queues the batches of `keys` and returns the future of their replies.
/// `cas` and `touch` say which command the client sent. A batch
/// whose backend fails is sent again to the keys' next replicas (in a
/// replicated pool) until none is left; so are the keys a batch missed, in
/// a pool with `miss_failover`. A request that reaches a pool over its
/// rate limit is refused whole, as a failed batch fails it.
pub async fn start(
    ctx: &Ctx,
    lane: usize,
    keys: Keys,
    cas: bool,
    touch: Option<i32>,
) -> impl std::future::Future<Output = Found> + 'static {
    let router = ctx.router();
    let op = Op::retrieval(cas, touch.is_some());
    let refused = if router.limited {
        refusal(&router, &keys, op)
    } else {
        None
    };
    // A warm-up route's keys: (position, cold node, warm node).
    let mut warm: Vec<(usize, Arc<Node>, Arc<Node>)> = Vec::new();
    let touching = touch.is_some();
    let asked = if refused.is_some() { 0 } else { keys.len() };
    let batches = group(0..asked, |i| {
        let node = router.node_for(keys.get(i), op);
        if router.plain_reads || touching {
            return Some(node);
        }
        if let Some(w) = router.target(keys.get(i), op).warm {
            warm.push((i, node.clone(), w));
        }
        Some(node)
    });
    let cmd = command(cas, touch);
    let mut calls = send(batches, &keys, &cmd, lane).await;
    async move {
        let n = keys.len();
        let mut found = Found {
            hits: vec![None; n],
            runs: Vec::with_capacity(calls.len()),
            error: refused,
        };
        // The keys that missed on a replica (made on the first such miss):
        // they answer a miss if no later replica can tell.
        let mut missed: Vec<bool> = Vec::new();
        // The nodes each key was asked of (made on the first failure).
        let mut tried: Vec<Vec<Arc<Node>>> = Vec::new();
        loop {
            let mut again: Vec<usize> = Vec::new();
            // Every batch is queued already: awaiting them in turn takes
            // as long as the slowest, without join_all's allocations and
            // its polling of every batch at each wake-up.
            for (c, b) in calls {
                let r = c.finish().await;
                match r {
                    Ok(replies) => {
                        found.take(replies, &keys, &b.at);
                        if router.miss_failover {
                            for &i in b.at.iter().filter(|&&i| found.hits[i].is_none()) {
                                let t = router.target(keys.get(i), op);
                                if !t.miss_failover {
                                    continue;
                                }
                                tried.resize_with(n, Vec::new);
                                missed.resize(n, false);
                                tried[i].push(b.node.clone());
                                missed[i] = true;
                                let left = |x: &Arc<Node>| {
                                    x.available() && !tried[i].iter().any(|t| Arc::ptr_eq(t, x))
                                };
                                if t.nodes.iter().any(left) {
                                    router.pools[t.pool]
                                        .counters
                                        .miss_failovers
                                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                    again.push(i);
                                }
                            }
                        }
                    }
                    Err(e) if unavailable(&e) => {
                        tried.resize_with(n, Vec::new);
                        for &i in &b.at {
                            tried[i].push(b.node.clone());
                            let more = router
                                .target(keys.get(i), op)
                                .nodes
                                .iter()
                                .any(|x| !tried[i].iter().any(|t| Arc::ptr_eq(t, x)));
                            if more {
                                again.push(i);
                            } else if router.down_reply != DownReply::Miss
                                && !missed.get(i).copied().unwrap_or(false)
                            {
                                found.error.get_or_insert(crate::call::server_error(&e));
                            }
                        }
                    }
                    Err(e) => {
                        found.error.get_or_insert(crate::call::server_error(&e));
                    }
                }
            }
            if again.is_empty() {
                break;
            }
            let batches = group(again.into_iter(), |i| {
                let nodes = router.target(keys.get(i), op).nodes;
                let left: Vec<Arc<Node>> = nodes
                    .into_iter()
                    .filter(|x| !tried[i].iter().any(|t| Arc::ptr_eq(t, x)))
                    .collect();
                left.iter()
                    .find(|x| x.available())
                    .or(left.first())
                    .cloned()
            });
            calls = send(batches, &keys, &cmd, lane).await;
        }
        if found.error.is_none() {
            warm.retain(|(i, _, _)| found.hits[*i].is_none());
            warm_up(&mut found, &keys, warm, cas, lane).await;
        }
        found
    }
}

/// `SERVER_ERROR pool NAME: over its rate limit` if a pool the keys go
/// to refuses the request (each pool asked once).
fn refusal(router: &crate::router::Router, keys: &Keys, op: Op) -> Option<Vec<u8>> {
    let mut pools: Vec<usize> = (0..keys.len())
        .map(|i| router.pool_for(keys.get(i), op).1)
        .collect();
    pools.sort_unstable();
    pools.dedup();
    let over = pools.into_iter().find(|&p| !router.admit(p))?;
    let name = &router.pools[over].name;
    Some(format!("SERVER_ERROR pool {name}: over its rate limit\r\n").into_bytes())
}

/// Reads the keys a warm-up route missed from their warm pool and, for
/// each hit, answers it and stores it in the cold pool (with the TTL it has
/// left there), without waiting for that store.
async fn warm_up(
    found: &mut Found,
    keys: &Keys,
    warm: Vec<(usize, Arc<Node>, Arc<Node>)>,
    cas: bool,
    lane: usize,
) {
    for (i, cold, w) in warm {
        let key = keys.get(i);
        let mut buf = BytesMut::new();
        buf.put_slice(b"mg ");
        buf.put_slice(key);
        buf.put_slice(b" v f c t O0 q\r\nmn\r\n");
        let Ok(replies) = Call::to(w, lane, &buf, Expect::MetaBatch(1))
            .await
            .finish()
            .await
        else {
            continue;
        };
        let Some(hit) = replies.into_iter().find(|r| r.status == Status::Value) else {
            continue;
        };
        let value = hit.value.clone().unwrap_or_default();
        let ttl = hit.number::<i64>(b't').filter(|&t| t > 0).unwrap_or(0);
        let mut set = BytesMut::new();
        meta::Set {
            key,
            value: &value,
            flags: hit.number::<u32>(b'f').unwrap_or(0),
            ttl,
            mode: b'E',
            rotate: None,
            cas: None,
            return_cas: false,
        }
        .write(&mut set, 0, true);
        set.put_slice(b"mn\r\n");
        let fill = Call::to(cold, lane, &set, Expect::MetaBatch(1)).await;
        tokio::task::spawn_local(async move {
            let _ = fill.finish().await;
        });
        // The hit as a text `VALUE` entry, as the other hits are.
        let flags = hit.number::<u32>(b'f').unwrap_or(0);
        let mut entry = BytesMut::with_capacity(key.len() + value.len() + 48);
        entry.put_slice(b"VALUE ");
        entry.put_slice(key);
        entry.put_u8(b' ');
        num(&mut entry, flags);
        entry.put_u8(b' ');
        num(&mut entry, value.len());
        if cas {
            entry.put_u8(b' ');
            num(&mut entry, hit.number::<u64>(b'c').unwrap_or(0));
        }
        entry.put_slice(b"\r\n");
        entry.put_slice(&value);
        entry.put_slice(b"\r\n");
        found.put(i, entry.freeze());
    }
}
