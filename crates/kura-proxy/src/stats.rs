//! `stats`: memcached's names for what the proxy itself counts, then one
//! group of lines per pool and per backend (requests, errors, timeouts,
//! down transitions, journal length). The Prometheus page is built from
//! the same pairs.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ctx::Ctx;

/// The version the proxy reports (memcached's form, so clients that parse
/// it for features see a meta-capable server).
pub const VERSION: &str = "1.6.18";

/// Figures of the backends' own `stats` that the proxy's general group
/// gives summed over the backends that answered (clients read them for
/// capacity and item counts).
const SUMMED: &[&str] = &[
    "curr_items",
    "total_items",
    "bytes",
    "limit_maxbytes",
    "evictions",
    "expired_unfetched",
    "evicted_unfetched",
];

/// The `(name, value)` of each `STAT name value` line of a backend's
/// `stats` reply (the value is the rest of the line).
pub fn stat_lines(reply: &str) -> impl Iterator<Item = (&str, &str)> {
    reply
        .lines()
        .filter_map(|l| l.strip_prefix("STAT ")?.split_once(' '))
}

/// The sums of [`SUMMED`] over every serving backend.
async fn backend_sums(ctx: &Ctx) -> Vec<(String, String)> {
    let router = ctx.router();
    let asks = router
        .nodes
        .iter()
        .filter(|n| n.available())
        .map(|n| n.text_exchange(b"stats\r\n", b"END\r\n"));
    let mut sums = vec![0u64; SUMMED.len()];
    for reply in futures_util::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
    {
        for (name, rest) in stat_lines(&String::from_utf8_lossy(&reply)) {
            let v = rest.split(' ').next().unwrap_or("");
            if let (Some(i), Ok(v)) = (SUMMED.iter().position(|s| *s == name), v.parse::<u64>()) {
                sums[i] += v;
            }
        }
    }
    SUMMED
        .iter()
        .zip(sums)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// [`pairs`] with the backends' summed figures in the general group.
pub async fn pairs_with_backends(ctx: &Ctx, group: Option<&[u8]>) -> Option<Vec<(String, String)>> {
    let mut out = pairs(ctx, group)?;
    if group.is_none() {
        let at = out
            .iter()
            .position(|(k, _)| k.starts_with("pool:"))
            .unwrap_or(out.len());
        let sums = backend_sums(ctx).await;
        out.splice(at..at, sums);
    }
    Some(out)
}

/// The stats of a group (`None`: the general group, `proxy`: the pools
/// and backends only); `None` for a group the proxy does not have.
pub fn pairs(ctx: &Ctx, group: Option<&[u8]>) -> Option<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));
    let s = &ctx.stats;
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed).to_string();
    match group {
        None => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            put("pid", std::process::id().to_string());
            put("uptime", ctx.started.elapsed().as_secs().to_string());
            put("time", now.to_string());
            put("version", VERSION.to_string());
            put("threads", ctx.threads.to_string());
            put("curr_connections", get(&s.curr_connections));
            put("total_connections", get(&s.total_connections));
            put("cmd_get", get(&s.cmd_get));
            put("cmd_set", get(&s.cmd_set));
            put("cmd_flush", get(&s.cmd_flush));
            put("cmd_touch", get(&s.cmd_touch));
            put("get_hits", get(&s.get_hits));
            put("get_misses", get(&s.get_misses));
            if ctx.tls.is_some() {
                put("ssl_handshake_errors", get(&s.ssl_handshake_errors));
            }
        }
        Some(b"proxy") => {}
        Some(_) => return None,
    }
    let router = ctx.router();
    for p in &router.pools {
        let name = &p.name;
        let sum = |f: fn(&crate::router::Node) -> u64| p.nodes.iter().map(|n| f(n)).sum::<u64>();
        out.push((format!("pool:{name}:backends"), p.nodes.len().to_string()));
        out.push((
            format!("pool:{name}:requests"),
            sum(|n| n.stats.requests.load(Ordering::Relaxed)).to_string(),
        ));
        out.push((
            format!("pool:{name}:errors"),
            sum(|n| n.stats.errors.load(Ordering::Relaxed)).to_string(),
        ));
        out.push((
            format!("pool:{name}:timeouts"),
            sum(|n| n.stats.timeouts.load(Ordering::Relaxed)).to_string(),
        ));
        out.push((
            format!("pool:{name}:down"),
            sum(|n| u64::from(!n.available())).to_string(),
        ));
        for (k, _, v) in p.routing_counters() {
            out.push((format!("pool:{name}:{k}"), v.to_string()));
        }
    }
    for n in &router.nodes {
        let a = &n.addr;
        let (journal, overflowed) = n.journal_len();
        let rows = [
            ("requests", n.stats.requests.load(Ordering::Relaxed)),
            ("errors", n.stats.errors.load(Ordering::Relaxed)),
            ("timeouts", n.stats.timeouts.load(Ordering::Relaxed)),
            ("down_transitions", n.down_transitions()),
            ("down", u64::from(n.is_down())),
            ("serving", u64::from(n.available())),
            ("journal_keys", journal as u64),
            ("journal_overflowed", u64::from(overflowed)),
            ("journal_replayed", n.stats.replayed.load(Ordering::Relaxed)),
            ("gutter_keys", n.gutter_copies().len() as u64),
            ("behind", u64::from(n.is_behind())),
        ];
        for (k, v) in rows {
            out.push((format!("backend:{a}:{k}"), v.to_string()));
        }
    }
    Some(out)
}

/// The text reply of `stats [group]`.
pub async fn render(ctx: &Ctx, group: Option<&[u8]>) -> Vec<u8> {
    let Some(pairs) = pairs_with_backends(ctx, group).await else {
        return b"ERROR\r\n".to_vec();
    };
    let mut out = Vec::new();
    for (k, v) in pairs {
        kura_proto::reply::stat(&mut out, &k, v);
    }
    out.extend_from_slice(kura_proto::reply::END);
    out
}
