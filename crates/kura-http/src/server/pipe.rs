//! Upgrade requests piped to the backend, as Varnish's `pipe` does: a WebSocket handshake (or
//! any `Upgrade` but `h2c`, `wire::head::asks_upgrade`) goes to the backend on a connection of
//! its own. A `101` answer is sent to the client and the two connections are joined, bytes
//! copied each way until either side closes. Any other answer (the backend refuses) is passed
//! to the client and ends its connection: the framing guard read nothing after the request
//! and reads nothing more (`framing.rs`), so no byte is ever taken for HTTP unjudged.
//!
//! At most `max_pipes` pipes at once: past it, `503` and the connection ends. Counted on
//! `/stats` and `/metrics`: `pipes` (opened), `pipes_active`, `pipes_refused` (over the limit).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING, UPGRADE};
use http::request::Parts;
use http::{HeaderValue, Method, Request, Response, StatusCode, Version};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::proxy::{Peer, Proxy};
use super::respond;
use crate::backend::strip_hop_by_hop;
use crate::body::Body;
use crate::stats::{CacheOutcome, Stats};
use crate::wire::head::asks_upgrade;

/// Whether the request is one the guard held as an upgrade request: an HTTP/1.1 GET without a
/// body that asks to upgrade. Every such request is answered by [`pipe`].
pub fn is_upgrade(parts: &Parts) -> bool {
    parts.version == Version::HTTP_11
        && parts.method == Method::GET
        // The one lookup most requests stop at.
        && parts.headers.contains_key(UPGRADE)
        && !parts.headers.contains_key(TRANSFER_ENCODING)
        && parts
            .headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .all(|v| v.as_bytes() == b"0")
        && asks_upgrade(
            parts
                .headers
                .iter()
                .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
        )
}

/// Pipes an upgrade request to the backend of `route`.
pub async fn pipe(
    proxy: &Arc<Proxy>,
    parts: &mut Parts,
    peer: &Peer,
    route: usize,
) -> (Response<Body>, CacheOutcome) {
    let stats = &proxy.stats;
    let (Some(on_client), Ok(permit)) = (
        parts.extensions.remove::<OnUpgrade>(),
        proxy.pipes.clone().try_acquire_owned(),
    ) else {
        stats.pipes_refused.fetch_add(1, Ordering::Relaxed);
        return closing(respond::synth(StatusCode::SERVICE_UNAVAILABLE, false));
    };
    let backend = proxy.backend(route);
    let mut request = Request::new(Body::Empty);
    *request.uri_mut() = backend.uri(parts.uri.path_and_query());
    let headers = request.headers_mut();
    *headers = backend.forward_headers(&parts.headers, peer.forwarded, None);
    // The hop-by-hop fields of the handshake are what the backend must see.
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    for protocol in parts.headers.get_all(UPGRADE) {
        headers.append(UPGRADE, protocol.clone());
    }
    stats.backend_requests.fetch_add(1, Ordering::Relaxed);
    let mut response = match backend.send_upgrade(request).await {
        Ok(response) => response,
        Err(error) => {
            return closing(respond::synth(error.status(), false));
        }
    };
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        // Refused: its answer is passed, and the connection ends after it.
        let (mut head, body) = response.into_parts();
        strip_hop_by_hop(&mut head.headers);
        let (response, _) = closing(Response::from_parts(head, Body::Incoming(body)));
        return (response, CacheOutcome::Pass);
    }
    let on_backend = hyper::upgrade::on(&mut response);
    let (head, _) = response.into_parts();
    stats.pipes.fetch_add(1, Ordering::Relaxed);
    let active = Active::new(stats.clone());
    tokio::spawn(async move {
        let _held = (permit, active);
        let (Ok(client), Ok(backend)) = (on_client.await, on_backend.await) else {
            return;
        };
        join(TokioIo::new(client), TokioIo::new(backend)).await;
    });
    // The backend's 101 as it is: Upgrade, Connection and the protocol's own fields.
    (Response::from_parts(head, Body::Empty), CacheOutcome::Pipe)
}

/// How long a pipe waits for its other direction once one has ended (its side closed): the
/// bytes still in flight (a WebSocket's closing frame) go, and a side that never closes does
/// not hold a pipe.
const LINGER: Duration = Duration::from_secs(10);

/// Copies bytes each way until one side ends, then lets the other finish for at most
/// [`LINGER`]; both connections close when it returns.
async fn join<C, B>(client: C, backend: B)
where
    C: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut backend_read, mut backend_write) = tokio::io::split(backend);
    let up = async {
        let _ = tokio::io::copy(&mut client_read, &mut backend_write).await;
        let _ = backend_write.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut backend_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::pin!(up, down);
    tokio::select! {
        () = &mut up => { let _ = tokio::time::timeout(LINGER, down).await; }
        () = &mut down => { let _ = tokio::time::timeout(LINGER, up).await; }
    }
}

/// `response` with `Connection: close`: the guard reads nothing more after an upgrade
/// request that was not switched, and hyper ends the connection with it.
fn closing(mut response: Response<Body>) -> (Response<Body>, CacheOutcome) {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    (response, CacheOutcome::Synth)
}

/// A pipe counted in `pipes_active` while it lives.
struct Active(Arc<Stats>);

impl Active {
    fn new(stats: Arc<Stats>) -> Active {
        stats.pipes_active.fetch_add(1, Ordering::Relaxed);
        Active(stats)
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.pipes_active.fetch_sub(1, Ordering::Relaxed);
    }
}
