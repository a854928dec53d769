//! The Prometheus endpoint (`--metrics-listen ADDR`, `GET /metrics`): the
//! `stats` figures in the text format with the server's names
//! (memcached_exporter's where it has one: `memcached_up`,
//! `memcached_current_connections`, `memcached_commands_total{command,status}`;
//! `kura_proxy_*` for the proxy's own, per pool and per backend with a
//! label). At most a few scrapers at once, each bounded in time.

use std::convert::Infallible;
use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::ctx::Ctx;

const MAX_SCRAPERS: usize = 8;
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves scrapers for ever.
pub async fn serve(listener: TcpListener, ctx: Arc<Ctx>) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPERS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let service = service_fn(|req: Request<hyper::body::Incoming>| {
                let reply = respond(&ctx, &req);
                async move { Ok::<_, Infallible>(reply) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .max_buf_size(16 * 1024)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(Duration::from_secs(10), conn).await;
            drop(slot);
        });
    }
}

fn respond<B>(ctx: &Ctx, req: &Request<B>) -> Response<Full<Bytes>> {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    let (status, body) = match (req.method(), req.uri().path()) {
        (_, "/metrics") if read => (StatusCode::OK, render(ctx)),
        // Live: the process answers.
        (_, "/healthz") if read => (StatusCode::OK, "ok\n".to_string()),
        // Ready: not stopping, and some backend to send requests to.
        (_, "/readyz") if read => match (ctx.is_stopping(), ctx.router().any_up()) {
            (true, _) => (StatusCode::SERVICE_UNAVAILABLE, "stopping\n".into()),
            (false, false) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "every backend is down\n".into(),
            ),
            (false, true) => (StatusCode::OK, "ready\n".to_string()),
        },
        // What SIGHUP does, for those who cannot send signals.
        (&Method::POST, "/reload") => match ctx.reload() {
            Ok(()) => (StatusCode::OK, "reloaded\n".to_string()),
            Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, format!("{e}\n")),
        },
        (_, "/metrics" | "/healthz" | "/readyz" | "/reload") => {
            (StatusCode::METHOD_NOT_ALLOWED, String::new())
        }
        _ => (StatusCode::NOT_FOUND, "see /metrics\n".to_string()),
    };
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    reply
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A per-backend family: name, type, help, and the figure.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    fn(&crate::router::Node) -> u64,
);

/// Each backend's time to answer (latency.rs).
fn latencies(out: &mut String, router: &crate::router::Router) {
    let name = "kura_proxy_backend_request_duration_seconds";
    family(
        out,
        name,
        "histogram",
        "Time from a request's queueing on a connection to the backend to the read that completed its reply.",
    );
    for node in &router.nodes {
        let labels = format!("backend=\"{}\"", label(&node.addr));
        node.stats.latency.render(out, name, &labels);
    }
}

/// The whole page.
pub fn render(ctx: &Ctx) -> String {
    let mut out = String::with_capacity(4096);
    server_families(&mut out, &ctx.stats);
    let router = ctx.router();
    let rows: [Row; 9] = [
        (
            "kura_proxy_backend_requests_total",
            "counter",
            "Requests sent to the backend.",
            |n| n.stats.requests.load(Ordering::Relaxed),
        ),
        (
            "kura_proxy_backend_errors_total",
            "counter",
            "Requests to the backend that failed.",
            |n| n.stats.errors.load(Ordering::Relaxed),
        ),
        (
            "kura_proxy_backend_timeouts_total",
            "counter",
            "Requests to the backend that timed out.",
            |n| n.stats.timeouts.load(Ordering::Relaxed),
        ),
        (
            "kura_proxy_backend_down_transitions_total",
            "counter",
            "Times the backend was marked down.",
            |n| n.down_transitions(),
        ),
        (
            "kura_proxy_backend_down",
            "gauge",
            "Whether the backend is marked down.",
            |n| u64::from(n.is_down()),
        ),
        (
            "kura_proxy_backend_serving",
            "gauge",
            "Whether requests go to the backend (up and its journal replayed).",
            |n| u64::from(n.available()),
        ),
        (
            "kura_proxy_backend_journal_keys",
            "gauge",
            "Keys to delete on the backend before it serves again.",
            |n| n.journal_len().0 as u64,
        ),
        (
            "kura_proxy_backend_behind",
            "gauge",
            "Whether the backend (a rejoin = \"caught-up\" pool's) is not known to be caught up with its primary.",
            |n| u64::from(n.is_behind()),
        ),
        (
            "kura_proxy_backend_journal_replayed_total",
            "counter",
            "Journaled keys deleted on the backend.",
            |n| n.stats.replayed.load(Ordering::Relaxed),
        ),
    ];
    for (name, kind, help, f) in rows {
        family(&mut out, name, kind, help);
        for node in &router.nodes {
            let _ = writeln!(
                out,
                "{name}{{backend=\"{}\"}} {}",
                label(&node.addr),
                f(node)
            );
        }
    }
    latencies(&mut out, &router);
    family(
        &mut out,
        "kura_proxy_pool_backends",
        "gauge",
        "Backends of the pool (0 for a replicated pool).",
    );
    for p in &router.pools {
        let _ = writeln!(
            out,
            "kura_proxy_pool_backends{{pool=\"{}\"}} {}",
            label(&p.name),
            p.nodes.len()
        );
    }
    pool_counters(&mut out, &router);
    out
}

/// A family of the proxy's own: name, type, help and its (labels, value) samples.
type Family = (&'static str, &'static str, &'static str, Vec<(String, u64)>);

/// The proxy's own families: memcached_exporter's names where the figure
/// means the same, then kura's.
fn server_families(out: &mut String, s: &crate::counters::Stats) {
    let n = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let command = |cmd: &str, status: &str| format!("{{command=\"{cmd}\",status=\"{status}\"}}");
    let families: [Family; 5] = [
        (
            "memcached_up",
            "gauge",
            "Could the memcached server be reached.",
            vec![(String::new(), 1)],
        ),
        (
            "memcached_current_connections",
            "gauge",
            "Current number of open connections.",
            vec![(String::new(), n(&s.curr_connections))],
        ),
        (
            "memcached_connections_total",
            "counter",
            "Total number of connections opened since the server started running.",
            vec![(String::new(), n(&s.total_connections))],
        ),
        (
            "memcached_commands_total",
            "counter",
            "Total number of all requests broken down by command (get, set, etc.) and status.",
            vec![
                (command("get", "hit"), n(&s.get_hits)),
                (command("get", "miss"), n(&s.get_misses)),
                (command("set", "hit"), n(&s.cmd_set)),
                (command("flush", "hit"), n(&s.cmd_flush)),
                (command("touch", "hit"), n(&s.cmd_touch)),
            ],
        ),
        (
            "kura_proxy_ssl_handshake_errors_total",
            "counter",
            "Client TLS handshakes that failed or timed out (stats' ssl_handshake_errors).",
            vec![(String::new(), n(&s.ssl_handshake_errors))],
        ),
    ];
    for (name, kind, help, samples) in families {
        family(out, name, kind, help);
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    }
}

/// Each pool's routing counters (rate limit, miss failover, writes not
/// waited for).
fn pool_counters(out: &mut String, router: &crate::router::Router) {
    let Some(first) = router.pools.first() else {
        return;
    };
    for (i, (k, help, _)) in first.routing_counters().into_iter().enumerate() {
        let name = format!("kura_proxy_pool_{k}_total");
        family(out, &name, "counter", help);
        for p in &router.pools {
            let v = p.routing_counters()[i].2;
            let _ = writeln!(out, "{name}{{pool=\"{}\"}} {v}", label(&p.name));
        }
    }
}
