//! Assembling a page: every include resolved and its fragment requested at once (each an
//! ordinary request through the cache, in a task of its own), then the page's text and the
//! fragments' bodies sent in the page's order, each as it comes. A fragment that fails (a
//! status other than 200 or 204, a failed fetch or body, a refused `src`) is left out when its
//! include says `onerror="continue"`; otherwise the page is cut short there: its head is gone
//! already, so the client sees the connection end before the body does (Varnish aborts the
//! parent request the same way).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    ACCEPT_ENCODING, CONNECTION, CONTENT_LENGTH, EXPECT, HOST, IF_MATCH, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, RANGE, TE, TRANSFER_ENCODING, UPGRADE,
};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::parse::Segment;
use super::Aborted;
use crate::body::Body;
use crate::compress::{self, Decode};
use crate::server::proxy::{self, Peer, Proxy};
use crate::stats::Stats;

/// The fields a fragment request does not take from the page's request: the page's own
/// preconditions and range, its framing, and `Accept-Encoding` (fragments are sent decoded).
const NOT_INHERITED: [http::HeaderName; 14] = [
    HOST,
    RANGE,
    IF_RANGE,
    IF_MATCH,
    IF_NONE_MATCH,
    IF_MODIFIED_SINCE,
    IF_UNMODIFIED_SINCE,
    CONTENT_LENGTH,
    TRANSFER_ENCODING,
    ACCEPT_ENCODING,
    CONNECTION,
    UPGRADE,
    TE,
    EXPECT,
];

/// One client request's includes, all levels together.
#[derive(Clone)]
pub(crate) struct Tree {
    pub(crate) proxy: Arc<Proxy>,
    peer: Peer,
    /// The page request's fields, for fragment requests.
    headers: Arc<HeaderMap>,
    /// The page's host (`Host`, else the target's authority), lowercase.
    host: Option<String>,
    /// Fragments still allowed (`max_includes`).
    left: Arc<AtomicUsize>,
}

enum Piece {
    Text(Bytes),
    Fragment(JoinHandle<Result<Body, String>>, bool),
    Refused(String, bool),
}

impl Tree {
    pub(super) fn new(proxy: Arc<Proxy>, parts: &Parts, peer: &Peer) -> Tree {
        let mut headers = parts.headers.clone();
        for name in NOT_INHERITED {
            headers.remove(name);
        }
        let host = parts
            .headers
            .get(HOST)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .or_else(|| parts.uri.authority().map(|a| a.as_str().to_owned()))
            .map(|h| h.to_ascii_lowercase());
        let mut peer = peer.clone();
        peer.interim = None;
        let left = Arc::new(AtomicUsize::new(proxy.config.esi.max_includes));
        Tree {
            proxy,
            peer,
            headers: Arc::new(headers),
            host,
            left,
        }
    }

    /// The body of a page (the answer to `parts`, at level `depth`) of `segments` over `page`.
    pub(super) fn assemble(
        &self,
        parts: &Parts,
        page: Bytes,
        segments: Vec<Segment>,
        depth: usize,
    ) -> Body {
        let stats = &self.proxy.stats;
        let mut pieces = Vec::with_capacity(segments.len());
        for segment in segments {
            match segment {
                Segment::Text(start, end) => pieces.push(Piece::Text(page.slice(start..end))),
                Segment::Include(src, onerror) => {
                    let room = self
                        .left
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_ok();
                    if depth >= self.proxy.config.esi.max_depth || !room {
                        stats.esi_skipped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    stats.esi_includes.fetch_add(1, Ordering::Relaxed);
                    match self.resolve(&src, parts.uri.path()) {
                        Ok((host, target)) => {
                            let task =
                                tokio::spawn(fragment(self.clone(), host, target, depth + 1));
                            pieces.push(Piece::Fragment(task, onerror));
                        }
                        Err(why) => pieces.push(Piece::Refused(why, onerror)),
                    }
                }
            }
        }
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(send(pieces, tx, stats.clone()));
        Body::Esi(rx)
    }

    /// The host and target of an include's `src` on a page at `path`: a path on the page's
    /// host, or an absolute URL on it or on one of `[esi] hosts`.
    fn resolve(&self, src: &str, path: &str) -> Result<(Option<String>, String), String> {
        let lower = src.to_ascii_lowercase();
        let absolute = lower.starts_with("http://") || lower.starts_with("https://");
        if absolute || src.starts_with("//") {
            let full = if absolute {
                src.to_owned()
            } else {
                format!("http:{src}")
            };
            let uri: Uri = full.parse().map_err(|_| format!("{src:?}: not a URL"))?;
            let authority = uri
                .authority()
                .ok_or_else(|| format!("{src:?}: no host"))?
                .as_str()
                .to_ascii_lowercase();
            let host = uri.host().unwrap_or_default().to_ascii_lowercase();
            let allowed = self.host.as_deref() == Some(authority.as_str())
                || self
                    .proxy
                    .config
                    .esi
                    .hosts
                    .iter()
                    .any(|h| *h == authority || *h == host);
            if authority.contains('@') || !allowed {
                return Err(format!("{src:?}: a host this page may not include from"));
            }
            let target = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
            return Ok((Some(authority), target));
        }
        let target = if src.starts_with('/') {
            src.to_owned()
        } else {
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{src}")
        };
        match target.parse::<http::uri::PathAndQuery>() {
            Ok(_) if target.starts_with('/') => Ok((self.host.clone(), target)),
            _ => Err(format!("{src:?}: not a path")),
        }
    }
}

/// Fetches a fragment: a GET for `target` on `host` through the cache, processed for ESI in
/// turn when its own route or response asks for it. Boxed: a fragment's page may include more.
fn fragment(
    tree: Tree,
    host: Option<String>,
    target: String,
    depth: usize,
) -> Pin<Box<dyn Future<Output = Result<Body, String>> + Send>> {
    Box::pin(async move {
        let mut request = Request::new(());
        *request.uri_mut() = target
            .parse()
            .map_err(|_| format!("{target:?}: not a request target"))?;
        let mut headers = (*tree.headers).clone();
        if let Some(host) = &host {
            let value = HeaderValue::from_str(host).map_err(|_| format!("{host:?}: not a host"))?;
            headers.insert(HOST, value);
        }
        *request.headers_mut() = headers;
        let (mut parts, ()) = request.into_parts();
        let (response, outcome) =
            proxy::route(&tree.proxy, &mut parts, Body::Empty, &tree.peer).await;
        let status = response.status();
        if status != StatusCode::OK && status != StatusCode::NO_CONTENT {
            return Err(format!("{target}: status {}", status.as_u16()));
        }
        let route = tree.proxy.route_of(&parts);
        let response = super::process(&tree, &parts, route, response, outcome, depth).await;
        // Sent decoded, whatever the fragment's coding (no-transform, or compression off).
        let limit = tree.proxy.config.max_object as u64;
        let decode = compress::coding_of(response.headers()).map(|coding| Decode {
            coding,
            limit,
            gzip: None,
        });
        Ok(response.into_body().decoded(decode))
    })
}

/// Sends the pieces in order into the page's body.
async fn send(pieces: Vec<Piece>, tx: mpsc::Sender<Result<Bytes, Aborted>>, stats: Arc<Stats>) {
    for piece in pieces {
        let (sent, onerror) = match piece {
            Piece::Text(bytes) => (tx.send(Ok(bytes)).await.map_err(|_| None), false),
            Piece::Refused(why, onerror) => (Err(Some(why)), onerror),
            Piece::Fragment(task, onerror) => {
                let sent = match task.await {
                    Ok(Ok(body)) => forward(body, &tx).await,
                    Ok(Err(why)) => Err(Some(why)),
                    Err(error) => Err(Some(error.to_string())),
                };
                (sent, onerror)
            }
        };
        match sent {
            Ok(()) => {}
            // The client is gone.
            Err(None) => return,
            Err(Some(why)) => {
                tracing::debug!("ESI include failed: {why}");
                stats.esi_errors.fetch_add(1, Ordering::Relaxed);
                if !onerror {
                    let _ = tx.send(Err(Aborted(why))).await;
                    return;
                }
            }
        }
    }
}

/// Sends a fragment's body: `Err(None)` when the client is gone, `Err(Some(why))` when the
/// body failed.
async fn forward(
    mut body: Body,
    tx: &mpsc::Sender<Result<Bytes, Aborted>>,
) -> Result<(), Option<String>> {
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Some(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            tx.send(Ok(data)).await.map_err(|_| None)?;
        }
    }
    Ok(())
}
