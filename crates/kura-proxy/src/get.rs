//! Retrievals of many keys (`get`/`gets`/`gat`/`gats`): the keys are
//! grouped by backend, each backend gets the client's own command with its
//! share of the keys (`get a c d`), every batch is queued before any is
//! awaited, and the hits are put back in the client's order. A server
//! answers a text retrieval's keys in the order asked, skipping misses, so
//! each hit is matched to the next asked key with its name. The text
//! command costs a backend less than a quiet batch of `mg`s, and its
//! `VALUE` lines go to the client as the backend wrote them.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use kura_client::raw::{Expect, Reply, Status};

use crate::call::{num, unavailable, Call};
use crate::config::DownReply;
use crate::ctx::Ctx;
use crate::router::Node;

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

/// What came back for a request's keys.
pub struct Found {
    /// The hit of each key, in the request's order: a text `VALUE` whose
    /// tokens are `<key> <flags> <bytes>[ <cas>]`.
    pub hits: Vec<Option<Reply>>,
    /// The first failure, unless the down policy turns failures into misses.
    pub error: Option<Vec<u8>>,
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
pub fn command(cas: bool, touch: Option<i32>) -> Vec<u8> {
    let mut cmd = Vec::with_capacity(16);
    cmd.extend_from_slice(match (touch.is_some(), cas) {
        (false, false) => b"get".as_slice(),
        (false, true) => b"gets",
        (true, false) => b"gat",
        (true, true) => b"gats",
    });
    if let Some(t) = touch {
        cmd.push(b' ');
        num(&mut cmd, t);
    }
    cmd
}

/// Queues each batch: `<command> <key> <key> ...`.
async fn send(batches: Vec<Batch>, keys: &Keys, cmd: &[u8], lane: usize) -> Vec<(Call, Batch)> {
    let mut calls = Vec::with_capacity(batches.len());
    for b in batches {
        let size: usize = b.at.iter().map(|&i| keys.get(i).len() + 1).sum();
        let mut buf = BytesMut::with_capacity(cmd.len() + size + 2);
        buf.put_slice(cmd);
        for &i in &b.at {
            buf.put_slice(b" ");
            buf.put_slice(keys.get(i));
        }
        buf.put_slice(b"\r\n");
        let expect = Expect::Text(1);
        let call = Call::to(b.node.clone(), lane, &buf, expect).await;
        calls.push((call, b));
    }
    calls
}

/// Queues the batches of `keys` and returns the future of their replies.
/// `cas` and `touch` say which command the client sent. A batch
/// whose backend fails is sent again to the keys' next replicas (in a
/// replicated pool) until none is left.
pub async fn start(
    ctx: &Ctx,
    lane: usize,
    keys: Keys,
    cas: bool,
    touch: Option<i32>,
) -> impl std::future::Future<Output = Found> + 'static {
    let router = ctx.router();
    // A warm-up route's keys: (position, cold node, warm node).
    let mut warm: Vec<(usize, Arc<Node>, Arc<Node>)> = Vec::new();
    let touching = touch.is_some();
    let batches = group(0..keys.len(), |i| {
        let node = router.node_for(keys.get(i));
        if router.plain_reads || touching {
            return Some(node);
        }
        if let Some(w) = router.target(keys.get(i), false).warm {
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
            error: None,
        };
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
                        // The next of the batch's keys a hit may be.
                        let mut next = 0;
                        for rep in replies {
                            match rep.status {
                                Status::Value => {
                                    let key = rep.tokens.split(|&c| c == b' ').next();
                                    let asked =
                                        b.at[next..].iter().position(|&i| Some(keys.get(i)) == key);
                                    match asked {
                                        Some(k) => {
                                            found.hits[b.at[next + k]] = Some(rep);
                                            next += k + 1;
                                        }
                                        None => {
                                            found.error.get_or_insert(UNASKED.to_vec());
                                        }
                                    }
                                }
                                Status::Error => {
                                    let mut line = rep.tokens.to_vec();
                                    line.extend_from_slice(b"\r\n");
                                    found.error.get_or_insert(line);
                                }
                                _ => {}
                            }
                        }
                    }
                    Err(e) if unavailable(&e) => {
                        tried.resize_with(n, Vec::new);
                        for &i in &b.at {
                            tried[i].push(b.node.clone());
                            let more = router
                                .target(keys.get(i), false)
                                .nodes
                                .iter()
                                .any(|x| !tried[i].iter().any(|t| Arc::ptr_eq(t, x)));
                            if more {
                                again.push(i);
                            } else if router.down_reply != DownReply::Miss {
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
                let nodes = router.target(keys.get(i), false).nodes;
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
        set.put_slice(b"ms ");
        set.put_slice(key);
        set.put_slice(b" ");
        num(&mut set, value.len());
        set.put_slice(b" F");
        num(&mut set, hit.number::<u32>(b'f').unwrap_or(0));
        set.put_slice(b" T");
        num(&mut set, ttl);
        set.put_slice(b" ME O0 q\r\n");
        set.put_slice(&value);
        set.put_slice(b"\r\nmn\r\n");
        let fill = Call::to(cold, lane, &set, Expect::MetaBatch(1)).await;
        tokio::task::spawn_local(async move {
            let _ = fill.finish().await;
        });
        // The hit as a text `VALUE`'s tokens, as the other hits are.
        let mut tokens = BytesMut::with_capacity(key.len() + 40);
        tokens.put_slice(key);
        tokens.put_u8(b' ');
        num(&mut tokens, hit.number::<u32>(b'f').unwrap_or(0));
        tokens.put_u8(b' ');
        num(&mut tokens, value.len());
        if cas {
            tokens.put_u8(b' ');
            num(&mut tokens, hit.number::<u64>(b'c').unwrap_or(0));
        }
        found.hits[i] = Some(Reply {
            tokens: tokens.freeze(),
            ..hit
        });
    }
}
