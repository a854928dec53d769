//! A backend: one HTTP/1.1 origin (TCP or a Unix socket, `connect.rs`) behind a pooled
//! keep-alive client (hyper-util's), the request sent to it (hop-by-hop fields removed, `X-Forwarded-For` added), timeouts, the
//! classification of failures, and its health ([`health`]).

pub mod connect;
pub mod health;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TRANSFER_ENCODING, VIA};
use http::uri::{PathAndQuery, Scheme};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::body::Body;
use crate::coalesce::FetchError;
use crate::config::{BackendAddr, BackendSpec, Config};
use crate::rules::headers::connection_listed;
use connect::Connector;

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

/// A backend and the client that talks to it.
pub struct Backend {
    /// Its name in the configuration.
    pub name: String,
    client: Client<Connector, Body>,
    /// The client's connector, for connections of their own (pipes).
    connector: Connector,
    scheme: Scheme,
    authority: http::uri::Authority,
    first_byte_timeout: Duration,
    between_bytes_timeout: Duration,
    /// The backend's health.
    pub health: health::Health,
}

impl Backend {
    /// The backend `spec` with the timeouts of `config`.
    pub fn new(spec: &BackendSpec, config: &Config) -> Backend {
        let (connector, origin) = match &spec.addr {
            BackendAddr::Tcp(uri) => {
                let mut http = HttpConnector::new();
                http.set_connect_timeout(Some(config.connect_timeout));
                http.set_nodelay(true);
                (Connector::Tcp(http), uri.clone())
            }
            BackendAddr::Unix(path) => (
                Connector::Unix(Arc::new(path.clone()), config.connect_timeout),
                // The pool's key; the connector ignores it.
                Uri::from_static("http://localhost"),
            ),
        };
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(256)
            .build(connector.clone());
        let scheme = origin.scheme().cloned().unwrap_or(Scheme::HTTP);
        let authority = origin
            .authority()
            .cloned()
            .unwrap_or_else(|| http::uri::Authority::from_static("127.0.0.1"));
        Backend {
            name: spec.name.clone(),
            client,
            connector,
            scheme,
            authority,
            first_byte_timeout: config.first_byte_timeout,
            between_bytes_timeout: config.between_bytes_timeout,
            health: health::Health::new(),
        }
    }

    /// The time allowed between two reads of a response body.
    pub fn between_bytes_timeout(&self) -> Duration {
        self.between_bytes_timeout
    }

    /// The backend's URI for a client's request target.
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
        // RFC 9110 §7.6.3: a gateway MUST send Via in the requests it forwards.
        let via = match out.get(VIA).and_then(|v| v.to_str().ok()) {
            Some(before) => format!("{before}, 1.1 kura"),
            None => "1.1 kura".to_owned(),
        };
        if let Ok(via) = HeaderValue::try_from(via) {
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

    /// Sends `request`, waiting at most the first-byte timeout for the response head. Its
    /// framing is written here from its body, whatever its fields said ([`frame`]); a response
    /// whose framing cannot be trusted is refused ([`response_framing`]).
    ///
    /// # Errors
    /// [`FetchError`] when the backend cannot be reached, times out or answers garbage.
    pub async fn send(&self, mut request: Request<Body>) -> Result<Response<Incoming>, FetchError> {
        request.headers_mut().remove(CONNECTION);
        frame(&mut request);
        let head = request.method() == http::Method::HEAD;
        let sent =
            tokio::time::timeout(self.first_byte_timeout, self.client.request(request)).await;
        let result = match sent {
            Err(_) => Err(FetchError::Timeout),
            Ok(Err(error)) if error.is_connect() => Err(FetchError::Unreachable),
            Ok(Err(error)) => {
                tracing::debug!("backend error: {error:?}");
                Err(FetchError::Garbage)
            }
            Ok(Ok(mut response)) => {
                let bodyless = head || matches!(response.status().as_u16(), 204 | 304);
                response_framing(response.headers_mut(), bodyless).map(|()| response)
            }
        };
        self.health.record(result.is_ok());
        result
    }
}

impl Backend {
    /// Sends an upgrade `request` on a connection of its own (never the pool's: after a `101`
    /// it carries the other protocol), waiting at most the first-byte timeout for the answer.
    /// A `101` answer's connection is taken with `hyper::upgrade::on`.
    ///
    /// # Errors
    /// [`FetchError`] when the backend cannot be reached, times out or answers garbage.
    pub async fn send_upgrade(
        &self,
        mut request: Request<Body>,
    ) -> Result<Response<Incoming>, FetchError> {
        use tower_service::Service as _;
        frame(&mut request);
        let mut connector = self.connector.clone();
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
        match tokio::time::timeout(self.first_byte_timeout, exchange).await {
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
