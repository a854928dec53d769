//! A backend: a pool of one server or more (HTTP/1.1 over TCP or Unix sockets, or TLS with
//! HTTP/2 when offered, `server.rs`), each
//! behind a pooled keep-alive client, chosen per request by the pool's director
//! (`director.rs`); the request sent (hop-by-hop fields removed, `X-Forwarded-For` added),
//! timeouts, the classification of failures, and each server's health ([`health`]).

pub mod connect;
pub mod director;
pub mod health;
pub mod server;
pub mod state;
pub mod tls;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TRANSFER_ENCODING, VIA};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;

use crate::body::Body;
use crate::coalesce::FetchError;
use crate::config::{BackendSpec, Config, Wait};
use crate::rules::headers::connection_listed;
use director::Director;
pub use director::Pick;
pub use server::{Lease, Server, ServerTimeouts};

/// Hop-by-hop fields (RFC 9110 §7.6.1), never forwarded in either direction.
pub const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
];

/// Removes the hop-by-hop fields of `headers`, those its `Connection` names included.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in connection_listed(headers) {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// A backend: its servers and the director that chooses among them.
pub struct Backend {
    /// Its name in the configuration.
    pub name: String,
    /// Its servers, in the configuration's order.
    pub servers: Vec<Arc<Server>>,
    director: Director,
    /// The pool's (else the top-level) time between two reads of a body.
    between_bytes_timeout: Duration,
    /// Requests refused with 503 because every server had `max_connections` (Varnish's
    /// `busy`).
    pub busy: AtomicU64,
    /// The entry appended to `Via` (`1.1 NAME`, `config::Via`).
    via: HeaderValue,
    /// Its queue for requests that find every server at `max_connections`, if any.
    queue: Option<Queue>,
}

/// A pool's queue (`wait_timeout`, `wait_limit`: Varnish's backend `wait_timeout` and
/// `wait_limit`): requests that find every server full wait for a lease to end.
struct Queue {
    wait: Wait,
    /// Requests waiting now.
    waiting: AtomicUsize,
    /// Told each time a lease on one of the pool's servers ends.
    freed: Arc<Notify>,
}

impl Queue {
    /// A lease from `lease` once one of the pool's servers has room, within the queue's
    /// timeout; `None` past it, or at once when `limit` requests wait already.
    async fn lease(&self, lease: impl Fn() -> Option<Lease>) -> Option<Lease> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.wait.limit {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let deadline = tokio::time::Instant::now() + self.wait.timeout;
        let leased = async {
            loop {
                // Listening before trying: a lease that ends between the try and the wait
                // is not missed.
                let freed = self.freed.notified();
                tokio::pin!(freed);
                freed.as_mut().enable();
                if let Some(lease) = lease() {
                    return lease;
                }
                freed.await;
            }
        };
        let lease = tokio::time::timeout_at(deadline, leased).await.ok();
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        lease
    }
}

impl Backend {
    /// The backend `spec`: each server with its own timeouts, else the pool's, else those of
    /// `config`.
    pub fn new(spec: &BackendSpec, config: &Config) -> Backend {
        let pool = &spec.timeouts;
        let timeouts = |own: &crate::config::Timeouts| ServerTimeouts {
            connect: (own.connect.or(pool.connect)).unwrap_or(config.connect_timeout),
            first_byte: (own.first_byte.or(pool.first_byte)).unwrap_or(config.first_byte_timeout),
            between_bytes: (own.between_bytes.or(pool.between_bytes))
                .unwrap_or(config.between_bytes_timeout),
        };
        let queue = spec.wait.map(|wait| Queue {
            wait,
            waiting: AtomicUsize::new(0),
            freed: Arc::new(Notify::new()),
        });
        let freed = queue.as_ref().map(|q| q.freed.clone());
        Backend {
            name: spec.name.clone(),
            servers: spec
                .servers
                .iter()
                .map(|s| Arc::new(Server::new(s, timeouts(&s.timeouts), freed.clone())))
                .collect(),
            director: Director::new(spec.policy.clone(), spec.seed),
            between_bytes_timeout: pool.between_bytes.unwrap_or(config.between_bytes_timeout),
            busy: AtomicU64::new(0),
            via: config.via.entry.clone(),
            queue,
        }
    }

    /// The time allowed between two reads of a response body whose server is not known (each
    /// server has its own: [`ServerTimeouts`]).
    pub fn between_bytes_timeout(&self) -> Duration {
        self.between_bytes_timeout
    }

    /// Whether any server is believed healthy.
    pub fn is_healthy(&self) -> bool {
        self.servers.iter().any(|s| s.health.is_healthy())
    }

    /// Requests of all its servers that got no usable response.
    pub fn errors(&self) -> u64 {
        self.sum(|s| &s.health.errors)
    }

    /// Probes of all its servers that succeeded and failed.
    pub fn probes(&self) -> (u64, u64) {
        (
            self.sum(|s| &s.health.probes_ok),
            self.sum(|s| &s.health.probes_failed),
        )
    }

    fn sum(&self, field: fn(&Server) -> &AtomicU64) -> u64 {
        self.servers
            .iter()
            .map(|s| field(s).load(Ordering::Relaxed))
            .sum()
    }

    /// The URI of a request target (the first server's authority: [`Backend::send`] puts the
    /// chosen server's in).
    pub fn uri(&self, path: Option<&PathAndQuery>) -> Uri {
        self.servers[0].uri(path)
    }

    /// The hash director's key of `request` (`pick`: see [`Pick`]).
    fn key(&self, request: &Request<Body>, pick: Pick) -> Option<u64> {
        if self.servers.len() == 1 {
            return None;
        }
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", PathAndQuery::as_str);
        self.director.key(path, request.headers(), pick)
    }

    /// The server for a request of director key `key` with room for it, and its lease; when
    /// every server has `max_connections`, after a wait in the pool's queue if it has one;
    /// `None` when none had room (counted).
    async fn lease(&self, key: Option<u64>) -> Option<Lease> {
        let mut lease = self.lease_now(key);
        if let (None, Some(queue)) = (&lease, &self.queue) {
            lease = queue.lease(|| self.lease_now(key)).await;
        }
        if lease.is_none() {
            self.busy.fetch_add(1, Ordering::Relaxed);
        }
        lease
    }

    /// A lease on the first server of the director's order for `key` with room for one
    /// more request.
    fn lease_now(&self, key: Option<u64>) -> Option<Lease> {
        if let [only] = self.servers.as_slice() {
            return only.lease();
        }
        self.director
            .order(&self.servers, key)
            .into_iter()
            .find_map(|i| self.servers[i].lease())
    }

    /// Requests waiting in its queue now.
    pub fn waiting(&self) -> usize {
        self.queue
            .as_ref()
            .map_or(0, |q| q.waiting.load(Ordering::Relaxed))
    }

    /// The header fields to forward for a client request with `headers` from `client`. The
    /// framing fields are not among them: [`Backend::send`] writes its own from the body sent.
    pub fn forward_headers(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        host: Option<&HeaderValue>,
    ) -> HeaderMap {
        let mut out = headers.clone();
        strip_hop_by_hop(&mut out);
        // kura asks for no 100 Continue: hyper's client does not wait for one, and a 100 from
        // the backend is not the client's (hyper's server sends its own).
        out.remove(EXPECT);
        if let Some(host) = host {
            out.insert(HOST, host.clone());
        }
        // RFC 9110 §7.6.3: a gateway MUST send Via in the requests it forwards. This
        // instance's name in it is how a request that comes back is told (`server/loops.rs`):
        // the entries before are kept, every field's.
        let mut entries = out.get_all(VIA).iter().map(HeaderValue::as_bytes).fold(
            Vec::new(),
            |mut all, value| {
                all.extend_from_slice(value);
                all.extend_from_slice(b", ");
                all
            },
        );
        entries.extend_from_slice(self.via.as_bytes());
        if let Ok(via) = HeaderValue::from_bytes(&entries) {
            out.insert(VIA, via);
        }
        if let Some(ip) = client {
            let forwarded = HeaderName::from_static("x-forwarded-for");
            let value = match out.get(&forwarded).and_then(|v| v.to_str().ok()) {
                Some(before) => format!("{before}, {ip}"),
                None => ip.to_string(),
            };
            if let Ok(value) = HeaderValue::try_from(value) {
                out.insert(forwarded, value);
            }
        }
        out
    }

    /// Sends `request` to the server the director chooses (`pick`: see [`Pick`]), waiting at
    /// most the first-byte timeout for the response head. Its framing is written here from its
    /// body, whatever its fields said ([`frame`]); a response whose framing cannot be trusted
    /// is refused ([`response_framing`]). The response carries the server's [`Lease`] in its
    /// extensions.
    ///
    /// # Errors
    /// [`FetchError`] when the backend cannot be reached (every server busy included), times
    /// out or answers garbage.
    pub async fn send(
        &self,
        mut request: Request<Body>,
        pick: Pick,
    ) -> Result<Response<Incoming>, FetchError> {
        request.headers_mut().remove(CONNECTION);
        frame(&mut request);
        let key = self.key(&request, pick);
        let lease = self.lease(key).await.ok_or(FetchError::Unreachable)?;
        let server = lease.server().clone();
        let uri = server.uri_for(request.uri().path_and_query(), request.headers().get(HOST));
        *request.uri_mut() = uri;
        let head = request.method() == http::Method::HEAD;
        let sent =
            tokio::time::timeout(server.timeouts.first_byte, server.client.request(request)).await;
        let result = match sent {
            Err(_) => Err(FetchError::Timeout),
            Ok(Err(error)) if error.is_connect() => Err(FetchError::Unreachable),
            Ok(Err(error)) => {
                tracing::debug!("backend error: {error:?}");
                Err(FetchError::Garbage)
            }
            Ok(Ok(mut response)) => {
                let bodyless = head || matches!(response.status().as_u16(), 204 | 304);
                response_framing(response.headers_mut(), bodyless).map(|()| {
                    response.extensions_mut().insert(lease);
                    response
                })
            }
        };
        server.health.record(result.is_ok());
        result
    }

    /// Sends an upgrade `request` on a connection of its own (never the pool's: after a `101`
    /// it carries the other protocol) to the server the director chooses for the client,
    /// waiting at most the first-byte timeout for the answer. A `101` answer's connection is
    /// taken with `hyper::upgrade::on`.
    ///
    /// # Errors
    /// [`FetchError`] when the backend cannot be reached, times out or answers garbage.
    pub async fn send_upgrade(
        &self,
        mut request: Request<Body>,
    ) -> Result<Response<Incoming>, FetchError> {
        use tower_service::Service as _;
        frame(&mut request);
        let key = self.key(&request, Pick::Client);
        let lease = self.lease(key).await.ok_or(FetchError::Unreachable)?;
        let server = lease.server();
        *request.uri_mut() = server.uri(request.uri().path_and_query());
        let mut connector = server.connector.clone();
        let io = connector
            .call(request.uri().clone())
            .await
            .map_err(|_| FetchError::Unreachable)?;
        let exchange = async {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|_| FetchError::Garbage)?;
            tokio::spawn(async move {
                if let Err(error) = connection.with_upgrades().await {
                    tracing::debug!("pipe backend connection: {error}");
                }
            });
            // origin-form on a connection of its own.
            let path = request.uri().path_and_query().cloned();
            *request.uri_mut() = path.map_or(Uri::from_static("/"), Uri::from);
            sender
                .send_request(request)
                .await
                .map_err(|_| FetchError::Garbage)
        };
        match tokio::time::timeout(server.timeouts.first_byte, exchange).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout),
        }
    }
}

/// Writes the framing fields of a request to a backend from the body it carries (RFC 9112
/// §6): none when it has no body (a GET or HEAD, or a `Content-Length: 0` for a method whose
/// body has a meaning), `Content-Length` when its length is known, `Transfer-Encoding:
/// chunked` otherwise. The client's own fields never reach the backend: a length that is not
/// the body's would make the backend read the next request on the connection as this one's
/// body (issue 37, finding 1).
pub fn frame(request: &mut Request<Body>) {
    use http_body::Body as _;
    let body = request.body();
    let length = if body.is_end_stream() {
        Some(0)
    } else {
        body.size_hint().exact()
    };
    let sends_length = !matches!(
        *request.method(),
        http::Method::GET
            | http::Method::HEAD
            | http::Method::OPTIONS
            | http::Method::DELETE
            | http::Method::TRACE
    );
    let headers = request.headers_mut();
    headers.remove(CONTENT_LENGTH);
    headers.remove(TRANSFER_ENCODING);
    match length {
        Some(0) if !sends_length => {}
        Some(n) => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
        }
        None => {
            headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        }
    }
}

/// Checks a backend response's framing (RFC 9112 §6.3): with `Transfer-Encoding`, a
/// `Content-Length` beside it is removed (the body is framed by the coding, and a length kept
/// beside a decoded body of another length truncates it for the client: issue 37, finding 5);
/// a `Transfer-Encoding` that does not end in `chunked` on a response with a body (not
/// `bodyless`: to HEAD, or 204 or 304) is refused (502), as nginx does: the body would reach
/// the client still transfer-coded.
///
/// # Errors
/// [`FetchError::Garbage`] for a transfer coding other than chunked.
pub fn response_framing(headers: &mut HeaderMap, bodyless: bool) -> Result<(), FetchError> {
    let Some(last) = headers.get_all(TRANSFER_ENCODING).iter().next_back() else {
        return Ok(());
    };
    let chunked = last
        .to_str()
        .ok()
        .and_then(|v| v.rsplit(',').next())
        .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"));
    if !chunked && !bodyless {
        return Err(FetchError::Garbage);
    }
    headers.remove(CONTENT_LENGTH);
    Ok(())
}
