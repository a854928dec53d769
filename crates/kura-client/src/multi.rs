//! Multi-operations: the keys are grouped by server, each server gets its
//! keys as quiet meta commands ended by `mn` (chunks of
//! [`crate::Config::chunk_keys`], each one write), and all servers are
//! asked at once: one round trip per server, whatever the number of keys
//! (seed 000's write-back). Results are per key, in the order given: a
//! server that fails gives each of its keys that error, and a key is only
//! reported stored when its batch ended with `MN` and nothing said
//! otherwise.
//!
//! In text mode, reads of a chunk go as `gets` lines of up to 100 keys and
//! writes as acknowledged commands, all in one write: still one round trip.

use std::collections::BTreeMap;

use bytes::{BufMut, BytesMut};
use futures_util::future::join_all;

use crate::client::{read_one, Client, Route};
use crate::config::Protocol;
use crate::conn::Expect;
use crate::error::{Error, Result};
use crate::ops::SetOptions;
use kura_proto::client::text::value as text_value;
use kura_proto::client::{Cmd, Mode, Outcome, StoreStatus, Value};
use kura_proto::client::{Reply, Status};

/// Keys per `gets` line in text mode.
const TEXT_GETS_KEYS: usize = 100;

impl Client {
    /// Reads many keys: one round trip per server. Per-key results in the
    /// order of `keys` (None: a miss).
    pub async fn get_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<Option<Value>>> {
        let near = self.inner.near.as_ref();
        let mut out: Vec<Option<Result<Option<Value>>>> = keys
            .iter()
            .map(|k| near.and_then(|n| n.get(k.as_ref())).map(|v| Ok(Some(v))))
            .collect();
        let epoch = near.map_or(0, |n| n.epoch());
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| out[i].is_none()).collect();
        if missing.is_empty() && near.is_some() {
            // All near hits: yield now and then (see `Client::get`).
            tokio::task::coop::consume_budget().await;
        }
        let cmds = missing
            .iter()
            .map(|&i| Cmd::Get {
                key: keys[i].as_ref(),
                touch: None,
                vivify: None,
            })
            .collect();
        for (i, r) in missing.into_iter().zip(self.run_multi(cmds).await) {
            let r = r.and_then(|o| match o {
                Outcome::Value(v) => Ok(v),
                o => Err(Error::Server(format!("unexpected outcome {o:?}"))),
            });
            if let (Some(n), Ok(Some(v))) = (near, &r) {
                n.put(keys[i].as_ref(), v, epoch);
            }
            out[i] = Some(r);
        }
        out.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }

    async fn store_multi<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        mode: Mode,
        items: &[(K, V)],
        opts: SetOptions,
    ) -> Vec<Result<bool>> {
        let cmds = items
            .iter()
            .map(|(k, v)| Cmd::Store {
                key: k.as_ref(),
                value: v.as_ref(),
                mode,
                flags: opts.flags,
                ttl: opts.ttl,
                cas: None,
            })
            .collect();
        let out = self.run_multi(cmds).await;
        for (k, _) in items {
            self.forget(k.as_ref());
        }
        out.into_iter()
            .map(|r| r.map(|o| o == Outcome::Store(StoreStatus::Stored)))
            .collect()
    }

    /// Stores many items with quiet sets: one round trip per server.
    /// Per-key results (true: stored) in the order of `items`.
    pub async fn set_multi<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V)],
        opts: impl Into<SetOptions>,
    ) -> Vec<Result<bool>> {
        self.store_multi(Mode::Set, items, opts.into()).await
    }

    /// Adds many items (stored only where absent); true where stored.
    pub async fn add_multi<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V)],
        opts: impl Into<SetOptions>,
    ) -> Vec<Result<bool>> {
        self.store_multi(Mode::Add, items, opts.into()).await
    }

    /// Stores many items each under its CAS unique.
    pub async fn cas_multi<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        items: &[(K, V, u64)],
        opts: impl Into<SetOptions>,
    ) -> Vec<Result<StoreStatus>> {
        let opts = opts.into();
        let cmds = items
            .iter()
            .map(|(k, v, cas)| Cmd::Store {
                key: k.as_ref(),
                value: v.as_ref(),
                mode: Mode::Set,
                flags: opts.flags,
                ttl: opts.ttl,
                cas: Some(*cas),
            })
            .collect();
        let out = self.run_multi(cmds).await;
        for (k, _, _) in items {
            self.forget(k.as_ref());
        }
        out.into_iter()
            .map(|r| {
                r.and_then(|o| match o {
                    Outcome::Store(s) => Ok(s),
                    o => Err(Error::Server(format!("unexpected outcome {o:?}"))),
                })
            })
            .collect()
    }

    /// Deletes many keys; true where the key was there.
    pub async fn delete_multi<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Result<bool>> {
        let cmds = keys
            .iter()
            .map(|k| Cmd::Delete { key: k.as_ref() })
            .collect();
        let out = self.run_multi(cmds).await;
        for k in keys {
            self.forget(k.as_ref());
        }
        out.into_iter()
            .map(|r| r.map(|o| o == Outcome::Found(true)))
            .collect()
    }

    /// Runs commands grouped per server, every server at once.
    pub(crate) async fn run_multi(&self, cmds: Vec<Cmd<'_>>) -> Vec<Result<Outcome>> {
        self.run_multi_fenced(cmds, None).await.0
    }

    /// [`Client::run_multi`], each server's batch sent only on a
    /// connection the fence allows; also returns the fence of the
    /// connections the batches went on.
    pub(crate) async fn run_multi_fenced(
        &self,
        cmds: Vec<Cmd<'_>>,
        fence: Option<&crate::Fence>,
    ) -> (Vec<Result<Outcome>>, crate::Fence) {
        let mut used = crate::Fence::default();
        let mut out: Vec<Option<Result<Outcome>>> = vec![None; cmds.len()];
        let mut groups: BTreeMap<Route, Vec<usize>> = BTreeMap::new();
        for (i, cmd) in cmds.iter().enumerate() {
            let routed = self.check(cmd).and_then(|()| self.route(cmd.key()));
            match routed {
                Ok(r) => groups.entry(r).or_default().push(i),
                Err(e) => out[i] = Some(self.down_read(cmd, e)),
            }
        }
        let chunk = self.inner.cfg.chunk_keys;
        let batches = groups.iter().flat_map(|(route, idx)| {
            idx.chunks(chunk).map(|part| {
                let part: Vec<(usize, Cmd<'_>)> = part
                    .iter()
                    .map(|&i| (i, self.for_route(cmds[i], *route)))
                    .collect();
                self.batch(*route, part, fence.map(|f| f.of(*route)))
            })
        });
        for (results, route, number) in join_all(batches).await {
            used.note(route, number);
            for (i, r) in results {
                out[i] = Some(r.or_else(|e| self.down_read(&cmds[i], e)));
            }
        }
        let out = out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Server("no result".into()))))
            .collect();
        (out, used)
    }

    /// One chunk to one server: one write, one round trip.
    async fn batch(
        &self,
        route: Route,
        part: Vec<(usize, Cmd<'_>)>,
        fence: Option<u64>,
    ) -> (Vec<(usize, Result<Outcome>)>, Route, u64) {
        let pool = self.pool(route);
        let size: usize = part.iter().map(|(_, c)| 48 + c.len()).sum();
        let mut buf = BytesMut::with_capacity(size + 8);
        let protocol = self.inner.cfg.protocol;
        let expect = match protocol {
            Protocol::Text => Expect::Text(write_text(&mut buf, &part)),
            Protocol::Meta => {
                for (o, (_, cmd)) in part.iter().enumerate() {
                    cmd.meta(&mut buf, o as u32, true);
                }
                buf.put_slice(b"mn\r\n");
                Expect::MetaBatch(part.len() as u32)
            }
            Protocol::Binary => {
                for (o, (_, cmd)) in part.iter().enumerate() {
                    cmd.binary(&mut buf, o as u32, true);
                }
                kura_proto::client::binary::noop(&mut buf, part.len() as u32);
                Expect::MetaBatch(part.len() as u32)
            }
        };
        let (replies, number) = match pool.call_fenced(buf.freeze(), expect, fence).await {
            Ok(r) => r,
            Err(e) => {
                let failed = part.into_iter().map(|(i, _)| (i, Err(e.clone()))).collect();
                return (failed, route, 0);
            }
        };
        let outcomes = if protocol.is_text() {
            read_text(&part, &replies, pool.addr())
        } else {
            read_quiet(protocol, &part, &replies, pool.addr())
        };
        let results = part.iter().map(|(i, _)| *i).zip(outcomes).collect();
        (results, route, number)
    }
}

/// The outcome of each command of a quiet meta or binary batch: what its reply said,
/// or the quiet default when it said nothing. An error line without an
/// opaque cannot be placed, so it becomes the result of every command
/// that got no reply of its own.
fn read_quiet(
    protocol: Protocol,
    part: &[(usize, Cmd<'_>)],
    replies: &[Reply],
    server: &str,
) -> Vec<Result<Outcome>> {
    let mut got: Vec<Option<Result<Outcome>>> = vec![None; part.len()];
    let mut stray = None;
    for r in replies {
        match r
            .opaque_token()
            .map(|o| o as usize)
            .filter(|&o| o < part.len())
        {
            Some(o) => got[o] = Some(read_one(protocol, &part[o].1, r, server)),
            None => stray = Some(Error::Server(r.error_text())),
        }
    }
    got.into_iter()
        .zip(part)
        .map(|(g, (_, cmd))| match (g, &stray) {
            (Some(r), _) => r,
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Ok(cmd.quiet_default()),
        })
        .collect()
}

/// Writes a text chunk: reads as `gets` lines, other commands one by one.
/// Returns how many replies (lines or `END`-terminated retrievals) to await.
fn write_text(buf: &mut BytesMut, part: &[(usize, Cmd<'_>)]) -> u32 {
    let mut replies = 0;
    let gets: Vec<&[u8]> = part
        .iter()
        .filter(|(_, c)| matches!(c, Cmd::Get { touch: None, .. }))
        .map(|(_, c)| c.key())
        .collect();
    for line in gets.chunks(TEXT_GETS_KEYS) {
        buf.put_slice(b"gets");
        for k in line {
            buf.put_u8(b' ');
            buf.put_slice(k);
        }
        buf.put_slice(b"\r\n");
        replies += 1;
    }
    for (_, c) in part {
        if !matches!(c, Cmd::Get { touch: None, .. }) {
            c.text(buf);
            replies += 1;
        }
    }
    replies
}

/// Reads a text chunk's replies in the order [`write_text`] wrote them.
fn read_text(part: &[(usize, Cmd<'_>)], replies: &[Reply], server: &str) -> Vec<Result<Outcome>> {
    let mut found: std::collections::HashMap<&[u8], Value> = Default::default();
    let mut rest = replies;
    let is_get = |c: &Cmd<'_>| matches!(c, Cmd::Get { touch: None, .. });
    let lines = part
        .iter()
        .filter(|(_, c)| is_get(c))
        .count()
        .div_ceil(TEXT_GETS_KEYS);
    let mut get_err = None;
    for _ in 0..lines {
        let end = rest.iter().position(|r| r.status != Status::Value);
        let Some(end) = end else { break };
        match rest[end].status {
            Status::End => {}
            Status::Error => get_err = Some(Error::Server(rest[end].error_text())),
            _ => get_err = Some(Error::protocol(server, "a gets reply without END")),
        }
        for r in &rest[..end] {
            if let Some((k, v)) = text_value(r) {
                found.insert(k, v);
            }
        }
        rest = &rest[end + 1..];
    }
    let mut singles = rest.iter();
    part.iter()
        .map(|(_, c)| {
            if is_get(c) {
                if let Some(e) = &get_err {
                    return Err(e.clone());
                }
                return Ok(Outcome::Value(found.get(c.key()).cloned()));
            }
            match singles.next() {
                Some(r) => c
                    .read_text(std::slice::from_ref(r))
                    .map_err(|e| Error::read(server, e)),
                None => Err(Error::protocol(server, "fewer replies than commands")),
            }
        })
        .collect()
}
