//! mcrouter's admin requests: a `get` of a key that starts with
//! `__mcrouter__.` is answered by the proxy and sent to no backend, as
//! mcrouter does. The value says:
//!
//! - `__mcrouter__.version`: `kura <version>`;
//! - `__mcrouter__.config_file`, `__mcrouter__.config_md5_digest`: the
//!   configuration's file and the MD5 of what it held when it was read;
//! - `__mcrouter__.route(OP,KEY)`: the backends a request OP (`get`,
//!   `set`, `delete`...; mcrouter's names, as a route's `ops` takes them)
//!   of KEY goes to now, one `host:port` a line (a replicated write: every
//!   replica's; a read: the one that serves, the gutter's while the key's
//!   server does not; under `read = "round-robin"` every replica that
//!   serves, in the pool's order, and under `"nearest"` the nearest);
//! - `__mcrouter__.route_handles(OP,KEY)`: the same, each line `pool
//!   NAME host:port`.
//!
//! Anything else after the prefix answers `SERVER_ERROR`.

use std::sync::Arc;

use crate::config::{Op, ReadMode};
use crate::ctx::Ctx;
use crate::router::{Node, Router};

/// The prefix of the keys answered here.
pub const PREFIX: &[u8] = b"__mcrouter__.";

/// The whole text reply to `get <key>` (`key` starts with [`PREFIX`]).
pub fn answer(ctx: &Ctx, key: &[u8]) -> Vec<u8> {
    let name = String::from_utf8_lossy(&key[PREFIX.len()..]).into_owned();
    let value = match name.as_str() {
        "version" => Ok(format!("kura {}", env!("CARGO_PKG_VERSION"))),
        "config_file" => Ok(ctx.file().0),
        "config_md5_digest" => Ok(ctx.file().1),
        _ => route(&ctx.router(), &name),
    };
    match value {
        Ok(v) => {
            let mut out =
                format!("VALUE {} 0 {}\r\n", String::from_utf8_lossy(key), v.len()).into_bytes();
            out.extend_from_slice(v.as_bytes());
            out.extend_from_slice(b"\r\nEND\r\n");
            out
        }
        Err(why) => format!("SERVER_ERROR {why}\r\n").into_bytes(),
    }
}

/// `route(OP,KEY)` or `route_handles(OP,KEY)`.
fn route(router: &Router, name: &str) -> Result<String, String> {
    let unknown = || format!("unknown admin request {name:?}");
    let (handles, args) = if let Some(a) = name.strip_prefix("route_handles(") {
        (true, a)
    } else if let Some(a) = name.strip_prefix("route(") {
        (false, a)
    } else {
        return Err(unknown());
    };
    let (op, key) = args
        .strip_suffix(')')
        .and_then(|a| a.split_once(','))
        .ok_or_else(unknown)?;
    let op = Op::parse(op).ok_or_else(|| format!("unknown operation {op:?}"))?;
    let lines: Vec<String> = destinations(router, op, key.as_bytes())
        .into_iter()
        .map(|(pool, n)| match handles {
            true => format!("pool {pool} {}", n.addr),
            false => n.addr.clone(),
        })
        .collect();
    Ok(lines.join("\r\n"))
}

/// Where a request `op` of `key` goes now: (pool name, backend).
fn destinations(router: &Router, op: Op, key: &[u8]) -> Vec<(String, Arc<Node>)> {
    let write = op.is_write();
    let (_, pool) = router.pool_for(key, op);
    let p = &router.pools[pool];
    if !write && p.read == ReadMode::Nearest {
        let n = router.node_for(key, op);
        let name = p
            .replicas
            .iter()
            .find(|&&r| router.ring_node(r, key).is_some_and(|x| Arc::ptr_eq(x, &n)));
        let name = name.map_or(p.name.clone(), |&r| router.pools[r].name.clone());
        return vec![(name, n)];
    }
    // Round-robin reads go to each replica that serves in turn.
    let every = write || p.read == ReadMode::RoundRobin;
    let own = p.replicas.is_empty().then_some(pool);
    let replicas: Vec<usize> = own.into_iter().chain(p.replicas.iter().copied()).collect();
    let mut out = Vec::new();
    for r in replicas {
        let Some(n) = router.ring_node(r, key) else {
            continue;
        };
        // A ring pool's gutter takes the key while its server does not serve.
        let gutter = p
            .gutter
            .filter(|_| !n.available())
            .and_then(|(g, _)| Some((g, router.ring_node(g, key)?)));
        match gutter {
            Some((g, gn)) => out.push((router.pools[g].name.clone(), gn.clone())),
            None => out.push((router.pools[r].name.clone(), n.clone())),
        }
        // A read goes to the first replica that serves.
        if !every && out.last().is_some_and(|(_, n)| n.available()) {
            break;
        }
    }
    if !write && out.iter().any(|(_, n)| n.available()) {
        out.retain(|(_, n)| n.available());
    }
    out
}
