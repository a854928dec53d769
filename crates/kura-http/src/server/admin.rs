//! The admin listener: `GET /stats` (JSON), `GET /metrics` (Prometheus), `/healthz`,
//! `/readyz` and `POST /reload`, HTTP/1.1; the ban and tag endpoints are in `ban_admin.rs`.

use std::convert::Infallible;
use std::sync::Arc;

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::live::Live;
use super::proxy::Proxy;
use super::respond;
use crate::body::Body;
use crate::stats::snapshot;

pub async fn serve(live: Arc<Live>, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = stopped.changed() => return,
        };
        let live = live.clone();
        let stopping = stopped.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let proxy = live.current();
                let live = live.clone();
                let stopping = *stopping.borrow();
                async move {
                    if let Some(response) = lifecycle(&live, stopping, &request) {
                        return Ok::<_, Infallible>(response);
                    }
                    if super::ban_admin::handles(request.uri().path()) {
                        return Ok::<_, Infallible>(super::ban_admin::handle(proxy, request).await);
                    }
                    Ok::<_, Infallible>(page(&proxy, &request))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// `/healthz` (live), `/readyz` (ready: not stopping) and `POST /reload` (what SIGHUP
/// does); `None` for the other pages.
fn lifecycle(live: &Live, stopping: bool, request: &Request<Incoming>) -> Option<Response<Body>> {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    let (status, text) = match (request.method(), request.uri().path()) {
        (_, "/healthz") if read => (StatusCode::OK, "ok\n".to_string()),
        (_, "/readyz") if read && stopping => {
            (StatusCode::SERVICE_UNAVAILABLE, "stopping\n".into())
        }
        (_, "/readyz") if read => (StatusCode::OK, "ready\n".to_string()),
        (&Method::POST, "/reload") => match live.reload() {
            Ok(kept) if kept.is_empty() => (StatusCode::OK, "reloaded\n".to_string()),
            Ok(kept) => (
                StatusCode::OK,
                format!("reloaded; changes only on restart: {}\n", kept.join(", ")),
            ),
            Err(why) => (StatusCode::UNPROCESSABLE_ENTITY, format!("{why}\n")),
        },
        (_, "/healthz" | "/readyz" | "/reload") => (StatusCode::METHOD_NOT_ALLOWED, String::new()),
        _ => return None,
    };
    let mut response = Response::new(Body::full(text));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Some(response)
}

fn page(proxy: &Proxy, request: &Request<Incoming>) -> Response<Body> {
    let snapshot = || snapshot(&proxy.stats, &proxy.cache, &proxy.backends, &proxy.flights);
    let (text, kind) = match request.uri().path() {
        "/stats" => (
            proxy.params.add_to_json(snapshot().json()),
            "application/json",
        ),
        "/metrics" => (
            snapshot().prometheus() + &proxy.params.prometheus(),
            "text/plain; version=0.0.4",
        ),
        _ => return respond::synth(StatusCode::NOT_FOUND, false),
    };
    let mut response = Response::new(Body::full(text));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    response
}
