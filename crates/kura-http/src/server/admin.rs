//! The admin listener: `GET /stats` (JSON) and `GET /metrics` (Prometheus), HTTP/1.1; the
//! ban and tag endpoints are in `ban_admin.rs`.

use std::convert::Infallible;
use std::sync::Arc;

use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::proxy::Proxy;
use super::respond;
use crate::body::Body;
use crate::stats::snapshot;

pub async fn serve(proxy: Arc<Proxy>, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = stopped.changed() => return,
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let proxy = proxy.clone();
                async move {
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
