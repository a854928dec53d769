//! Retrievals of many keys (`get`/`gets`/`gat`/`gats`): the keys are
//! grouped by backend, each backend gets one quiet batch of `mg`s (a hit
//! names its key by its place in the batch, `O<i>`) ended by `mn`, every
//! batch is queued before any is awaited, and the hits are put back in
//! the client's order.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use kura_client::raw::{Expect, Reply, Status};

use crate::call::{num, unavailable, Call};
use crate::config::DownReply;
use crate::ctx::Ctx;
use crate::router::Node;

/// One batch: a backend and the positions of its keys in the request.
struct Batch {
    node: Arc<Node>,
    at: Vec<usize>,
}

/// What came back for a request's keys.
pub struct Found {
    /// The request's keys.
    pub keys: Vec<Vec<u8>>,
    /// The hit of each key, in the request's order.
    pub hits: Vec<Option<Reply>>,
    /// The first failure, unless the down policy turns failures into misses.
    pub error: Option<Vec<u8>>,
}

/// Groups the keys at positions `at` by the node `pick` chooses for each.
fn group(
    at: impl Iterator<Item = usize>,
    mut pick: impl FnMut(usize) -> Option<Arc<Node>>,
) -> Vec<Batch> {
    let mut batches: Vec<Batch> = Vec::new();
    for i in at {
        let Some(node) = pick(i) else { continue };
        match batches.iter_mut().find(|b| Arc::ptr_eq(&b.node, &node)) {
            Some(b) => b.at.push(i),
            None => batches.push(Batch { node, at: vec![i] }),
        }
    }
    batches
}

/// Queues each batch: `mg <key> <flags> O<j> q` per key, then `mn`.
async fn send(
    batches: Vec<Batch>,
    keys: &[Vec<u8>],
    flags: &[u8],
    lane: usize,
) -> Vec<(Call, Batch)> {
    let mut calls = Vec::with_capacity(batches.len());
    for b in batches {
        let mut buf = BytesMut::with_capacity(b.at.len() * 40);
        for (j, &i) in b.at.iter().enumerate() {
            buf.put_slice(b"mg ");
            buf.put_slice(&keys[i]);
            buf.put_slice(b" ");
            buf.put_slice(flags);
            buf.put_slice(b" O");
            num(&mut buf, j);
            buf.put_slice(b" q\r\n");
        }
        buf.put_slice(b"mn\r\n");
        let expect = Expect::MetaBatch(b.at.len() as u32);
        let call = Call::to(b.node.clone(), lane, buf.freeze(), expect).await;
        calls.push((call, b));
    }
    calls
}

/// Queues the batches of `keys` and returns the future of their replies.
/// `flags` are the `mg` flags to ask for (`v f`, `c`, `T<ttl>`). A batch
/// whose backend fails is sent again to the keys' next replicas (in a
/// replicated pool) until none is left.
pub async fn start(
    ctx: &Ctx,
    lane: usize,
    keys: Vec<Vec<u8>>,
    flags: &[u8],
) -> impl std::future::Future<Output = Found> + 'static {
    let router = ctx.router();
    // A warm-up route's keys: (position, cold node, warm node).
    let mut warm: Vec<(usize, Arc<Node>, Arc<Node>)> = Vec::new();
    let touching = flags.contains(&b'T');
    let batches = group(0..keys.len(), |i| {
        let node = router.node_for(&keys[i]);
        if router.plain_reads || touching {
            return Some(node);
        }
        if let Some(w) = router.target(&keys[i], false).warm {
            warm.push((i, node.clone(), w));
        }
        Some(node)
    });
    let mut calls = send(batches, &keys, flags, lane).await;
    let flags = flags.to_vec();
    async move {
        let n = keys.len();
        let mut found = Found {
            keys: Vec::new(),
            hits: vec![None; n],
            error: None,
        };
        // The nodes each key was asked of.
        let mut tried: Vec<Vec<Arc<Node>>> = vec![Vec::new(); n];
        loop {
            let mut again: Vec<usize> = Vec::new();
            // Every batch is queued already: awaiting them in turn takes
            // as long as the slowest, without join_all's allocations and
            // its polling of every batch at each wake-up.
            for (c, b) in calls {
                let r = c.finish().await;
                match r {
                    Ok(replies) => {
                        for rep in replies {
                            let slot = rep.opaque_token().and_then(|o| b.at.get(o as usize));
                            match (rep.status, slot) {
                                (Status::Value, Some(&i)) => found.hits[i] = Some(rep),
                                (Status::Error, _) => {
                                    let mut line = rep.tokens.to_vec();
                                    line.extend_from_slice(b"\r\n");
                                    found.error.get_or_insert(line);
                                }
                                _ => {}
                            }
                        }
                    }
                    Err(e) if unavailable(&e) => {
                        for &i in &b.at {
                            tried[i].push(b.node.clone());
                            let more = router
                                .target(&keys[i], false)
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
                let nodes = router.target(&keys[i], false).nodes;
                let left: Vec<Arc<Node>> = nodes
                    .into_iter()
                    .filter(|x| !tried[i].iter().any(|t| Arc::ptr_eq(t, x)))
                    .collect();
                left.iter()
                    .find(|x| x.available())
                    .or(left.first())
                    .cloned()
            });
            calls = send(batches, &keys, &flags, lane).await;
        }
        if found.error.is_none() {
            warm.retain(|(i, _, _)| found.hits[*i].is_none());
            warm_up(&mut found, &keys, warm, lane).await;
        }
        found.keys = keys;
        found
    }
}

/// Reads the keys a warm-up route missed from their warm pool and, for
/// each hit, answers it and stores it in the cold pool (with the TTL it has
/// left there), without waiting for that store.
async fn warm_up(
    found: &mut Found,
    keys: &[Vec<u8>],
    warm: Vec<(usize, Arc<Node>, Arc<Node>)>,
    lane: usize,
) {
    for (i, cold, w) in warm {
        let key = &keys[i];
        let mut buf = BytesMut::new();
        buf.put_slice(b"mg ");
        buf.put_slice(key);
        buf.put_slice(b" v f c t O0 q\r\nmn\r\n");
        let Ok(replies) = Call::to(w, lane, buf.freeze(), Expect::MetaBatch(1))
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
        let fill = Call::to(cold, lane, set.freeze(), Expect::MetaBatch(1)).await;
        tokio::task::spawn_local(async move {
            let _ = fill.finish().await;
        });
        found.hits[i] = Some(hit);
    }
}
