//! The routing settings beyond placement (docs/proxy.md, "Routes and
//! replicated pools"): how a replicated pool spreads its reads (`read`),
//! whether a miss tries the next replica (`miss_failover`), a pool's rate
//! limit (`rate_limit`, `rate_burst`), and a route's pool per operation
//! (`ops`, mcrouter's OperationSelectorRoute).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::{err, ConfigError, Limits, PoolFile, ProxyArgs, RouteFile, RouteSpec, WriteMode};

/// Which replica of a replicated pool a read goes to first (the others
/// follow in the pool's order when it does not serve or fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadMode {
    /// The first replica that serves.
    #[default]
    First,
    /// Each read the next replica that serves, in turn.
    RoundRobin,
    /// The replica that serves with the lowest recent time to answer.
    Nearest,
}

impl ReadMode {
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::First => "first",
            ReadMode::RoundRobin => "round-robin",
            ReadMode::Nearest => "nearest",
        }
    }
}

/// A request's operation, as mcrouter's OperationSelectorRoute names it
/// (the meta commands count as their text equivalents).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Get,
    Gets,
    Gat,
    Gats,
    Touch,
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
    Delete,
    Incr,
    Decr,
}

impl Op {
    pub const ALL: [Op; 14] = [
        Op::Get,
        Op::Gets,
        Op::Gat,
        Op::Gats,
        Op::Touch,
        Op::Set,
        Op::Add,
        Op::Replace,
        Op::Append,
        Op::Prepend,
        Op::Cas,
        Op::Delete,
        Op::Incr,
        Op::Decr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Gets => "gets",
            Op::Gat => "gat",
            Op::Gats => "gats",
            Op::Touch => "touch",
            Op::Set => "set",
            Op::Add => "add",
            Op::Replace => "replace",
            Op::Append => "append",
            Op::Prepend => "prepend",
            Op::Cas => "cas",
            Op::Delete => "delete",
            Op::Incr => "incr",
            Op::Decr => "decr",
        }
    }

    /// The operation named `s` (`mg` is `get`).
    pub fn parse(s: &str) -> Option<Op> {
        if s == "mg" {
            return Some(Op::Get);
        }
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Whether it changes a value (a write goes to every replica and is
    /// journaled where it fails); reads and touches go to one replica.
    pub fn is_write(self) -> bool {
        !matches!(self, Op::Get | Op::Gets | Op::Gat | Op::Gats | Op::Touch)
    }

    /// Whether it returns values (a miss of it may try the next replica).
    pub fn is_retrieval(self) -> bool {
        matches!(self, Op::Get | Op::Gets | Op::Gat | Op::Gats)
    }

    /// The storage command of `mode` (`cas` with a CAS to compare; kura's
    /// rotate counts as a set).
    pub fn store(mode: kura_proto::StoreMode, cas: bool) -> Op {
        use kura_proto::StoreMode as M;
        match mode {
            _ if cas => Op::Cas,
            M::Add => Op::Add,
            M::Replace => Op::Replace,
            M::Append => Op::Append,
            M::Prepend => Op::Prepend,
            M::Set | M::Rotate { .. } => Op::Set,
        }
    }

    /// The retrieval of a text `get`/`gets`/`gat`/`gats`.
    pub fn retrieval(cas: bool, touch: bool) -> Op {
        match (cas, touch) {
            (false, false) => Op::Get,
            (true, false) => Op::Gets,
            (false, true) => Op::Gat,
            (true, true) => Op::Gats,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pool's rate limit: `rate` requests a second on average, `burst` at
/// once after a quiet while.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub rate: f64,
    pub burst: f64,
}

impl RouteSpec {
    /// The pool a request `op` goes to.
    pub fn pool(&self, op: Op) -> usize {
        if !self.ops.is_empty() {
            if let Some(&(_, p)) = self.ops.iter().find(|(o, _)| *o == op) {
                return p;
            }
        }
        if op.is_write() {
            self.write
        } else {
            self.read
        }
    }
}

/// The limits with mcrouter's `--max-client-outstanding-reqs` over the
/// file's `client_max_requests` (0: no bound on the count).
pub fn client_limits(args: &ProxyArgs, file: Limits) -> Limits {
    match args.max_client_outstanding_reqs {
        Some(n) => Limits {
            client_max_requests: if n == 0 { usize::MAX } else { n },
            ..file
        },
        None => file,
    }
}

/// Checks pool `name`'s routing settings; its rate limit, if any.
///
/// # Errors
/// As [`PoolRouting::check`].
pub fn check_pool(name: &str, p: &PoolFile) -> Result<Option<RateLimit>, ConfigError> {
    PoolRouting {
        name,
        replicated: !p.replicas.is_empty(),
        write: p.write,
        read: p.read,
        miss_failover: p.miss_failover,
        rate_limit: p.rate_limit,
        rate_burst: p.rate_burst,
    }
    .check()
}

/// A pool's routing settings as read from its `[pools.NAME]` table.
pub struct PoolRouting<'a> {
    pub name: &'a str,
    pub replicated: bool,
    pub write: WriteMode,
    pub read: ReadMode,
    pub miss_failover: bool,
    pub rate_limit: Option<f64>,
    pub rate_burst: Option<f64>,
}

impl PoolRouting<'_> {
    /// Checks the settings and returns the rate limit, if any.
    ///
    /// # Errors
    /// A setting that does not apply to the pool, or a bad number; the
    /// message names the pool and the key.
    pub fn check(&self) -> Result<Option<RateLimit>, ConfigError> {
        let name = self.name;
        if !self.replicated && self.read != ReadMode::First {
            return Err(err(format!(
                "pool {name}: read = {:?} spreads the reads of a replicated pool (replicas = [...]); this pool has servers",
                self.read.name()
            )));
        }
        if !self.replicated && self.miss_failover {
            return Err(err(format!(
                "pool {name}: miss_failover tries the next replica of a replicated pool (replicas = [...]); this pool has servers"
            )));
        }
        // A write the client was told succeeded may still be on its way to
        // the replicas not waited for: reads must not reach them first.
        let spread = self.read != ReadMode::First || self.miss_failover;
        if spread && !matches!(self.write, WriteMode::AllSync | WriteMode::Majority) {
            return Err(err(format!(
                "pool {name}: read = {:?}{} needs write = \"all-sync\" or \"majority\": with {:?} a read could reach a replica that has not yet applied a write the client was told succeeded",
                self.read.name(),
                if self.miss_failover { " with miss_failover" } else { "" },
                write_name(self.write),
            )));
        }
        let limit = match (self.rate_limit, self.rate_burst) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(err(format!("pool {name}: rate_burst without rate_limit")))
            }
            (Some(rate), burst) => {
                if !(rate.is_finite() && rate > 0.0) {
                    return Err(err(format!(
                        "pool {name}: rate_limit = {rate}: requests a second, above 0"
                    )));
                }
                let burst = burst.unwrap_or(rate.max(1.0));
                if !(burst.is_finite() && burst >= 1.0) {
                    return Err(err(format!(
                        "pool {name}: rate_burst = {burst}: requests, at least 1"
                    )));
                }
                Some(RateLimit { rate, burst })
            }
        };
        Ok(limit)
    }
}

pub fn write_name(w: WriteMode) -> &'static str {
    match w {
        WriteMode::AllSync => "all-sync",
        WriteMode::AllAsync => "all-async",
        WriteMode::Majority => "majority",
        WriteMode::FireAndForget => "fire-and-forget",
    }
}

/// A route's shadow pool and the share of requests mirrored to it.
///
/// # Errors
/// A share outside 0..1, a share without a shadow, an unknown pool.
pub fn shadow(
    r: &RouteFile,
    index: impl Fn(&str) -> Result<usize, ConfigError>,
) -> Result<Option<(usize, f64)>, ConfigError> {
    match (&r.shadow, r.shadow_rate) {
        (Some(s), rate) => {
            let rate = rate.unwrap_or(1.0);
            if !(0.0..=1.0).contains(&rate) {
                return Err(err(format!(
                    "route {:?}: shadow_rate must be within 0..1",
                    r.prefix
                )));
            }
            Ok(Some((index(s)?, rate)))
        }
        (None, Some(_)) => Err(err(format!(
            "route {:?}: shadow_rate without shadow",
            r.prefix
        ))),
        (None, None) => Ok(None),
    }
}

/// A route's `ops` table: operation name to pool index, checked.
///
/// # Errors
/// An unknown operation or pool, named with the route's prefix.
pub fn ops(
    prefix: &str,
    table: &BTreeMap<String, String>,
    index: impl Fn(&str) -> Result<usize, ConfigError>,
) -> Result<Vec<(Op, usize)>, ConfigError> {
    let mut out = Vec::new();
    for (op, pool) in table {
        let Some(o) = Op::parse(op) else {
            let known: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
            return Err(err(format!(
                "route {prefix:?}: ops.{op}: no such operation (one of {})",
                known.join(", ")
            )));
        };
        let i = index(pool).map_err(|e| err(format!("route {prefix:?}: ops.{op}: {e}")))?;
        out.push((o, i));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(replicated: bool, write: WriteMode, read: ReadMode) -> PoolRouting<'static> {
        PoolRouting {
            name: "p",
            replicated,
            write,
            read,
            miss_failover: false,
            rate_limit: None,
            rate_burst: None,
        }
    }

    #[test]
    fn reads_spread_only_over_replicas_that_were_waited_for() {
        let ok = pool(true, WriteMode::AllSync, ReadMode::RoundRobin);
        assert!(ok.check().is_ok());
        assert!(pool(true, WriteMode::Majority, ReadMode::Nearest)
            .check()
            .is_ok());
        let e = pool(true, WriteMode::AllAsync, ReadMode::RoundRobin)
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("pool p: read = \"round-robin\""), "{e}");
        let e = pool(false, WriteMode::AllSync, ReadMode::Nearest)
            .check()
            .unwrap_err()
            .to_string();
        assert!(e.contains("replicated pool"), "{e}");
        let mut m = pool(true, WriteMode::FireAndForget, ReadMode::First);
        m.miss_failover = true;
        assert!(m.check().is_err());
    }

    #[test]
    fn rate_limits_need_a_positive_rate_and_a_burst_of_one_or_more() {
        let mut p = pool(false, WriteMode::AllSync, ReadMode::First);
        p.rate_limit = Some(100.0);
        let l = p.check().unwrap().unwrap();
        assert_eq!((l.rate, l.burst), (100.0, 100.0));
        p.rate_burst = Some(5.0);
        assert_eq!(p.check().unwrap().unwrap().burst, 5.0);
        p.rate_burst = Some(0.5);
        assert!(p.check().unwrap_err().to_string().contains("rate_burst"));
        p.rate_limit = Some(0.0);
        assert!(p.check().unwrap_err().to_string().contains("rate_limit"));
        p.rate_limit = None;
        assert!(p.check().is_err());
    }

    #[test]
    fn mcrouters_outstanding_limit_is_client_max_requests() {
        let file = Limits::default();
        let with = |n| ProxyArgs {
            max_client_outstanding_reqs: n,
            ..Default::default()
        };
        assert_eq!(client_limits(&with(None), file), file);
        let l = client_limits(&with(Some(8)), file);
        assert_eq!(
            (l.client_max_requests, l.client_max_bytes),
            (8, file.client_max_bytes)
        );
        assert_eq!(
            client_limits(&with(Some(0)), file).client_max_requests,
            usize::MAX
        );
    }

    #[test]
    fn operations_parse_by_mcrouters_names() {
        for o in Op::ALL {
            assert_eq!(Op::parse(o.name()), Some(o));
        }
        assert_eq!(Op::parse("mg"), Some(Op::Get));
        assert!(Op::Set.is_write() && !Op::Touch.is_write());
        assert!(Op::Gats.is_retrieval() && !Op::Touch.is_retrieval());
        let table: BTreeMap<String, String> = [("get".into(), "a".into())].into();
        let index = |p: &str| if p == "a" { Ok(3) } else { Err(err("no pool")) };
        assert_eq!(ops("x", &table, index).unwrap(), vec![(Op::Get, 3)]);
        let bad: BTreeMap<String, String> = [("fetch".into(), "a".into())].into();
        let e = ops("x", &bad, index).unwrap_err().to_string();
        assert!(e.contains("ops.fetch: no such operation"), "{e}");
        let bad: BTreeMap<String, String> = [("set".into(), "b".into())].into();
        assert!(ops("x", &bad, index).is_err());
    }
}
