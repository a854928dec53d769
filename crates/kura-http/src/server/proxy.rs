//! What the proxy does with one request: check it, look it up, serve it from the cache
//! (fresh, stale while refreshing, stale on error), fetch it through a flight (coalesced),
//! or pass it to the backend; then count it and log it.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::header::{AUTHORIZATION, CONTENT_LENGTH, COOKIE, HOST};
use http::request::Parts;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode, Version};
use hyper::body::Incoming;

use super::interim::Interim;
use super::{
    cache_status, client_addr, fetch, key_cookies, pass, pipe, purge, request, respond, target,
};
use crate::access_log::{AccessLog, Entry};
use crate::backend::Backend;
use crate::body::Body;
use crate::cache::{Cache, Lookup, PRIMARY_MAX};
use crate::coalesce::Flights;
use crate::compress::ClientCoding;
use crate::config::route::request_host;
use crate::config::{Config, Route};
use crate::keys::query::{key_of, key_of_origin_form, normalise_percent, stripped};
use crate::keys::{ParamCounter, QueryRules};
use crate::rules::cache_control::RequestDirectives;
use crate::rules::stale::{decide, Backend as BackendState, Decision};
use crate::rules::surrogate::SURROGATE_CONTROL;
use crate::rules::validation::conditional::has_validators;
use crate::rules::{invalidation, RequestHead};
use crate::stats::{CacheOutcome, Stats};

/// Everything a request needs, shared by all connections.
pub struct Proxy {
    /// Settings.
    pub config: Config,
    /// Stored objects (shared by the proxies a reload puts in place).
    pub cache: Arc<Cache>,
    /// Fetches in progress.
    pub flights: Arc<Flights>,
    /// The backends, in the order of `config.backends`.
    pub backends: Vec<Arc<Backend>>,
    /// Counters.
    pub stats: Arc<Stats>,
    /// Access log, when on.
    pub log: Option<Arc<AccessLog>>,
    /// Query parameter names seen.
    pub params: Arc<ParamCounter>,
    /// Pipes that may still open (`max_pipes`; kept across reloads).
    pub pipes: Arc<tokio::sync::Semaphore>,
}

impl AsRef<Cache> for Proxy {
    fn as_ref(&self) -> &Cache {
        &self.cache
    }
}

impl Proxy {
    /// The route of index `route` (0: the top-level settings).
    pub fn route(&self, route: usize) -> &Route {
        &self.config.routes[route]
    }

    /// The backend of route `route`.
    pub fn backend(&self, route: usize) -> &Arc<Backend> {
        &self.backends[self.route(route).backend]
    }

    /// The route of a request: its first matching rule's, else the top level's.
    pub(crate) fn route_of(&self, parts: &Parts) -> usize {
        if self.config.rules.is_empty() {
            return 0;
        }
        let host = request_host(
            &parts.uri,
            parts.headers.get(HOST).map(HeaderValue::as_bytes),
        );
        let path = normalise_percent(parts.uri.path());
        self.config.route_index(host.as_deref(), &path)
    }
}

/// The connection a request came on.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The client's address as kura judges it (the purge ACL, the access log): the
    /// connection's peer, the client a PROXY protocol header names, or the client behind
    /// trusted proxies' `X-Forwarded-For` (`client_addr.rs`). None on a Unix socket.
    pub addr: Option<SocketAddr>,
    /// The address appended to `X-Forwarded-For` towards the backend: the connection's peer
    /// (or the PROXY header's client), never one read from `X-Forwarded-For` itself.
    pub forwarded: Option<IpAddr>,
    /// `"http"` or `"https"`.
    pub scheme: &'static str,
    /// Where 1xx responses for it go (HTTP/1.x connections).
    pub interim: Option<Arc<Interim>>,
}

impl Peer {
    /// The peer of a TCP connection from `addr`.
    pub fn of(addr: SocketAddr, scheme: &'static str) -> Peer {
        Peer {
            addr: Some(addr),
            forwarded: Some(addr.ip()),
            scheme,
            interim: None,
        }
    }

    /// The channel for 1xx responses to `parts`' client: none for HTTP/1.0 (RFC 9110 §15.2)
    /// and HTTP/2.
    pub fn interim_for(&self, parts: &Parts) -> Option<Arc<Interim>> {
        self.interim
            .clone()
            .filter(|_| parts.version == Version::HTTP_11)
    }
}

/// Handles one request: the hyper service of every client connection.
pub async fn handle(proxy: Arc<Proxy>, request: Request<Incoming>, peer: Peer) -> Response<Body> {
    let started = Instant::now();
    let (mut parts, body) = request.into_parts();
    let trusted = &proxy.config.trusted_proxies;
    let peer = if trusted.is_empty() {
        peer
    } else {
        client_addr::behind_proxies(peer, trusted, &parts.headers)
    };
    // As the client sent it, for the log.
    let target = parts.uri.clone();
    if let Some(query) = target.query() {
        proxy.params.count_query(query);
    }
    let device = proxy.config.keys.device.as_ref();
    if let Some(device) = device {
        device.classify(&mut parts.headers);
    }
    let (mut response, outcome) = if proxy.config.esi.any {
        with_esi(&proxy, &mut parts, body, &peer).await
    } else {
        route(&proxy, &mut parts, Body::Incoming(body), &peer).await
    };
    if proxy.config.key_cookies {
        key_cookies::client_vary(response.headers_mut());
    }
    if proxy.config.response_edits {
        let edits = &proxy.route(proxy.route_of(&parts)).edits.response;
        edits.apply(response.headers_mut());
    }
    if let Some(device) = device {
        device.to_client(response.headers_mut());
    }
    proxy.stats.count(outcome, started.elapsed());
    let headers = response.headers_mut();
    headers.insert(
        HeaderName::from_static("x-cache"),
        HeaderValue::from_static(outcome.name()),
    );
    headers.remove(crate::esi::MARKER);
    if proxy.config.policy.surrogate_control {
        // For surrogates only (`rules::surrogate`), as Fastly removes it.
        headers.remove(SURROGATE_CONTROL);
    }
    if let Some(members) = &proxy.config.cache_status {
        // A hit or stale response got its member where it was served.
        if !matches!(outcome, CacheOutcome::Hit | CacheOutcome::Stale) {
            let status = response.status();
            let name = &members.name;
            cache_status::forwarded(response.headers_mut(), name, outcome, &parts.method, status);
        }
    }
    if let Some(log) = &proxy.log {
        let bytes = response
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        log.log(&Entry {
            peer: peer.addr,
            method: &parts.method,
            uri: &target,
            version: parts.version,
            headers: &parts.headers,
            status: response.status(),
            response: response.headers(),
            bytes,
            outcome,
            elapsed: started.elapsed(),
        });
    }
    response
}

/// Why a request is refused before anything else (RFC 9112 §3.2, §3.3; RFC 9110 §7.2).
fn malformed(config: &Config, parts: &Parts) -> Option<StatusCode> {
    if parts.uri.path_and_query().map_or(0, |p| p.as_str().len()) > config.max_url {
        return Some(StatusCode::URI_TOO_LONG);
    }
    let hosts = parts.headers.get_all(HOST).iter().count();
    if hosts > 1 {
        return Some(StatusCode::BAD_REQUEST);
    }
    if parts.version == Version::HTTP_11 && hosts == 0 && parts.uri.authority().is_none() {
        return Some(StatusCode::BAD_REQUEST);
    }
    if parts.uri.path_and_query().is_none() && parts.method != Method::OPTIONS {
        return Some(StatusCode::BAD_REQUEST);
    }
    None
}

/// Refuses a request with 400 before anything else reads it (counted as a bad request).
fn refuse(proxy: &Proxy, status: StatusCode) -> (Response<Body>, CacheOutcome) {
    proxy.stats.bad_requests.fetch_add(1, Ordering::Relaxed);
    (respond::synth(status, true), CacheOutcome::Synth)
}

/// The primary cache key of a request whose route normalises queries by `rules`: its
/// absolute URI, normalised (`keys::query`).
pub fn primary_key(parts: &Parts, scheme: &str, rules: &QueryRules) -> Option<Vec<u8>> {
    let host = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok());
    if let Some(key) = host.and_then(|h| key_of_origin_form(scheme, h, &parts.uri, rules)) {
        return Some(key.into_bytes());
    }
    let target = invalidation::target_uri(RequestHead::from(parts), scheme)?;
    Some(key_of(&target, rules).into_bytes())
}

/// A request whose response may be processed for ESI (`crate::esi`): the fields its fragments
/// take are read before its route changes them; a page whose route processes it is fetched
/// whole (no range, no 304: the assembled page is not the stored one).
async fn with_esi(
    proxy: &Arc<Proxy>,
    parts: &mut Parts,
    body: Incoming,
    peer: &Peer,
) -> (Response<Body>, CacheOutcome) {
    use http::header::{IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, RANGE};
    let tree = crate::esi::tree(proxy, parts, peer);
    if proxy.route(proxy.route_of(parts)).do_esi {
        for name in [RANGE, IF_RANGE, IF_NONE_MATCH, IF_MODIFIED_SINCE] {
            parts.headers.remove(name);
        }
    }
    let (mut response, mut outcome) = route(proxy, parts, Body::Incoming(body), peer).await;
    let page = proxy.route_of(parts);
    if response.status() == StatusCode::PARTIAL_CONTENT
        && crate::esi::wanted(proxy, page, response.headers())
    {
        // A range of a page its Surrogate-Control makes ESI: the whole page, assembled (RFC
        // 9110 §14.2 lets a server ignore Range).
        parts.headers.remove(RANGE);
        parts.headers.remove(IF_RANGE);
        (response, outcome) = route(proxy, parts, Body::Empty, peer).await;
    }
    let response = crate::esi::process(&tree, parts, page, response, outcome, 0).await;
    (response, outcome)
}

/// Answers a request after its checks: purge, pipe, pass, or a lookup (the fragments of an
/// ESI page come here too).
pub(crate) async fn route(
    proxy: &Arc<Proxy>,
    parts: &mut Parts,
    body: Body,
    peer: &Peer,
) -> (Response<Body>, CacheOutcome) {
    if parts.method == Method::CONNECT {
        // A reverse proxy opens no tunnels.
        return (
            respond::synth(StatusCode::METHOD_NOT_ALLOWED, false),
            CacheOutcome::Synth,
        );
    }
    if let Some(status) = malformed(&proxy.config, parts) {
        return refuse(proxy, status);
    }
    if target::settle(parts).is_err() {
        return refuse(proxy, StatusCode::BAD_REQUEST);
    }
    if purge::is_purge(parts) {
        return purge::purge(proxy, parts, peer).await;
    }
    let route = proxy.route_of(parts);
    if pipe::is_upgrade(parts) {
        return pipe::pipe(proxy, parts, peer, route).await;
    }
    let settings = proxy.route(route);
    if !settings.cookie_ignore.is_empty() {
        request::drop_ignored_cookies(&mut parts.headers, &settings.cookie_ignore);
    }
    if let Some(synthetic) = &settings.edits.synthetic {
        return (respond::synthetic(synthetic), CacheOutcome::Synth);
    }
    if !settings.edits.request.is_empty() {
        settings.edits.request.apply(&mut parts.headers);
    }
    let only_key_cookies = !settings.key_cookies.is_empty()
        && key_cookies::prepare(&mut parts.headers, &settings.key_cookies);
    let cacheable_method = parts.method == Method::GET || parts.method == Method::HEAD;
    let passed = settings.pass
        || !cacheable_method
        || (settings.pass_authorization && parts.headers.contains_key(AUTHORIZATION))
        || (settings.pass_cookie && parts.headers.contains_key(COOKIE) && !only_key_cookies);
    let key = match primary_key(parts, peer.scheme, &settings.normalize) {
        Some(key) if !passed && key.len() <= PRIMARY_MAX => key,
        _ => return pass::pass(proxy, parts, body, peer, route).await,
    };
    // Looked up: the fields that would change the response without being in its key go.
    request::strip_unkeyed(&mut parts.headers, &settings.unkeyed.strip);
    if !settings.normalize.forward_removed {
        // The backend gets the key's form of the target: removed parameters stripped.
        if let Some(uri) = stripped(&parts.uri, &settings.normalize) {
            parts.uri = uri;
        }
    }
    // A GET or HEAD body has no meaning (RFC 9110 §9.3.1): it is read and dropped (hyper
    // reads it to find the next request), never sent to the backend, as Varnish does on a
    // lookup. The backend request's framing is kura's own (`backend::frame`).
    drop(body);
    proxy.config.compression.normalise_request(parts);
    let parts = &*parts;
    let now = SystemTime::now();
    let lookup = proxy.cache.lookup_nonblocking(&key, &parts.headers).await;
    if !matches!(lookup, Lookup::Hit(_))
        && RequestDirectives::from_headers(&parts.headers).only_if_cached
    {
        // RFC 9111 §5.2.1.7: nothing stored, and the backend may not be asked.
        return (
            respond::synth(StatusCode::GATEWAY_TIMEOUT, false),
            CacheOutcome::Synth,
        );
    }
    match lookup {
        Lookup::Hit(object) => on_hit(proxy, parts, key, object, peer, route, now).await,
        Lookup::Miss => fetch::fetch(proxy, parts, key, None, peer, route, true).await,
        Lookup::HitForMiss => {
            proxy.stats.hit_for_miss.fetch_add(1, Ordering::Relaxed);
            fetch::fetch(proxy, parts, key, None, peer, route, false).await
        }
    }
}

async fn on_hit(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    key: Vec<u8>,
    object: crate::cache::object::Object,
    peer: &Peer,
    route: usize,
    now: SystemTime,
) -> (Response<Body>, CacheOutcome) {
    let policy = &proxy.route(route).policy;
    let directives = RequestDirectives::from_headers(&parts.headers);
    let validators = has_validators(&object.headers);
    let decide_with = |state| {
        decide(
            policy,
            &object.freshness,
            validators,
            &directives,
            state,
            now,
        )
    };
    let decision = decide_with(BackendState::Available);
    if !proxy.backend(route).is_healthy()
        && matches!(
            decision,
            Decision::Revalidate | Decision::Fetch | Decision::StaleWhileRevalidate
        )
    {
        // The probes say the backend is down: serve what may be served on error at once.
        match decide_with(BackendState::Failed) {
            Decision::StaleOnError | Decision::Fresh => {
                return serve_stored(proxy, parts, object, peer, route, CacheOutcome::Stale, now)
                    .await;
            }
            _ => {}
        }
    }
    match decision {
        Decision::Fresh => {
            serve_stored(proxy, parts, object, peer, route, CacheOutcome::Hit, now).await
        }
        Decision::StaleWhileRevalidate | Decision::StaleOnError => {
            if !directives.only_if_cached {
                fetch::refresh(proxy, parts, &key, &object, route);
            }
            serve_stored(proxy, parts, object, peer, route, CacheOutcome::Stale, now).await
        }
        Decision::Revalidate | Decision::Fetch => {
            fetch::fetch(proxy, parts, key, Some(object), peer, route, true).await
        }
        Decision::GatewayTimeout => (
            respond::synth(StatusCode::GATEWAY_TIMEOUT, false),
            CacheOutcome::Synth,
        ),
    }
}

/// Serves a stored object, or forwards the request when its preconditions are the origin's.
pub async fn serve_stored(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    object: crate::cache::object::Object,
    peer: &Peer,
    route: usize,
    outcome: CacheOutcome,
    now: SystemTime,
) -> (Response<Body>, CacheOutcome) {
    let coding = ClientCoding::of(parts);
    match respond::object(RequestHead::from(parts), &object, coding, now) {
        Some(mut response) => {
            let served_stored = matches!(outcome, CacheOutcome::Hit | CacheOutcome::Stale);
            if let (Some(members), true) = (&proxy.config.cache_status, served_stored) {
                cache_status::stored(response.headers_mut(), members, outcome);
            }
            (response, outcome)
        }
        None => pass::pass(proxy, parts, Body::Empty, peer, route).await,
    }
}
