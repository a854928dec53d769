//! The metrics page in the Prometheus text format (version 0.0.4), built
//! from the same snapshot `stats` answers (`exec::stats_snapshot`). The
//! figures memcached_exporter exports keep its names (`memcached_up`,
//! `memcached_commands_total{command,status}`, `memcached_current_items`,
//! ...); every other numeric `stats` figure is exported as `kura_<name>`
//! (untyped), so a figure added to `stats` appears here with no change;
//! kura's own additions (latency histograms, the budget for values being
//! received) have the `kura_` prefix too.

use std::collections::HashMap;
use std::fmt::Write;

use crate::exec::stats_snapshot;
use crate::latency::{Family, HistogramTotals, BOUNDS_US};
use crate::shared::Shared;

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// `stats` figures memcached_exporter exports, under its names.
const EXPORTED: &[(&str, &str, Kind, &str)] = &[
    (
        "uptime",
        "memcached_uptime_seconds",
        Kind::Counter,
        "Number of seconds since the server started.",
    ),
    (
        "time",
        "memcached_time_seconds",
        Kind::Gauge,
        "Current UNIX time according to the server.",
    ),
    (
        "rusage_user",
        "memcached_process_user_cpu_seconds_total",
        Kind::Counter,
        "Accumulated user time for this process.",
    ),
    (
        "rusage_system",
        "memcached_process_system_cpu_seconds_total",
        Kind::Counter,
        "Accumulated system time for this process.",
    ),
    (
        "bytes_read",
        "memcached_read_bytes_total",
        Kind::Counter,
        "Total number of bytes read by this server from network.",
    ),
    (
        "bytes_written",
        "memcached_written_bytes_total",
        Kind::Counter,
        "Total number of bytes sent by this server to network.",
    ),
    (
        "curr_connections",
        "memcached_current_connections",
        Kind::Gauge,
        "Current number of open connections.",
    ),
    (
        "max_connections",
        "memcached_max_connections",
        Kind::Gauge,
        "Maximum number of clients allowed.",
    ),
    (
        "total_connections",
        "memcached_connections_total",
        Kind::Counter,
        "Total number of connections opened since the server started running.",
    ),
    (
        "rejected_connections",
        "memcached_connections_rejected_total",
        Kind::Counter,
        "Total number of connections rejected due to hitting the -c limit.",
    ),
    (
        "conn_yields",
        "memcached_connections_yielded_total",
        Kind::Counter,
        "Total number of connections yielded running due to hitting the -R limit.",
    ),
    (
        "listen_disabled_num",
        "memcached_connections_listener_disabled_total",
        Kind::Counter,
        "Number of times that the server has hit its connections limit and disabled its listener.",
    ),
    (
        "accepting_conns",
        "memcached_accepting_connections",
        Kind::Gauge,
        "The server is currently accepting new connections.",
    ),
    (
        "bytes",
        "memcached_current_bytes",
        Kind::Gauge,
        "Current number of bytes used to store items.",
    ),
    (
        "limit_maxbytes",
        "memcached_limit_bytes",
        Kind::Gauge,
        "Number of bytes this server is allowed to use for storage.",
    ),
    (
        "curr_items",
        "memcached_current_items",
        Kind::Gauge,
        "Current number of items stored by this instance.",
    ),
    (
        "total_items",
        "memcached_items_total",
        Kind::Counter,
        "Total number of items stored during the life of this instance.",
    ),
    (
        "evictions",
        "memcached_items_evicted_total",
        Kind::Counter,
        "Total number of valid items removed from cache to free memory for new items.",
    ),
    (
        "reclaimed",
        "memcached_items_reclaimed_total",
        Kind::Counter,
        "Total number of times an entry was stored using memory from an expired entry.",
    ),
    (
        "store_too_large",
        "memcached_item_too_large_total",
        Kind::Counter,
        "The number of times an item exceeded the max-item-size when being stored.",
    ),
    (
        "store_no_memory",
        "memcached_item_no_memory_total",
        Kind::Counter,
        "The number of times an item could not be stored due to no more memory.",
    ),
    (
        "crawler_reclaimed",
        "memcached_lru_crawler_reclaimed_total",
        Kind::Counter,
        "Total items freed by the background expiry.",
    ),
];

/// Hit and miss counters of `memcached_commands_total`, as the exporter
/// labels them.
const COMMANDS: &[&str] = &["get", "delete", "incr", "decr", "cas", "touch"];

/// `stats` figures not exported as `kura_<name>`: meaningless as numbers
/// to graph.
const NOT_KURA: &[&str] = &["version", "pid", "pointer_size"];

/// A name the text format accepts: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn metric_name(name: &str) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| match c {
            'a'..='z' | 'A'..='Z' | '_' | ':' => c,
            '0'..='9' if i > 0 => c,
            _ => '_',
        })
        .collect()
}

/// A label value with `\`, `"` and newlines escaped.
pub(super) fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The whole metrics page.
pub fn render(shared: &Shared) -> String {
    let general = stats_snapshot(shared, None);
    let figures: HashMap<&str, &str> = general
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let num = |name: &str| figures.get(name).and_then(|v| v.parse::<f64>().ok());
    let mut out = String::with_capacity(16 * 1024);

    family(
        &mut out,
        "memcached_up",
        "gauge",
        "Could the memcached server be reached.",
    );
    out.push_str("memcached_up 1\n");
    if let Some(v) = figures.get("version") {
        family(
            &mut out,
            "memcached_version",
            "gauge",
            "The version of this memcached server.",
        );
        let _ = writeln!(out, "memcached_version{{version=\"{}\"}} 1", label_value(v));
    }
    let mut exported: Vec<String> = Vec::new();
    for (stat, name, kind, help) in EXPORTED {
        if let Some(v) = num(stat) {
            family(&mut out, name, kind.name(), help);
            let _ = writeln!(out, "{name} {v}");
            exported.push(stat.to_string());
        }
    }
    commands(&mut out, &num, &mut exported);
    let slabs = stats_snapshot(shared, Some(b"slabs"));
    if let Some((_, v)) = slabs.iter().find(|(k, _)| k == "total_malloced") {
        family(
            &mut out,
            "memcached_malloced_bytes",
            "gauge",
            "Number of bytes of memory allocated to items.",
        );
        let _ = writeln!(out, "memcached_malloced_bytes {v}");
    }

    for (stat, value) in &general {
        if exported.contains(stat) || NOT_KURA.contains(&stat.as_str()) {
            continue;
        }
        let Ok(v) = value.parse::<f64>() else {
            continue;
        };
        let name = metric_name(&format!("kura_{stat}"));
        family(
            &mut out,
            &name,
            "untyped",
            &format!("The stats figure {stat}."),
        );
        let _ = writeln!(out, "{name} {v}");
    }
    family(
        &mut out,
        "kura_values_receiving_bytes",
        "gauge",
        "Bytes held by large values being received.",
    );
    let _ = writeln!(
        out,
        "kura_values_receiving_bytes {}",
        shared.values.in_use()
    );
    family(
        &mut out,
        "kura_values_receiving_limit_bytes",
        "gauge",
        "The budget for large values being received.",
    );
    let _ = writeln!(
        out,
        "kura_values_receiving_limit_bytes {}",
        shared.values.limit()
    );
    super::replication::render(&mut out, &general);
    latencies(&mut out, shared);
    out
}

/// `memcached_commands_total{command,status}` as the exporter computes it;
/// the figures used go to `exported`.
fn commands(out: &mut String, num: &dyn Fn(&str) -> Option<f64>, exported: &mut Vec<String>) {
    let name = "memcached_commands_total";
    family(
        out,
        name,
        "counter",
        "Total number of all requests broken down by command (get, set, etc.) and status.",
    );
    let mut sample = |stat: String, cmd: &str, status: &str, value: Option<f64>| {
        if let Some(v) = value.or_else(|| num(&stat)) {
            let _ = writeln!(out, "{name}{{command=\"{cmd}\",status=\"{status}\"}} {v}");
        }
        exported.push(stat);
    };
    for cmd in COMMANDS {
        sample(format!("{cmd}_hits"), cmd, "hit", None);
        sample(format!("{cmd}_misses"), cmd, "miss", None);
    }
    sample("cas_badval".into(), "cas", "badval", None);
    sample("cmd_flush".into(), "flush", "hit", None);
    // memcached counts CAS commands in cmd_set as well.
    let cas: f64 = ["cas_misses", "cas_hits", "cas_badval"]
        .iter()
        .filter_map(|n| num(n))
        .sum();
    let set = num("cmd_set").map(|v| v - cas);
    if set.is_some() {
        sample("cmd_set".into(), "set", "hit", set);
    }
}

/// `kura_command_duration_seconds{command}`: the workers' histograms
/// summed.
fn latencies(out: &mut String, shared: &Shared) {
    let mut totals = [HistogramTotals::default(); Family::ALL.len()];
    for t in &shared.thread_stats {
        t.latency.add_to(&mut totals);
    }
    let name = "kura_command_duration_seconds";
    family(
        out,
        name,
        "histogram",
        "Time to serve a request, from its bytes read to its reply composed, by command family.",
    );
    for (f, t) in Family::ALL.iter().zip(totals.iter()) {
        let cmd = f.label();
        let mut seen = 0u64;
        for (i, bound) in BOUNDS_US.iter().enumerate() {
            seen += t.buckets[i];
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{command=\"{cmd}\",le=\"{le}\"}} {seen}");
        }
        let count = t.count();
        let _ = writeln!(
            out,
            "{name}_bucket{{command=\"{cmd}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "{name}_sum{{command=\"{cmd}\"}} {}",
            t.sum_ns as f64 / 1e9
        );
        let _ = writeln!(out, "{name}_count{{command=\"{cmd}\"}} {count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_label_values_are_made_valid() {
        assert_eq!(metric_name("kura_log-lag.bytes"), "kura_log_lag_bytes");
        assert_eq!(metric_name("9lives"), "_lives");
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
