//! kura's figures under the names varnish_exporter (jonnenauha/prometheus_varnish_exporter,
//! 1.6) gives Varnish's counters, so that its Grafana dashboards and alerts work on kura: the
//! exporter names `MAIN.x` `varnish_main_x` (a counter for Varnish's counters, a gauge for its
//! gauges), folds `MAIN.s_sess` and `MAIN.sess_*` into `varnish_main_sessions_total` and
//! `varnish_main_sessions{type=...}`, and names `VBE.<vcl>.<backend>.happy` `varnish_backend_up`
//! with the labels `backend` and `server` (`unknown` for Varnish 6 and later). Only the
//! counters a kura figure means the same as are here; docs/http.md lists the others.

use std::fmt::Write;

use super::{Kind, Snapshot};

/// Every outcome: a client request (`MAIN.client_req`).
const ALL_REQUESTS: &[&str] = &["hit", "miss", "pass", "stale", "coalesced", "synth", "pipe"];

/// The exporter's name (with its labels), its kind, and the kura figures whose sum it is.
const NAMES: &[(&str, Kind, &[&str])] = &[
    ("varnish_main_client_req", Kind::Counter, ALL_REQUESTS),
    (
        "varnish_main_cache_hit",
        Kind::Counter,
        &["hit", "stale", "coalesced"],
    ),
    ("varnish_main_cache_miss", Kind::Counter, &["miss"]),
    (
        "varnish_main_cache_hitmiss",
        Kind::Counter,
        &["hit_for_miss"],
    ),
    ("varnish_main_s_pass", Kind::Counter, &["pass"]),
    ("varnish_main_s_pipe", Kind::Counter, &["pipe"]),
    ("varnish_main_s_synth", Kind::Counter, &["synth"]),
    (
        "varnish_main_client_req_400",
        Kind::Counter,
        &["bad_requests"],
    ),
    (
        "varnish_main_sessions_total",
        Kind::Counter,
        &["connections"],
    ),
    (
        "varnish_main_sessions{type=\"conn\"}",
        Kind::Counter,
        &["connections"],
    ),
    (
        "varnish_main_backend_req",
        Kind::Counter,
        &["backend_requests"],
    ),
    ("varnish_main_n_object", Kind::Gauge, &["objects"]),
    ("varnish_main_n_lru_nuked", Kind::Counter, &["evictions"]),
    ("varnish_main_bans", Kind::Gauge, &["bans"]),
    ("varnish_main_bans_added", Kind::Counter, &["bans_added"]),
    (
        "varnish_main_bans_obj_killed",
        Kind::Counter,
        &["bans_objects_banned_lookup"],
    ),
    (
        "varnish_main_bans_lurker_obj_killed",
        Kind::Counter,
        &["bans_objects_banned_lurker"],
    ),
    (
        "varnish_main_bans_lurker_tested",
        Kind::Counter,
        &["bans_lurker_checked"],
    ),
    ("varnish_main_n_purges", Kind::Counter, &["purges"]),
    ("varnish_main_threads", Kind::Gauge, &["threads"]),
    ("varnish_main_uptime", Kind::Counter, &["uptime_seconds"]),
    ("varnish_main_esi_req", Kind::Counter, &["esi_includes"]),
];

/// Appends the `varnish_*` lines of `snapshot`.
pub(super) fn names(snapshot: &Snapshot, out: &mut String) {
    let mut typed = "";
    for (name, kind, figures) in NAMES {
        let value: u64 = figures.iter().map(|f| snapshot.value(f)).sum();
        let family = name.split('{').next().unwrap_or(name);
        if family != typed {
            let kind = if *kind == Kind::Counter {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(out, "# TYPE {family} {kind}");
            typed = family;
        }
        let _ = writeln!(out, "{name} {value}");
    }
    out.push_str("# TYPE varnish_backend_up gauge\n");
    for (backend, healthy, _, _) in &snapshot.backends {
        let _ = writeln!(
            out,
            "varnish_backend_up{{backend=\"{backend}\",server=\"unknown\"}} {}",
            u8::from(*healthy)
        );
    }
}
