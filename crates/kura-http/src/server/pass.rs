//! Passing a request to the backend untouched by the cache: methods other than GET and HEAD,
//! requests with `Authorization` (as Varnish), URLs too long for a key, client preconditions
//! meant for the origin. The bodies stream both ways through hyper (bounded by its buffers).
//! After an unsafe method that succeeded, the target URI and the `Location` and
//! `Content-Location` URIs on the same host are invalidated (RFC 9111 §4.4).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::request::Parts;
use http::{Request, Response, StatusCode};

use super::proxy::{Peer, Proxy};
use super::{interim, respond};
use crate::backend::{strip_hop_by_hop, Lease, Pick};
use crate::body::Body;
use crate::compress::ClientCoding;
use crate::keys::query::{key_of, normalise_percent};
use crate::rules::{invalidation, RequestHead};
use crate::stats::CacheOutcome;

/// Sends the request to the backend and its response back.
pub async fn pass(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    body: Body,
    peer: &Peer,
    route: usize,
) -> (Response<Body>, CacheOutcome) {
    if let Some(refused) = super::loops::refused(proxy, &parts.headers) {
        return refused;
    }
    let backend = proxy.backend(route);
    // A client body that breaks (a malformed chunk, cut short) is the client's fault: 400.
    let broken = Arc::new(AtomicBool::new(false));
    let body = match body {
        Body::Incoming(incoming) => Body::Request(incoming, broken.clone()),
        other => other,
    };
    let mut request = Request::new(body);
    *request.method_mut() = parts.method.clone();
    *request.uri_mut() = backend.uri(parts.uri.path_and_query());
    *request.headers_mut() = backend.forward_headers(&parts.headers, peer.forwarded, None);
    let to = peer.interim_for(parts);
    let hints = to.as_ref().map(|_| {
        let (sender, receiver) = interim::channel();
        interim::forward_to(&mut request, sender);
        receiver
    });
    proxy.stats.backend_requests.fetch_add(1, Ordering::Relaxed);
    let asked = std::time::Instant::now();
    let sent =
        interim::while_forwarding(backend.send(request, Pick::Client), hints, to.as_deref()).await;
    proxy.stats.first_byte.record(asked.elapsed());
    let response = match sent {
        Ok(response) => response,
        Err(_) if broken.load(Ordering::Relaxed) => {
            proxy.stats.bad_requests.fetch_add(1, Ordering::Relaxed);
            return (
                respond::synth(StatusCode::BAD_REQUEST, true),
                CacheOutcome::Synth,
            );
        }
        Err(error) => return (respond::synth(error.status(), false), CacheOutcome::Synth),
    };
    let (mut head, body) = response.into_parts();
    if !invalidation::is_safe(&parts.method) {
        invalidate(proxy, parts, peer, &head);
    }
    strip_hop_by_hop(&mut head.headers);
    // The server's connection is in use until the body is read or dropped.
    let lease = Lease::of(&head.extensions).cloned();
    // A looked-up request passed here (its preconditions are the origin's) asked the backend
    // for gzip on the client's behalf.
    let decode = ClientCoding::adapt(ClientCoding::of(parts), &mut head.headers)
        .filter(|_| parts.method != http::Method::HEAD);
    let body = Body::backend(body, lease);
    match decode {
        None => (Response::from_parts(head, body), CacheOutcome::Pass),
        decode => {
            let response = Response::from_parts(head, body.decoded(decode));
            respond::primed(response, CacheOutcome::Pass).await
        }
    }
}

fn invalidate(proxy: &Proxy, parts: &Parts, peer: &Peer, response: &http::response::Parts) {
    let Some(target) = invalidation::target_uri(RequestHead::from(parts), peer.scheme) else {
        return;
    };
    let uris =
        invalidation::invalidated(&parts.method, &target, response.status, &response.headers);
    for uri in uris {
        // The key as a GET of that URI would have it, under the route it would meet.
        let host = uri.host().map(str::to_ascii_lowercase);
        let path = normalise_percent(uri.path());
        let route = proxy.config.route_index(host.as_deref(), &path);
        proxy
            .cache
            .invalidate(key_of(&uri, &proxy.route(route).normalize).as_bytes());
    }
}
