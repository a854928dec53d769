//! Counters of `kura http` and the two pages that show them: `/stats` (JSON) and `/metrics`
//! (Prometheus text format 0.0.4, names with the `kura_http_` prefix, as `kura server`'s own
//! additions carry `kura_`; latency histograms, `histogram.rs`; and the figures that mean what
//! varnish_exporter's `varnish_main_*` names mean, under those names, `varnish.rs`).

mod disk;
mod histogram;
mod varnish;

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::backend::Backend;
use crate::cache::Cache;
use crate::coalesce::Flights;
pub use histogram::Histogram;

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
    /// Time to the response head, by outcome.
    durations: [Histogram; 7],
    /// Time from a backend request to its response head (fetches, revalidations, passes).
    pub first_byte: Histogram,
    /// Requests sent to the backend (fetches, revalidations, passes).
    pub backend_requests: AtomicU64,
    /// Lookups that found a hit-for-miss marker (Varnish's `cache_hitmiss`).
    pub hit_for_miss: AtomicU64,
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
    /// Backend responses whose `Surrogate-Control` asked for ESI.
    pub esi_requested: AtomicU64,
    /// Responses delivered with ESI processing (`crate::esi`).
    pub esi_pages: AtomicU64,
    /// ESI fragments requested.
    pub esi_includes: AtomicU64,
    /// ESI fragments that failed (a status other than 200, a failed fetch, a src refused).
    pub esi_errors: AtomicU64,
    /// ESI includes skipped: past `max_depth` or `max_includes`.
    pub esi_skipped: AtomicU64,
    /// Upgrade requests piped to the backend (the backend answered 101).
    pub pipes: AtomicU64,
    /// Pipes open now.
    pub pipes_active: AtomicU64,
    /// Upgrade requests refused because `max_pipes` pipes were open (503).
    pub pipes_refused: AtomicU64,
    /// Pipes closed because nothing was received either way for `pipe_idle_timeout`.
    pub pipes_idle_closed: AtomicU64,
    /// `listen_proxy` connections refused: no PROXY header, a broken one, or from an address
    /// not in `trusted_proxies`.
    pub proxy_protocol_refused: AtomicU64,
    /// Backend bodies not stored because they were not what their `Content-Encoding` said, or
    /// decoded past `max_decoded`.
    pub encoding_refused: AtomicU64,
    /// Requests refused with 508 as loops: their `Via` named this instance, or had more
    /// than `max_via_hops` entries (`server/loops.rs`).
    pub loops: AtomicU64,
    /// Worker threads (set at start).
    pub threads: AtomicU64,
    started: Started,
}

/// When the counters began (`uptime`).
#[derive(Debug)]
struct Started(Instant);

impl Default for Started {
    fn default() -> Self {
        Started(Instant::now())
    }
}

impl Stats {
    /// Counts a request answered with `outcome`, whose response head was ready after
    /// `elapsed`.
    pub fn count(&self, outcome: CacheOutcome, elapsed: std::time::Duration) {
        self.outcomes[outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.durations[outcome as usize].record(elapsed);
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
    histograms: String,
}

/// One figure: its `/stats` name, its kind, its value. Its Prometheus name is
/// `kura_http_` and the name, with `_total` for a counter (see [`metric`]).
type Figure = (&'static str, Kind, u64);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
}

/// The Prometheus name of figure `name` of `kind`, after `kura_http_`.
fn metric(name: &str, kind: Kind) -> String {
    let name = match name {
        "probes_ok" | "probes_failed" => format!("backend_{name}"),
        _ => name.to_owned(),
    };
    match kind {
        Kind::Counter => name + "_total",
        Kind::Gauge => name,
    }
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
    let bans = cache.bans();
    let b = &bans.counters;
    let counters: [(&'static str, &AtomicU64); 31] = [
        ("backend_requests", &stats.backend_requests),
        ("hit_for_miss", &stats.hit_for_miss),
        ("revalidated", &stats.revalidated),
        ("stored", &stats.stored),
        ("background_refreshes", &stats.background_refreshes),
        ("connections", &stats.connections),
        ("bad_requests", &stats.bad_requests),
        ("esi_requested", &stats.esi_requested),
        ("esi_pages", &stats.esi_pages),
        ("esi_includes", &stats.esi_includes),
        ("esi_errors", &stats.esi_errors),
        ("esi_skipped", &stats.esi_skipped),
        ("pipes", &stats.pipes),
        ("pipes_refused", &stats.pipes_refused),
        ("pipes_idle_closed", &stats.pipes_idle_closed),
        ("proxy_protocol_refused", &stats.proxy_protocol_refused),
        ("encoding_refused", &stats.encoding_refused),
        ("loops", &stats.loops),
        ("purges", &b.purges),
        ("soft_purges", &b.soft_purges),
        ("ban_requests", &b.ban_requests),
        ("purges_refused", &b.purges_refused),
        ("bans_added", &b.added),
        ("bans_completed_lookup", &b.completed_lookup),
        ("bans_completed_lurker", &b.completed_lurker),
        ("bans_completed_superseded", &b.completed_superseded),
        ("bans_objects_banned_lookup", &b.banned_lookup),
        ("bans_objects_banned_lurker", &b.banned_lurker),
        ("bans_objects_softened", &b.softened),
        ("bans_lookup_tests", &b.lookup_tests),
        ("bans_lurker_checked", &b.lurker_checked),
    ];
    let mut figures: Vec<Figure> = CacheOutcome::ALL
        .iter()
        .map(|&o| (o.name(), Kind::Counter, stats.outcome(o)))
        .collect();
    figures.extend(counters.iter().map(|&(name, a)| (name, Counter, load(a))));
    figures.extend([
        ("backend_errors", Counter, sum(Backend::errors)),
        ("backend_healthy", Gauge, u64::from(all_healthy)),
        ("probes_ok", Counter, sum(|b| b.probes().0)),
        ("probes_failed", Counter, sum(|b| b.probes().1)),
        ("pipes_active", Gauge, load(&stats.pipes_active)),
        ("bans", Gauge, bans.len() as u64),
        ("objects", Gauge, store.curr_items),
        ("bytes", Gauge, store.bytes),
        ("limit_bytes", Gauge, store.limit_maxbytes),
        ("evictions", Counter, store.evictions),
        ("in_flight_bytes", Gauge, flights.in_flight_bytes() as u64),
        ("threads", Gauge, load(&stats.threads)),
        (
            "uptime_seconds",
            Counter,
            stats.started.0.elapsed().as_secs(),
        ),
    ]);
    figures.extend(disk::figures(cache));
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
    let mut histograms = String::new();
    histogram::durations(&stats.durations, &stats.first_byte, &mut histograms);
    Snapshot {
        figures,
        hit_ratio,
        backends,
        histograms,
    }
}

impl Snapshot {
    /// A figure's value by its `/stats` name (0 when there is none).
    fn value(&self, name: &str) -> u64 {
        self.figures
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(0, |f| f.2)
    }

    /// The `/stats` page: one JSON object, outcomes under `requests`.
    pub fn json(&self) -> String {
        let mut requests = serde_json::Map::new();
        let mut top = serde_json::Map::new();
        for (i, (name, _, value)) in self.figures.iter().enumerate() {
            if i < CacheOutcome::ALL.len() {
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
        out.push_str("# HELP kura_http_requests_total Client requests by cache outcome.\n");
        out.push_str("# TYPE kura_http_requests_total counter\n");
        let (outcomes, rest) = self.figures.split_at(CacheOutcome::ALL.len());
        for (name, _, value) in outcomes {
            let _ = writeln!(
                out,
                "kura_http_requests_total{{outcome=\"{name}\"}} {value}"
            );
        }
        for (name, kind, value) in rest {
            let metric = metric(name, *kind);
            let kind_name = if *kind == Kind::Counter {
                "counter"
            } else {
                "gauge"
            };
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
        out.push_str(&self.histograms);
        varnish::names(self, &mut out);
        out
    }
}
