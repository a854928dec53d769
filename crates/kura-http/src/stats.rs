//! Counters of `kura http` and the two pages that show them: `/stats` (JSON) and `/metrics`
//! (Prometheus text format 0.0.4, names with the `kura_http_` prefix, as `kura server`'s own
//! additions carry `kura_`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::backend::Backend;
use crate::cache::Cache;
use crate::coalesce::Flights;

/// How a request was answered, for the counters and the access log (varnishncsa's
/// `%{Varnish:hitmiss}x` has hit and miss; kura says more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Served fresh from the cache.
    Hit,
    /// Fetched from the backend and stored (or stored copy revalidated).
    Miss,
    /// Sent to the backend and not stored (uncacheable, unsafe method, hit-for-miss).
    Pass,
    /// Served stale (grace, stale-while-revalidate, stale-if-error, sick backend).
    Stale,
    /// Waited for another request's fetch and was served from it.
    Coalesced,
    /// Answered by the proxy itself (bad request, backend failure, 504).
    Synth,
    /// Switched to another protocol and piped to the backend (WebSocket: `server/pipe.rs`).
    Pipe,
}

impl CacheOutcome {
    /// Every outcome, in the order of the counters.
    pub const ALL: [CacheOutcome; 7] = [
        CacheOutcome::Hit,
        CacheOutcome::Miss,
        CacheOutcome::Pass,
        CacheOutcome::Stale,
        CacheOutcome::Coalesced,
        CacheOutcome::Synth,
        CacheOutcome::Pipe,
    ];

    /// Its name in logs and pages.
    pub fn name(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Pass => "pass",
            CacheOutcome::Stale => "stale",
            CacheOutcome::Coalesced => "coalesced",
            CacheOutcome::Synth => "synth",
            CacheOutcome::Pipe => "pipe",
        }
    }
}

/// The proxy's counters.
#[derive(Debug, Default)]
pub struct Stats {
    outcomes: [AtomicU64; 7],
    /// Requests sent to the backend (fetches, revalidations, passes).
    pub backend_requests: AtomicU64,
    /// Revalidations the backend answered 304.
    pub revalidated: AtomicU64,
    /// Responses stored.
    pub stored: AtomicU64,
    /// Background refreshes started.
    pub background_refreshes: AtomicU64,
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Requests refused as malformed.
    pub bad_requests: AtomicU64,
    /// Backend responses whose `Surrogate-Control` asked for ESI, which kura does not process.
    pub esi_requested: AtomicU64,
    /// Upgrade requests piped to the backend (the backend answered 101).
    pub pipes: AtomicU64,
    /// Pipes open now.
    pub pipes_active: AtomicU64,
    /// Upgrade requests refused because `max_pipes` pipes were open (503).
    pub pipes_refused: AtomicU64,
    /// `listen_proxy` connections refused: no PROXY header, a broken one, or from an address
    /// not in `trusted_proxies`.
    pub proxy_protocol_refused: AtomicU64,
    /// Backend bodies not stored because they were not what their `Content-Encoding` said, or
    /// decoded past `max_decoded`.
    pub encoding_refused: AtomicU64,
}

impl Stats {
    /// Counts a request answered with `outcome`.
    pub fn count(&self, outcome: CacheOutcome) {
        self.outcomes[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered with `outcome` so far.
    pub fn outcome(&self, outcome: CacheOutcome) -> u64 {
        self.outcomes[outcome as usize].load(Ordering::Relaxed)
    }
}

/// Everything the pages show, read at one moment.
pub struct Snapshot {
    figures: Vec<Figure>,
    hit_ratio: f64,
    /// Per backend: name, healthy, errors, and its servers.
    backends: Vec<crate::backend::state::BackendState>,
}

/// One figure: its `/stats` name, its Prometheus name, its kind, its value.
type Figure = (&'static str, &'static str, Kind, u64);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
}

/// Reads every figure.
pub fn snapshot(
    stats: &Stats,
    cache: &Cache,
    backends: &[Arc<Backend>],
    flights: &Flights,
) -> Snapshot {
    use Kind::{Counter, Gauge};
    let store = cache.store().stats();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut figures = Vec::new();
    for outcome in CacheOutcome::ALL {
        figures.push((
            outcome.name(),
            "requests_total",
            Counter,
            stats.outcome(outcome),
        ));
    }
    let served = stats.outcome(CacheOutcome::Hit)
        + stats.outcome(CacheOutcome::Stale)
        + stats.outcome(CacheOutcome::Coalesced);
    let lookups = served + stats.outcome(CacheOutcome::Miss);
    let hit_ratio = if lookups == 0 {
        0.0
    } else {
        served as f64 / lookups as f64
    };
    let sum = |field: fn(&Backend) -> u64| -> u64 { backends.iter().map(|b| field(b)).sum() };
    let all_healthy = backends.iter().all(|b| b.is_healthy());
    figures.extend([
        (
            "backend_requests",
            "backend_requests_total",
            Counter,
            load(&stats.backend_requests),
        ),
        (
            "backend_errors",
            "backend_errors_total",
            Counter,
            sum(Backend::errors),
        ),
        (
            "backend_healthy",
            "backend_healthy",
            Gauge,
            u64::from(all_healthy),
        ),
        (
            "probes_ok",
            "backend_probes_ok_total",
            Counter,
            sum(|b| b.probes().0),
        ),
        (
            "probes_failed",
            "backend_probes_failed_total",
            Counter,
            sum(|b| b.probes().1),
        ),
        (
            "revalidated",
            "revalidated_total",
            Counter,
            load(&stats.revalidated),
        ),
        ("stored", "stored_total", Counter, load(&stats.stored)),
        (
            "background_refreshes",
            "background_refreshes_total",
            Counter,
            load(&stats.background_refreshes),
        ),
        (
            "connections",
            "connections_total",
            Counter,
            load(&stats.connections),
        ),
        (
            "bad_requests",
            "bad_requests_total",
            Counter,
            load(&stats.bad_requests),
        ),
        (
            "esi_requested",
            "esi_requested_total",
            Counter,
            load(&stats.esi_requested),
        ),
        ("pipes", "pipes_total", Counter, load(&stats.pipes)),
        (
            "pipes_active",
            "pipes_active",
            Gauge,
            load(&stats.pipes_active),
        ),
        (
            "pipes_refused",
            "pipes_refused_total",
            Counter,
            load(&stats.pipes_refused),
        ),
        (
            "proxy_protocol_refused",
            "proxy_protocol_refused_total",
            Counter,
            load(&stats.proxy_protocol_refused),
        ),
        (
            "encoding_refused",
            "encoding_refused_total",
            Counter,
            load(&stats.encoding_refused),
        ),
        ("objects", "objects", Gauge, store.curr_items),
        ("bytes", "bytes", Gauge, store.bytes),
        ("limit_bytes", "limit_bytes", Gauge, store.limit_maxbytes),
        ("evictions", "evictions_total", Counter, store.evictions),
        (
            "in_flight_bytes",
            "in_flight_bytes",
            Gauge,
            flights.in_flight_bytes() as u64,
        ),
    ]);
    figures.extend(ban_figures(cache));
    let backends = backends
        .iter()
        .map(|b| {
            (
                b.name.clone(),
                b.is_healthy(),
                b.errors(),
                b.servers.iter().map(|s| s.state()).collect(),
            )
        })
        .collect();
    Snapshot {
        figures,
        hit_ratio,
        backends,
    }
}

/// The ban list's figures (Varnish's `bans_*` counters).
fn ban_figures(cache: &Cache) -> [Figure; 14] {
    use Kind::{Counter, Gauge};
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let bans = cache.bans();
    let c = &bans.counters;
    [
        ("bans", "bans", Gauge, bans.len() as u64),
        ("bans_added", "bans_added_total", Counter, load(&c.added)),
        (
            "bans_completed_lookup",
            "bans_completed_lookup_total",
            Counter,
            load(&c.completed_lookup),
        ),
        (
            "bans_completed_lurker",
            "bans_completed_lurker_total",
            Counter,
            load(&c.completed_lurker),
        ),
        (
            "bans_completed_superseded",
            "bans_completed_superseded_total",
            Counter,
            load(&c.completed_superseded),
        ),
        (
            "bans_objects_banned_lookup",
            "bans_objects_banned_lookup_total",
            Counter,
            load(&c.banned_lookup),
        ),
        (
            "bans_objects_banned_lurker",
            "bans_objects_banned_lurker_total",
            Counter,
            load(&c.banned_lurker),
        ),
        (
            "bans_objects_softened",
            "bans_objects_softened_total",
            Counter,
            load(&c.softened),
        ),
        (
            "bans_lookup_tests",
            "bans_lookup_tests_total",
            Counter,
            load(&c.lookup_tests),
        ),
        (
            "bans_lurker_checked",
            "bans_lurker_checked_total",
            Counter,
            load(&c.lurker_checked),
        ),
        ("purges", "purges_total", Counter, load(&c.purges)),
        (
            "soft_purges",
            "soft_purges_total",
            Counter,
            load(&c.soft_purges),
        ),
        (
            "ban_requests",
            "ban_requests_total",
            Counter,
            load(&c.ban_requests),
        ),
        (
            "purges_refused",
            "purges_refused_total",
            Counter,
            load(&c.purges_refused),
        ),
    ]
}

impl Snapshot {
    /// The `/stats` page: one JSON object, outcomes under `requests`.
    pub fn json(&self) -> String {
        let mut requests = serde_json::Map::new();
        let mut top = serde_json::Map::new();
        for (name, metric, _, value) in &self.figures {
            if *metric == "requests_total" {
                requests.insert((*name).to_owned(), (*value).into());
            } else {
                top.insert((*name).to_owned(), (*value).into());
            }
        }
        top.insert("requests".into(), requests.into());
        top.insert("hit_ratio".into(), self.hit_ratio.into());
        let mut backends = serde_json::Map::new();
        for (name, healthy, errors, servers) in &self.backends {
            let servers: serde_json::Map<_, _> =
                servers.iter().map(|s| (s.name.clone(), s.json())).collect();
            backends.insert(
                name.clone(),
                serde_json::json!({ "healthy": u8::from(*healthy), "errors": errors, "servers": servers }),
            );
        }
        top.insert("backends".into(), backends.into());
        serde_json::Value::Object(top).to_string()
    }

    /// The `/metrics` page.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut described = false;
        for (name, metric, kind, value) in &self.figures {
            let kind_name = if *kind == Kind::Counter {
                "counter"
            } else {
                "gauge"
            };
            if *metric == "requests_total" {
                if !described {
                    out.push_str(
                        "# HELP kura_http_requests_total Client requests by cache outcome.\n",
                    );
                    out.push_str("# TYPE kura_http_requests_total counter\n");
                    described = true;
                }
                let _ = writeln!(
                    out,
                    "kura_http_requests_total{{outcome=\"{name}\"}} {value}"
                );
                continue;
            }
            let _ = writeln!(out, "# TYPE kura_http_{metric} {kind_name}");
            let _ = writeln!(out, "kura_http_{metric} {value}");
        }
        out.push_str(
            "# HELP kura_http_hit_ratio Share of cacheable lookups served from the cache.\n",
        );
        out.push_str("# TYPE kura_http_hit_ratio gauge\n");
        let _ = writeln!(out, "kura_http_hit_ratio {}", self.hit_ratio);
        out.push_str("# HELP kura_http_backend_up Whether each backend is healthy.\n");
        out.push_str("# TYPE kura_http_backend_up gauge\n");
        for (name, healthy, _, _) in &self.backends {
            let _ = writeln!(
                out,
                "kura_http_backend_up{{backend=\"{name}\"}} {}",
                u8::from(*healthy)
            );
        }
        crate::backend::state::ServerState::prometheus(&mut out, &self.backends);
        out
    }
}
