//! Upgrade requests piped to the backend, as Varnish's `pipe` does: a WebSocket handshake (or
//! any `Upgrade` but `h2c`, `wire::head::asks_upgrade`) goes to the backend on a connection of
//! its own. A `101` answer is sent to the client and the two connections are joined, bytes
//! copied each way until either side closes. Any other answer (the backend refuses) is passed
//! to the client and ends its connection: the framing guard read nothing after the request
//! and reads nothing more (`framing.rs`), so no byte is ever taken for HTTP unjudged.
//!
//! At most `max_pipes` pipes at once: past it, `503` and the connection ends. A pipe that
//! receives nothing either way for `pipe_idle_timeout` is closed. Counted on `/stats` and
//! `/metrics`: `pipes` (opened), `pipes_active`, `pipes_refused` (over the limit),
//! `pipes_idle_closed`.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING, UPGRADE};
use http::request::Parts;
use http::{HeaderValue, Method, Request, Response, StatusCode, Version};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;

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
    if let Some((refused, _)) = super::loops::refused(proxy, &parts.headers) {
        return closing(refused);
    }
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
    let idle = proxy.config.pipe_idle_timeout;
    tokio::spawn(async move {
        let _permit = permit;
        let (Ok(client), Ok(backend)) = (on_client.await, on_backend.await) else {
            return;
        };
        let ended = join(TokioIo::new(client), TokioIo::new(backend), idle).await;
        if ended == Ended::Idle {
            active.idle_closed();
        }
    });
    // The backend's 101 as it is: Upgrade, Connection and the protocol's own fields.
    (Response::from_parts(head, Body::Empty), CacheOutcome::Pipe)
}

/// How long a pipe waits for its other direction once one has ended (its side closed): the
/// bytes still in flight (a WebSocket's closing frame) go, and a side that never closes does
/// not hold a pipe.
const LINGER: Duration = Duration::from_secs(10);

/// How a pipe ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// A side closed (or failed).
    Closed,
    /// Nothing was received either way for `pipe_idle_timeout`.
    Idle,
}

/// Copies bytes each way until one side ends, then lets the other finish for at most
/// [`LINGER`]; or until nothing has been received either way for `idle` (Varnish's
/// `pipe_timeout`). Both connections close when it returns.
async fn join<C, B>(client: C, backend: B, idle: Option<Duration>) -> Ended
where
    C: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let last = Activity::new();
    let (client_read, mut client_write) = tokio::io::split(client);
    let (backend_read, mut backend_write) = tokio::io::split(backend);
    let (mut client_read, mut backend_read) = (last.watch(client_read), last.watch(backend_read));
    let up = async {
        let _ = tokio::io::copy(&mut client_read, &mut backend_write).await;
        let _ = backend_write.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut backend_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    let idled = async {
        match idle {
            Some(idle) => last.idle_for(idle).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(up, down, idled);
    tokio::select! {
        () = &mut up => { let _ = tokio::time::timeout(LINGER, down).await; }
        () = &mut down => { let _ = tokio::time::timeout(LINGER, up).await; }
        () = &mut idled => return Ended::Idle,
    }
    Ended::Closed
}

/// When a pipe last received a byte, either way: milliseconds since it began.
struct Activity {
    began: Instant,
    last: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            began: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// `read`, noting each byte it receives here.
    fn watch<R>(&self, read: R) -> Watched<'_, R> {
        Watched {
            inner: read,
            activity: self,
        }
    }

    fn received(&self) {
        let millis = u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(millis, Ordering::Relaxed);
    }

    /// Returns once nothing has been received for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = self.began + Duration::from_millis(self.last.load(Ordering::Relaxed));
            let deadline = last + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A reading half whose reads are noted in an [`Activity`].
struct Watched<'a, R> {
    inner: R,
    activity: &'a Activity,
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<'_, R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.received();
        }
        read
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
    /// Counts a pipe closed for idleness.
    fn idle_closed(&self) {
        self.0.pipes_idle_closed.fetch_add(1, Ordering::Relaxed);
    }
}

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
