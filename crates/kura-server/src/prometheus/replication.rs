//! Replication's figures that `stats` gives as words or as one line per
//! replica (docs/replication.md), as Prometheus samples with labels: the
//! role, history and primary as `kura_repl_info`, the replica's link as
//! `kura_repl_link_up`, and each replica streaming from this server as
//! `kura_repl_replica_*{replica,addr}`. The numeric `repl_*` figures are
//! exported by render.rs like every other `stats` figure.

use std::fmt::Write;

use super::render::{family, label_value};

/// The per-replica fields of a `repl_replica_<i>` line, with their
/// metrics' names and help.
const REPLICA_FIELDS: &[(&str, &str, &str)] = &[
    (
        "acked_seq",
        "kura_repl_replica_acked_seq",
        "The last record this replica acknowledged.",
    ),
    (
        "sent_seq",
        "kura_repl_replica_sent_seq",
        "The last record sent to this replica.",
    ),
    (
        "lag_records",
        "kura_repl_replica_lag_records",
        "Records written here that this replica has not acknowledged.",
    ),
    (
        "lag_bytes",
        "kura_repl_replica_lag_bytes",
        "Bytes of records written here that this replica has not acknowledged.",
    ),
];

/// A `repl_replica_<i>` line: its index, its address (as a label value)
/// and its `key=value` fields.
struct Replica<'a> {
    index: &'a str,
    addr: String,
    fields: Vec<(&'a str, &'a str)>,
}

/// Appends replication's labelled samples, taken from the `stats`
/// snapshot `general`.
pub(super) fn render(out: &mut String, general: &[(String, String)]) {
    let get = |name: &str| {
        general
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let Some(role) = get("repl_role") else {
        return;
    };
    family(
        out,
        "kura_repl_info",
        "gauge",
        "This server's replication role, history id and primary (1).",
    );
    let _ = writeln!(
        out,
        "kura_repl_info{{role=\"{}\",history=\"{}\",primary=\"{}\"}} 1",
        label_value(role),
        label_value(get("repl_history").unwrap_or("-")),
        label_value(get("repl_primary").unwrap_or("")),
    );
    if let Some(link) = get("repl_link") {
        family(
            out,
            "kura_repl_link_up",
            "gauge",
            "Whether this replica's link to its primary is up.",
        );
        let _ = writeln!(out, "kura_repl_link_up {}", u8::from(link == "up"));
    }
    let replicas: Vec<Replica<'_>> = general
        .iter()
        .filter_map(|(k, v)| {
            let i = k.strip_prefix("repl_replica_")?;
            let fields: Vec<(&str, &str)> =
                v.split(',').filter_map(|kv| kv.split_once('=')).collect();
            let addr = fields
                .iter()
                .find(|(k, _)| *k == "addr")
                .map_or("", |f| f.1);
            Some(Replica {
                index: i,
                addr: label_value(addr),
                fields,
            })
        })
        .collect();
    if replicas.is_empty() {
        return;
    }
    for (field, name, help) in REPLICA_FIELDS {
        family(out, name, "gauge", help);
        for Replica {
            index: i,
            addr,
            fields,
        } in &replicas
        {
            let value = fields
                .iter()
                .find(|(k, _)| k == field)
                .and_then(|(_, v)| v.parse::<f64>().ok());
            if let Some(v) = value {
                let _ = writeln!(out, "{name}{{replica=\"{i}\",addr=\"{addr}\"}} {v}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_primary_exports_its_role_and_each_replica_by_label() {
        let mut out = String::new();
        render(
            &mut out,
            &snapshot(&[
                ("repl_role", "primary"),
                ("repl_history", "ab12"),
                (
                    "repl_replica_0",
                    "addr=10.0.0.2:5000,acked_seq=7,sent_seq=9,lag_records=2,lag_bytes=80",
                ),
                (
                    "repl_replica_1",
                    "addr=10.0.0.3:5001,acked_seq=9,sent_seq=9,lag_records=0,lag_bytes=-",
                ),
            ]),
        );
        assert!(out.contains("kura_repl_info{role=\"primary\",history=\"ab12\",primary=\"\"} 1\n"));
        assert!(!out.contains("kura_repl_link_up"));
        assert!(
            out.contains("kura_repl_replica_acked_seq{replica=\"0\",addr=\"10.0.0.2:5000\"} 7\n")
        );
        assert!(
            out.contains("kura_repl_replica_lag_records{replica=\"0\",addr=\"10.0.0.2:5000\"} 2\n")
        );
        assert!(
            out.contains("kura_repl_replica_lag_bytes{replica=\"0\",addr=\"10.0.0.2:5000\"} 80\n")
        );
        // A figure the server does not know ("-") is left out, not made 0.
        assert!(!out.contains("kura_repl_replica_lag_bytes{replica=\"1\""));
        assert!(
            out.contains("kura_repl_replica_sent_seq{replica=\"1\",addr=\"10.0.0.3:5001\"} 9\n")
        );
        assert_eq!(
            out.matches("# TYPE kura_repl_replica_acked_seq gauge")
                .count(),
            1
        );
    }

    #[test]
    fn a_replica_exports_its_primary_and_whether_its_link_is_up() {
        for (link, up) in [("up", 1), ("down", 0)] {
            let mut out = String::new();
            render(
                &mut out,
                &snapshot(&[
                    ("repl_role", "replica"),
                    ("repl_primary", "127.0.0.1:11211"),
                    ("repl_history", "cd34"),
                    ("repl_link", link),
                ]),
            );
            assert!(out.contains(
                "kura_repl_info{role=\"replica\",history=\"cd34\",primary=\"127.0.0.1:11211\"} 1\n"
            ));
            assert!(out.contains(&format!("kura_repl_link_up {up}\n")));
            assert!(!out.contains("kura_repl_replica_"));
        }
    }
}
