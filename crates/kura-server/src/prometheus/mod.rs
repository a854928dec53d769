//! The Prometheus endpoint (`--metrics-listen ADDR`): `GET /metrics`
//! answers the `stats` figures and the request latency histograms in the
//! Prometheus text format (`render.rs`; replication's labelled figures in
//! `replication.rs`), with memcached_exporter's names, so dashboards built
//! on the exporter work without one.
//!
//! It runs on the acceptor thread's event loop, apart from the workers, and
//! a slow or hostile scraper cannot hold much: at most [`MAX_SCRAPERS`]
//! connections at once (more are closed at once), a request head of at
//! most [`MAX_REQUEST_HEAD`] bytes that must arrive within
//! [`HEADER_TIMEOUT`], one request per connection, and a connection that is
//! not done within [`CONNECTION_TIMEOUT`] is dropped.

mod render;
mod replication;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::shared::{RunState, Shared};

pub use render::render;

/// Scrapes served at once; further connections are closed unanswered.
pub const MAX_SCRAPERS: usize = 16;
/// Largest request head (request line and headers) read.
pub const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// How long a scraper may take to send its request head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may last, reply included.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The text format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Accepts scrapers until the server stops.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_SCRAPERS));
    let mut rx = shared.watch();
    loop {
        let accepted = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => return,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("metrics: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let shared = shared.clone();
        tokio::task::spawn_local(async move {
            let service = service_fn(|req| {
                let reply = respond(&shared, &req);
                async move { Ok::<_, Infallible>(reply) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_REQUEST_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
            drop(slot);
        });
    }
}

/// Why the server should not be sent requests now, if it should not.
fn not_ready(shared: &Shared) -> Option<&'static str> {
    if shared.is_stopping() {
        return Some("stopping");
    }
    if shared
        .keyspace
        .durable()
        .is_some_and(|d| d.health().failed())
    {
        return Some("the update log failed");
    }
    None
}

/// The reply to one HTTP request.
fn respond<B>(shared: &Shared, req: &Request<B>) -> Response<Full<Bytes>> {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    let (status, body) = match (req.method(), req.uri().path()) {
        (_, "/metrics") if read => (StatusCode::OK, render(shared)),
        // Live: the process answers.
        (_, "/healthz") if read => (StatusCode::OK, "ok\n".to_string()),
        // Ready: serving, not stopping, and its update log (if any) healthy.
        (_, "/readyz") if read => match not_ready(shared) {
            Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
            None => (StatusCode::OK, "ready\n".to_string()),
        },
        // What SIGHUP does, for those who cannot send signals.
        (&Method::POST, "/reload") => {
            let done = crate::reload::reload(shared);
            let status = if done.iter().all(|r| r.outcome.is_ok()) {
                StatusCode::OK
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            (status, crate::reload::summary(&done) + "\n")
        }
        (_, "/metrics" | "/healthz" | "/readyz" | "/reload") => {
            (StatusCode::METHOD_NOT_ALLOWED, String::new())
        }
        _ => (StatusCode::NOT_FOUND, "see /metrics\n".to_string()),
    };
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = status;
    let headers = reply.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        let allow = if req.uri().path() == "/reload" {
            "POST"
        } else {
            "GET, HEAD"
        };
        headers.insert(ALLOW, HeaderValue::from_static(allow));
    }
    reply
}
