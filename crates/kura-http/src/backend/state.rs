//! A server's state as `/stats` and `/metrics` show it: `varnishadm backend.list`'s columns
//! (health, probe window, connections) for each server of each backend.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::Server;

/// One server read at one moment.
#[derive(Debug, Clone)]
pub struct ServerState {
    /// Its address.
    pub name: String,
    /// Believed healthy.
    pub healthy: bool,
    /// Good probes of the window, and the window; `None` without a probe.
    pub probe: Option<(u32, u32)>,
    /// Requests that got no usable response.
    pub errors: u64,
    /// Requests it has at the moment (with `max_connections`).
    pub connections: usize,
    /// Its `max_connections`.
    pub max_connections: Option<usize>,
    /// Times it was passed over or refused for having `max_connections`.
    pub busy: u64,
}

/// A `/metrics` series of every server: name, type, help, value.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ServerState) -> u64,
);

/// A backend's line of the snapshot: name, healthy, errors, servers.
pub type BackendState = (String, bool, u64, Vec<ServerState>);

impl Server {
    /// Its state now.
    pub fn state(&self) -> ServerState {
        ServerState {
            name: self.name.clone(),
            healthy: self.health.is_healthy(),
            probe: self.probe.as_ref().map(|_| self.health.good()),
            errors: self.health.errors.load(Ordering::Relaxed),
            connections: self.in_use(),
            max_connections: self.max_connections(),
            busy: self.busy.load(Ordering::Relaxed),
        }
    }
}

impl ServerState {
    /// Its `/stats` object.
    pub fn json(&self) -> serde_json::Value {
        let probe = self.probe.map(|(good, window)| format!("{good}/{window}"));
        serde_json::json!({
            "healthy": u8::from(self.healthy),
            "probe": probe,
            "errors": self.errors,
            "connections": self.connections,
            "max_connections": self.max_connections,
            "busy": self.busy,
        })
    }

    /// The per-server series of `/metrics`.
    pub fn prometheus(out: &mut String, backends: &[BackendState]) {
        let series: [Series; 4] = [
            (
                "up",
                "gauge",
                "Whether each backend server is healthy.",
                |s| u64::from(s.healthy),
            ),
            (
                "errors_total",
                "counter",
                "Requests to each backend server that got no usable response.",
                |s| s.errors,
            ),
            (
                "connections",
                "gauge",
                "Requests each backend server has at the moment (with max_connections).",
                |s| s.connections as u64,
            ),
            (
                "busy_total",
                "counter",
                "Times each backend server was passed over or refused for having max_connections.",
                |s| s.busy,
            ),
        ];
        for (metric, kind, help, value) in series {
            let _ = writeln!(out, "# HELP kura_http_backend_server_{metric} {help}");
            let _ = writeln!(out, "# TYPE kura_http_backend_server_{metric} {kind}");
            for (backend, _, _, servers) in backends {
                for server in servers {
                    let _ = writeln!(
                        out,
                        "kura_http_backend_server_{metric}{{backend=\"{backend}\",server=\"{}\"}} {}",
                        server.name,
                        value(server)
                    );
                }
            }
        }
    }
}
