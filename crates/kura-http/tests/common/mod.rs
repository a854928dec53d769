//! A test backend (a small hyper server whose answers a closure decides, recording every
//! request it gets), the proxy on loopback, and a client.

#![allow(dead_code)]

pub mod lenient;
pub mod wire;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kura_http::{Config, Server};
use parking_lot::Mutex;
use tokio::net::TcpListener;

/// A request as the backend saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: http::Method,
    pub uri: http::Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
}

type Handler = dyn Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync;

enum Listener {
    Tcp(TcpListener),
    Unix(tokio::net::UnixListener),
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for S {}

impl Listener {
    async fn accept(&self) -> Option<Box<dyn Stream>> {
        Some(match self {
            Listener::Tcp(l) => Box::new(l.accept().await.ok()?.0),
            Listener::Unix(l) => Box::new(l.accept().await.ok()?.0),
        })
    }
}

/// The test backend.
pub struct Backend {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Backend {
    /// A backend answering with `handler`, after `delay`.
    pub async fn start(
        delay: Duration,
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Backend {
        Self::start_on("127.0.0.1:0".parse().unwrap(), delay, handler).await
    }

    pub async fn start_on(
        addr: SocketAddr,
        delay: Duration,
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Backend {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        Self::serve(Listener::Tcp(listener), addr, delay, handler)
    }

    /// A backend on a Unix socket at `path` (its `addr` is meaningless).
    pub fn start_unix(
        path: &std::path::Path,
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Backend {
        let listener = tokio::net::UnixListener::bind(path).unwrap();
        let addr = "0.0.0.0:0".parse().unwrap();
        Self::serve(Listener::Unix(listener), addr, Duration::ZERO, handler)
    }

    fn serve(
        listener: Listener,
        addr: SocketAddr,
        delay: Duration,
        handler: impl Fn(&Seen) -> Response<Full<Bytes>> + Send + Sync + 'static,
    ) -> Backend {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let log = seen.clone();
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let open = connections.clone();
        let task = tokio::spawn(async move {
            loop {
                let Some(stream) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let log = log.clone();
                let connection = tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let handler = handler.clone();
                        let log = log.clone();
                        async move {
                            let (parts, body) = request.into_parts();
                            let body = body
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let seen = Seen {
                                method: parts.method,
                                uri: parts.uri,
                                headers: parts.headers,
                                body,
                            };
                            log.lock().push(seen.clone());
                            if !delay.is_zero() {
                                tokio::time::sleep(delay).await;
                            }
                            Ok::<_, Infallible>(handler(&seen))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                open.lock().push(connection.abort_handle());
            }
        });
        Backend {
            addr,
            seen,
            task,
            connections,
        }
    }

    /// Requests seen so far.
    pub fn count(&self) -> usize {
        self.seen.lock().len()
    }

    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .last()
            .cloned()
            .expect("the backend saw a request")
    }

    /// Stops: the listener and every connection close.
    pub fn stop(&self) {
        self.task.abort();
        for connection in self.connections.lock().drain(..) {
            connection.abort();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A response with `status`, header pairs and `body`.
pub fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        response.headers_mut().append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    response
}

/// The configuration of a proxy in front of `backend` on an ephemeral port, with the given
/// extra TOML lines.
pub fn config(backend: SocketAddr, extra: &str) -> Config {
    Config::from_toml(&format!(
        "backend = \"http://{backend}\"\nlisten = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\nthreads = 2\nmemory_mb = 16\n{extra}"
    ))
    .unwrap()
}

pub async fn proxy(backend: SocketAddr, extra: &str) -> Server {
    Server::start(config(backend, extra)).await.unwrap()
}

/// A response as the client got it.
#[derive(Debug)]
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }
    pub fn cache(&self) -> &str {
        self.header("x-cache")
    }
    pub fn age(&self) -> u64 {
        self.header("age").parse().expect("an Age")
    }
}

pub type TestClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

pub fn client() -> TestClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A request of `method` for `path` with header pairs to the proxy at `addr`, no body.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Request<Full<Bytes>> {
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Full::new(Bytes::new())).unwrap()
}

/// Sends `method` `path` with header pairs to the proxy at `addr`.
pub async fn send(
    client: &TestClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Got {
    let response = client
        .request(request(addr, method, path, headers))
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    Got {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

pub async fn get(client: &TestClient, addr: SocketAddr, path: &str) -> Got {
    send(client, addr, "GET", path, &[]).await
}

/// The proxy's `/stats` as JSON.
pub async fn stats(server: &Server) -> serde_json::Value {
    let got = get(&client(), server.admin.unwrap(), "/stats").await;
    serde_json::from_slice(&got.body).unwrap()
}

/// Waits (bounded) until `check` holds, polling.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// A new directory under the system's temporary directory.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("kura-http-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
