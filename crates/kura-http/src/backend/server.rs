//! One server of a backend's pool: its keep-alive client (hyper-util's pool, TCP, TLS with
//! HTTP/2 when the server offers it, or a Unix socket), its health, and its connection limit (`max_connections`: a request holds a
//! [`Lease`] from the moment a server is chosen until its response body is read or dropped).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::connect::Connector;
use super::health::Health;
use super::tls::TlsTarget;
use crate::body::Body;
use crate::config::{BackendAddr, Probe, ServerSpec};

/// A server's timeouts as it runs them: its own, else its pool's, else the top-level ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerTimeouts {
    /// Connecting (with TLS, the handshake too).
    pub connect: Duration,
    /// Until the response head.
    pub first_byte: Duration,
    /// Between two reads of the response body.
    pub between_bytes: Duration,
}

/// A server and the client that talks to it.
pub struct Server {
    /// Its address as configured (`host:port`, or `unix:/path`): its name in stats.
    pub name: String,
    pub(super) client: Client<Connector, Body>,
    /// The client's connector, for connections of their own (pipes): with TLS, one that
    /// offers HTTP/1.1 only.
    pub(super) connector: Connector,
    scheme: Scheme,
    authority: Authority,
    /// Its health.
    pub health: Health,
    /// Its share for the random and hash policies.
    pub weight: u32,
    /// Its probe, if any.
    pub probe: Option<Probe>,
    /// Requests at once (`max_connections`), and the permits for them.
    limit: Option<(usize, Arc<Semaphore>)>,
    /// Times it was passed over or refused because it had `max_connections` requests.
    pub busy: AtomicU64,
    /// Its identity for the hash policy: a hash of its name, so that the order of the servers
    /// in the file does not move keys.
    pub(super) id: u64,
    /// Its pool's queue, told when a lease ends (with `wait_timeout`).
    freed: Option<Arc<Notify>>,
    /// Its timeouts.
    pub timeouts: ServerTimeouts,
}

impl Server {
    /// The server of `spec` with `timeouts`; `freed` is told when a lease ends (its pool's
    /// queue).
    pub fn new(spec: &ServerSpec, timeouts: ServerTimeouts, freed: Option<Arc<Notify>>) -> Server {
        let connect_timeout = timeouts.connect;
        // Pipes speak HTTP/1.1 first: their TLS offers no h2.
        let mut pipe = None;
        let (connector, origin, name) = match &spec.addr {
            BackendAddr::Tcp(uri) => {
                let mut http = HttpConnector::new();
                http.set_connect_timeout(Some(connect_timeout));
                http.set_nodelay(true);
                let name = uri.authority().map_or_else(String::new, |a| a.to_string());
                let connector = match &spec.tls {
                    Some(tls) => {
                        http.enforce_http(false);
                        let (pooled, piped) = (
                            TlsTarget::new(tls, uri, true),
                            TlsTarget::new(tls, uri, false),
                        );
                        pipe = Some(Connector::Tls(http.clone(), piped, connect_timeout));
                        Connector::Tls(http, pooled, connect_timeout)
                    }
                    None => Connector::Tcp(http),
                };
                (connector, uri.clone(), name)
            }
            BackendAddr::Unix(path) => (
                Connector::Unix(Arc::new(path.clone()), connect_timeout),
                // The pool's key; the connector ignores it.
                Uri::from_static("http://localhost"),
                format!("unix:{}", path.display()),
            ),
        };
        let idle = spec.max_connections.unwrap_or(256).min(256);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(idle)
            .build(connector.clone());
        let connector = pipe.unwrap_or(connector);
        let scheme = origin.scheme().cloned().unwrap_or(Scheme::HTTP);
        let authority = origin
            .authority()
            .cloned()
            .unwrap_or_else(|| Authority::from_static("127.0.0.1"));
        let initial = spec.probe.as_ref().map_or(1, |p| p.initial);
        Server {
            id: super::director::hash_bytes(name.as_bytes()),
            name,
            client,
            connector,
            scheme,
            authority,
            health: Health::new(initial, spec.probe.as_ref()),
            weight: spec.weight,
            probe: spec.probe.clone(),
            limit: spec
                .max_connections
                .map(|max| (max, Arc::new(Semaphore::new(max)))),
            busy: AtomicU64::new(0),
            freed,
            timeouts,
        }
    }

    /// The server's URI for a request target.
    pub fn uri(&self, path: Option<&PathAndQuery>) -> Uri {
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(
            path.cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        );
        Uri::from_parts(parts).unwrap_or_else(|_| Uri::from_static("/"))
    }

    /// The URI for a request target with the `Host` field `host`: for a TLS server, whose
    /// connector ignores the URI's authority, the host's, so that an HTTP/2 request's
    /// `:authority` names the site as `Host` does in HTTP/1.1 (connections are pooled per host).
    pub fn uri_for(&self, path: Option<&PathAndQuery>, host: Option<&http::HeaderValue>) -> Uri {
        let uri = self.uri(path);
        if !matches!(self.connector, Connector::Tls(..)) {
            return uri;
        }
        let Some(authority) = host.and_then(|h| Authority::try_from(h.as_bytes()).ok()) else {
            return uri;
        };
        let mut parts = uri.into_parts();
        parts.authority = Some(authority);
        Uri::from_parts(parts).unwrap_or_else(|_| self.uri(path))
    }

    /// Requests it has at the moment (counted only with `max_connections`).
    pub fn in_use(&self) -> usize {
        self.limit
            .as_ref()
            .map_or(0, |(max, permits)| max - permits.available_permits())
    }

    /// Its `max_connections`, if any.
    pub fn max_connections(&self) -> Option<usize> {
        self.limit.as_ref().map(|(max, _)| *max)
    }

    /// A lease on this server for one request, `None` when it has `max_connections` already.
    pub(super) fn lease(self: &Arc<Self>) -> Option<Lease> {
        let permit = match &self.limit {
            None => None,
            Some((_, permits)) => match permits.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    self.busy.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
            },
        };
        Some(Lease(Arc::new(LeaseInner {
            server: self.clone(),
            _permit: permit,
        })))
    }
}

/// A request's hold on the server it was sent to: in the response's extensions, and moved
/// into the body that carries the response on, so that the server's connection counts as in
/// use until the body is read or dropped.
#[derive(Clone)]
pub struct Lease(Arc<LeaseInner>);

struct LeaseInner {
    server: Arc<Server>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for LeaseInner {
    fn drop(&mut self) {
        // The permit first, so that the request told finds the room.
        if self._permit.take().is_some() {
            if let Some(freed) = &self.server.freed {
                freed.notify_one();
            }
        }
    }
}

impl Lease {
    /// The server.
    pub fn server(&self) -> &Arc<Server> {
        &self.0.server
    }

    /// The lease a backend response carries.
    pub fn of(extensions: &http::Extensions) -> Option<&Lease> {
        extensions.get::<Lease>()
    }

    /// Counts an error of the response's body (cut short, timed out) against its server.
    pub fn body_failed(&self) {
        self.0.server.health.errors.fetch_add(1, Ordering::Relaxed);
    }
}
