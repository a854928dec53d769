//! Edge Side Includes, the subset Varnish open source implements (`parse.rs`): a page whose
//! route says `do_esi = true` (Varnish's `beresp.do_esi`), or whose `Surrogate-Control` asks
//! for `ESI/1.0` when `[esi] surrogate_control = true`, is delivered assembled: its text as it
//! is, each `<esi:include>` replaced by the fragment's body. Fragments are ordinary requests
//! through the cache (their own route, TTL and rules), made with the page request's fields,
//! all started at once and sent in the page's order as each arrives (`assemble.rs`).
//!
//! Only the backend's response is processed: a stored page, or one fetched now; never anything
//! from the client. An include names a path on the page's host (relative, or absolute-path),
//! or an absolute URL on that host or one of `[esi] hosts`; anything else is refused. Depth
//! (`max_depth`, Varnish's `max_esi_depth`, 5) and the fragments of one client request
//! (`max_includes`) are bounded: a loop ends there. The parsed page is stored with the object
//! ([`MARKER`]), so a hit does not read the page again.

mod assemble;
pub mod parse;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, ETAG, LAST_MODIFIED};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt;

use crate::body::Body;
use crate::compress::decode::decode_all;
use crate::compress::{self, Coding};
use crate::rules::surrogate::SurrogateControl;
use crate::server::proxy::{Peer, Proxy};
use crate::stats::CacheOutcome;
pub(crate) use assemble::Tree;
use parse::Segment;

/// Stored with a page that is processed: its segments (JSON), so a hit does not parse the page
/// again. Never sent to a client, and removed from backend responses.
pub const MARKER: HeaderName = HeaderName::from_static("kura-esi");

/// `[esi]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EsiSettings {
    /// Process responses whose `Surrogate-Control` has `content="ESI/1.0"` (default false:
    /// only routes with `do_esi`).
    pub surrogate_control: bool,
    /// Deepest include level (Varnish's `max_esi_depth`, default 5).
    pub max_depth: usize,
    /// Most fragments for one client request, all levels together (default 100).
    pub max_includes: usize,
    /// Hosts other than the page's that an absolute `src` may name.
    pub hosts: Vec<String>,
    /// Whether any response may be processed (a route's `do_esi`, or `surrogate_control`):
    /// only then are a request's fields kept for its fragments.
    pub any: bool,
}

impl Default for EsiSettings {
    fn default() -> Self {
        EsiSettings {
            surrogate_control: false,
            max_depth: 5,
            max_includes: 100,
            hosts: Vec::new(),
            any: false,
        }
    }
}

/// Why an assembled page was cut short.
#[derive(Debug, thiserror::Error)]
#[error("ESI: {0}")]
pub struct Aborted(pub String);

/// Whether a response of route `route` with `headers` is processed.
pub fn wanted(proxy: &Proxy, route: usize, headers: &HeaderMap) -> bool {
    proxy.route(route).do_esi
        || (proxy.config.esi.surrogate_control
            && proxy.route(route).policy.surrogate_control
            && SurrogateControl::from_headers(headers).is_some_and(|s| s.esi))
}

/// The marker for a stored page of route `route` with `headers` and `body` (identity or
/// content-coded), when it is processed.
pub fn marker(
    proxy: &Proxy,
    route: usize,
    headers: &HeaderMap,
    body: &[Bytes],
) -> Option<HeaderValue> {
    if !wanted(proxy, route, headers) {
        return None;
    }
    let coding = compress::coding_of(headers);
    let page = identity(coding, Bytes::from(body.concat()), proxy.config.max_object).ok()?;
    let segments = parse::parse(&page)?;
    HeaderValue::from_bytes(&serde_json::to_vec(&segments).ok()?).ok()
}

/// The page's bytes without their content coding (gzip, br, zstd), at most `limit` of them.
fn identity(coding: Option<Coding>, body: Bytes, limit: usize) -> Result<Bytes, Aborted> {
    let Some(coding) = coding else {
        return Ok(body);
    };
    decode_all(coding, &body, limit as u64)
        .map(Bytes::from)
        .map_err(|error| Aborted(format!("the page's coding: {error}")))
}

/// `response` (route `route`, the answer to `parts` at include level `depth`) delivered with
/// ESI processing when it is wanted; else as it is. Only a response served from the store
/// (`outcome`) has its marker read: that one is the cache's own.
pub(crate) async fn process(
    tree: &Tree,
    parts: &Parts,
    route: usize,
    response: Response<Body>,
    outcome: CacheOutcome,
    depth: usize,
) -> Response<Body> {
    let proxy = &tree.proxy;
    let stored = matches!(outcome, CacheOutcome::Hit | CacheOutcome::Stale);
    let (mut head, body) = response.into_parts();
    let marker = head.headers.remove(MARKER).filter(|_| stored);
    if head.status != StatusCode::OK
        || matches!(outcome, CacheOutcome::Synth | CacheOutcome::Pipe)
        || !wanted(proxy, route, &head.headers)
    {
        return Response::from_parts(head, body);
    }
    proxy.stats.esi_pages.fetch_add(1, Ordering::Relaxed);
    let coding = compress::coding_of(&head.headers);
    for name in [CONTENT_LENGTH, ETAG, LAST_MODIFIED, ACCEPT_RANGES] {
        head.headers.remove(name);
    }
    if coding.is_some() {
        head.headers.remove(CONTENT_ENCODING);
    }
    if parts.method == Method::HEAD {
        return Response::from_parts(head, Body::Empty);
    }
    let limit = proxy.config.max_object;
    let collected = http_body_util::Limited::new(body, limit).collect().await;
    let page = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(error) => return aborted(head, Aborted(format!("reading the page: {error}"))),
    };
    let page = match identity(coding, page, limit) {
        Ok(page) => page,
        Err(why) => return aborted(head, why),
    };
    let segments = marker
        .and_then(|m| serde_json::from_slice::<Vec<Segment>>(m.as_bytes()).ok())
        .filter(|s| fits(s, page.len()))
        .or_else(|| parse::parse(&page));
    let Some(segments) = segments else {
        return Response::from_parts(head, Body::full(page));
    };
    let body = tree.assemble(parts, page, segments, depth);
    Response::from_parts(head, body)
}

/// Whether every text segment lies within a page of `len` bytes.
fn fits(segments: &[Segment], len: usize) -> bool {
    segments.iter().all(|s| match s {
        Segment::Text(start, end) => start <= end && *end <= len,
        Segment::Include(..) => true,
    })
}

/// A page that could not be read: its head, and a body that fails at once.
fn aborted(head: http::response::Parts, why: Aborted) -> Response<Body> {
    tracing::debug!("{why}");
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let _ = tx.try_send(Err(why));
    Response::from_parts(head, Body::Esi(rx))
}

/// The tree of a client request whose route may use ESI, made before the request's fields are
/// changed by its route.
pub(crate) fn tree(proxy: &Arc<Proxy>, parts: &Parts, peer: &Peer) -> Tree {
    Tree::new(proxy.clone(), parts, peer)
}
