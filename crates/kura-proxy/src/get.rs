//! Retrievals of many keys (`get`/`gets`/`gat`/`gats`): the keys are
//! grouped by backend, each backend gets one quiet batch of `mg`s (a hit
//! names its key by its place in the batch, `O<i>`) ended by `mn`, every
//! batch is queued before any is awaited, and the hits are put back in
//! the client's order.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use futures_util::future::join_all;
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
    /// The hit of each key, in the request's order.
    pub hits: Vec<Option<Reply>>,
    /// The first failure, unless the down policy turns failures into misses.
    pub error: Option<Vec<u8>>,
}

/// Queues the batches of `keys` and returns the future of their replies.
/// `flags` are the `mg` flags to ask for (`v f`, `c`, `T<ttl>`).
pub async fn start(
    ctx: &Ctx,
    lane: usize,
    keys: &[&[u8]],
    flags: &[u8],
) -> impl std::future::Future<Output = Found> + Send + 'static {
    let router = ctx.router();
    let mut batches: Vec<Batch> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let node = router.node_for(k);
        match batches.iter_mut().find(|b| Arc::ptr_eq(&b.node, node)) {
            Some(b) => b.at.push(i),
            None => batches.push(Batch {
                node: node.clone(),
                at: vec![i],
            }),
        }
    }
    let mut calls = Vec::with_capacity(batches.len());
    for b in batches {
        let mut buf = BytesMut::with_capacity(b.at.len() * 40);
        for (j, &i) in b.at.iter().enumerate() {
            buf.put_slice(b"mg ");
            buf.put_slice(keys[i]);
            buf.put_slice(b" ");
            buf.put_slice(flags);
            buf.put_slice(b" O");
            num(&mut buf, j);
            buf.put_slice(b" q\r\n");
        }
        buf.put_slice(b"mn\r\n");
        let expect = Expect::MetaBatch(b.at.len() as u32);
        let call = Call::to(b.node.clone(), lane, buf.freeze(), expect, None).await;
        calls.push((call, b.at));
    }
    let n = keys.len();
    let down_reply = router.down_reply;
    async move {
        let mut found = Found {
            hits: vec![None; n],
            error: None,
        };
        let waits = calls
            .into_iter()
            .map(|(c, at)| async move { (c.finish().await, at) });
        for (r, at) in join_all(waits).await {
            match r {
                Ok(replies) => {
                    for rep in replies {
                        let slot = rep.opaque_token().and_then(|o| at.get(o as usize));
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
                Err(e) if unavailable(&e) && down_reply == DownReply::Miss => {}
                Err(e) => {
                    found.error.get_or_insert(crate::call::server_error(&e));
                }
            }
        }
        found
    }
}
