//! The server: listeners (plain HTTP/1.1 or HTTP/2 with prior knowledge, TLS with HTTP/2 or
//! HTTP/1.1 by ALPN, Unix sockets), one hyper
//! connection per client with keep-alive, the admin listener (`/stats`, `/metrics`), the
//! health probe task, and shutdown.

mod admin;
mod ban_admin;
mod cache_status;
mod client_addr;
mod fetch;
mod fill;
mod framing;
mod h2c;
pub mod interim;
mod invalidation;
mod key_cookies;
pub mod live;
mod loops;
mod pass;
mod pipe;
mod proxied;
pub mod proxy;
mod purge;
mod request;
mod respond;
mod target;
mod tls;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::access_log::AccessLog;
use crate::bans::{lurker, Bans};
use crate::cache::disk::Disk;
use crate::cache::Cache;
use crate::coalesce::Flights;
use crate::config::Config;
use crate::stats::Stats;
use crate::wire::HeadLimits;
use framing::Guard;
use live::Live;
use proxy::{Peer, Proxy};

/// Time a client has to send a request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A running proxy: its bound addresses, and a handle to stop it.
pub struct Server {
    /// Plain HTTP addresses, in the order of the configuration.
    pub http: Vec<SocketAddr>,
    /// TLS addresses.
    pub https: Vec<SocketAddr>,
    /// PROXY protocol addresses (`listen_proxy`), in the order of the configuration.
    pub proxied: Vec<SocketAddr>,
    /// The admin address.
    pub admin: Option<SocketAddr>,
    /// The proxy in place, which a reload replaces.
    pub live: Arc<Live>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Server {
    /// Binds every listener of `config` and starts serving on the current tokio runtime.
    ///
    /// # Errors
    /// A listener cannot be bound, a certificate or the access log cannot be read.
    pub async fn start(config: Config) -> Result<Server, StartError> {
        let log = match &config.access_log {
            Some(path) => Some(Arc::new(AccessLog::open(
                path,
                config.access_log_format.clone(),
            )?)),
            None => None,
        };
        let backends = live::backends(&config);
        let shards = kura_store::default_shards(config.threads);
        // Each shard holds its share of the memory: an object larger than a quarter of it
        // would evict most of the shard to fit.
        let mut config = config;
        config.max_object = config.max_object.min(config.memory / shards / 4);
        let stats = Arc::new(Stats::default());
        stats
            .threads
            .store(config.threads as u64, Ordering::Relaxed);
        let cache = match &config.disk_cache {
            Some(disk) => {
                let tags = config.bans.tag_headers.clone();
                let (disk, bans, reopened) = Disk::open(disk, config.threads, tags)?;
                Cache::with_disk(config.memory, shards, bans, disk, reopened)?.0
            }
            None => Cache::with_bans(
                config.memory,
                shards,
                Bans::new(config.bans.tag_headers.clone()),
            ),
        };
        let proxy = Proxy {
            cache: Arc::new(cache),
            flights: Arc::new(Flights::new(config.max_in_flight, config.max_object)),
            backends,
            stats,
            log,
            params: Arc::new(crate::keys::ParamCounter::new(config.keys.count_params)),
            pipes: Arc::new(Semaphore::new(config.max_pipes)),
            config,
        };
        let (stop, stopped) = watch::channel(false);
        let live = Arc::new(Live::new(proxy, stopped.clone()));
        let proxy = live.current();
        let permits = Arc::new(Semaphore::new(proxy.config.max_connections));
        let mut tasks = JoinSet::new();
        let mut http = Vec::new();
        for addr in &proxy.config.listen {
            let listener = TcpListener::bind(addr).await?;
            http.push(listener.local_addr()?);
            tasks.spawn(accept(
                live.clone(),
                listener,
                Kind::Plain,
                permits.clone(),
                stopped.clone(),
            ));
        }
        let mut proxied = Vec::new();
        for addr in &proxy.config.listen_proxy {
            let listener = TcpListener::bind(addr).await?;
            proxied.push(listener.local_addr()?);
            tasks.spawn(accept(
                live.clone(),
                listener,
                Kind::Proxied,
                permits.clone(),
                stopped.clone(),
            ));
        }
        for path in &proxy.config.listen_unix {
            let listener = tokio::net::UnixListener::bind(path)?;
            tasks.spawn(accept_unix(
                live.clone(),
                listener,
                path.clone(),
                permits.clone(),
                stopped.clone(),
            ));
        }
        let mut https = Vec::new();
        for tls in &proxy.config.tls {
            let acceptor = tls::acceptor(&tls.cert, &tls.key)?;
            let listener = TcpListener::bind(tls.listen).await?;
            https.push(listener.local_addr()?);
            tasks.spawn(accept(
                live.clone(),
                listener,
                Kind::Tls(acceptor, tls.proxy_protocol),
                permits.clone(),
                stopped.clone(),
            ));
        }
        let admin = match proxy.config.admin_listen {
            Some(addr) => {
                let listener = TcpListener::bind(addr).await?;
                let bound = listener.local_addr()?;
                tasks.spawn(admin::serve(live.clone(), listener, stopped.clone()));
                Some(bound)
            }
            None => None,
        };
        tasks.spawn(lurker::run(
            proxy.clone(),
            proxy.config.bans.lurker,
            stopped.clone(),
        ));
        Ok(Server {
            http,
            https,
            proxied,
            admin,
            live,
            stop,
            tasks,
        })
    }

    /// The proxy in place.
    pub fn proxy(&self) -> Arc<Proxy> {
        self.live.current()
    }

    /// Stops accepting, lets connections finish their requests, and returns when they have.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A socket or file.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// TLS settings.
    #[error("TLS: {0}")]
    Tls(String),
}

/// What a TCP listener's connections begin with.
#[derive(Clone)]
enum Kind {
    /// HTTP/1.1, or HTTP/2 with prior knowledge.
    Plain,
    /// A PROXY protocol header, then as `Plain` (`proxied.rs`).
    Proxied,
    /// A TLS handshake, then HTTP/2 or HTTP/1.1 by ALPN; true: a PROXY protocol header
    /// before the handshake.
    Tls(tokio_rustls::TlsAcceptor, bool),
}

async fn accept(
    live: Arc<Live>,
    listener: TcpListener,
    kind: Kind,
    permits: Arc<Semaphore>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        let Some(permit) = permit(&permits, &mut stopped).await else {
            break;
        };
        let (stream, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!("accept: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let proxy = live.current();
        proxy.stats.connections.fetch_add(1, Ordering::Relaxed);
        let live = live.clone();
        let kind = kind.clone();
        let stopped = stopped.clone();
        connections.spawn(async move {
            let _permit = permit;
            let mut stream = stream;
            match kind {
                Kind::Plain => {
                    let peer = Peer::of(addr, "http");
                    serve_plain(live, stream, peer, BytesMut::new(), stopped).await;
                }
                Kind::Proxied => {
                    let Some((client, read)) = proxy_header(&proxy, &mut stream, addr).await else {
                        return;
                    };
                    let peer = Peer::of(client, "http");
                    serve_plain(live, stream, peer, read, stopped).await;
                }
                Kind::Tls(acceptor, false) => {
                    tls::serve(live, &acceptor, stream, addr, stopped).await;
                }
                Kind::Tls(acceptor, true) => {
                    let Some((client, read)) = proxy_header(&proxy, &mut stream, addr).await else {
                        return;
                    };
                    let stream = proxied::Replayed::new(read, stream);
                    tls::serve(live, &acceptor, stream, client, stopped).await;
                }
            }
        });
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

/// The client a connection's PROXY header names and the bytes read after it; `None` when it
/// was refused (answered and counted).
async fn proxy_header(
    proxy: &Proxy,
    stream: &mut tokio::net::TcpStream,
    addr: SocketAddr,
) -> Option<(SocketAddr, BytesMut)> {
    let trusted = &proxy.config.trusted_proxies;
    let header = proxied::read_header(stream, addr, trusted, HEADER_READ_TIMEOUT).await;
    if header.is_err() {
        proxy
            .stats
            .proxy_protocol_refused
            .fetch_add(1, Ordering::Relaxed);
    }
    header.ok()
}

/// A connection permit (`max_connections`), or `None` once the server stops.
async fn permit(
    permits: &Arc<Semaphore>,
    stopped: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    tokio::select! {
        permit = permits.clone().acquire_owned() => permit.ok(),
        _ = stopped.changed() => None,
    }
}

async fn accept_unix(
    live: Arc<Live>,
    listener: tokio::net::UnixListener,
    path: std::path::PathBuf,
    permits: Arc<Semaphore>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        let Some(permit) = permit(&permits, &mut stopped).await else {
            break;
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!("accept: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped.changed() => break,
        };
        live.current()
            .stats
            .connections
            .fetch_add(1, Ordering::Relaxed);
        let peer = Peer {
            addr: None,
            forwarded: None,
            scheme: "http",
            interim: None,
        };
        let serving = serve_plain(live.clone(), stream, peer, BytesMut::new(), stopped.clone());
        connections.spawn(async move {
            let _permit = permit;
            serving.await;
        });
        while connections.try_join_next().is_some() {}
    }
    // The socket file is ours: a restart can bind it again.
    let _ = std::fs::remove_file(&path);
    while connections.join_next().await.is_some() {}
}

/// Serves a plain (cleartext) connection: HTTP/2 when it opens with the HTTP/2 preface (prior
/// knowledge), else HTTP/1.1 behind the framing guard.
async fn serve_plain<S>(
    live: Arc<Live>,
    mut stream: S,
    mut peer: Peer,
    read: BytesMut,
    mut stopped: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // A connection that has sent nothing yet is closed at once when the server stops.
    let sniffed = tokio::select! {
        sniffed = tokio::time::timeout(HEADER_READ_TIMEOUT, h2c::sniff(&mut stream, read)) => sniffed,
        _ = stopped.changed() => return,
    };
    let Ok(Ok((h2, read))) = sniffed else {
        return;
    };
    let proxy = live.current();
    // The guard and hyper are given the same limits, read once (a reload may change them).
    let limits = head_limits(&proxy.config);
    if h2 {
        let stream = Guard::passthrough(stream, read, proxy.stats.clone());
        serve(live, TokioIo::new(stream), peer, true, limits, stopped).await;
    } else {
        let mut guarded = Guard::with_input(stream, read, limits, proxy.stats.clone());
        peer.interim = Some(guarded.interim());
        serve(live, TokioIo::new(guarded), peer, false, limits, stopped).await;
    }
}

/// The request head limits of the guard and of hyper's HTTP/1 server alike.
fn head_limits(config: &Config) -> HeadLimits {
    HeadLimits {
        max_head: config.max_header,
        max_headers: config.max_headers,
    }
}

async fn serve<I>(
    live: Arc<Live>,
    io: I,
    peer: Peer,
    h2: bool,
    limits: HeadLimits,
    mut stopped: watch::Receiver<bool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let HeadLimits {
        max_head: max_header,
        max_headers,
    } = limits;
    // Each request takes the proxy in place as it begins (a reload replaces it).
    let service = service_fn(move |request| {
        let proxy = live.current();
        let peer = peer.clone();
        async move { Ok::<_, std::convert::Infallible>(proxy::handle(proxy, request, peer).await) }
    });
    // The request head is bounded by max_header_size (431 past it); the write buffer is left
    // to hyper, which sends bodies by vectored writes without copying them.
    macro_rules! drive {
        ($connection:expr) => {{
            let connection = $connection;
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!("connection: {error}");
                    }
                }
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        }};
    }
    if h2 {
        drive!(
            hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .max_header_list_size(u32::try_from(max_header).unwrap_or(u32::MAX))
                .max_concurrent_streams(256)
                .serve_connection(io, service)
        );
    } else {
        drive!(hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_header_size(max_header)
            .max_headers(max_headers)
            .writev(true)
            .keep_alive(true)
            .serve_connection(io, service)
            .with_upgrades());
    }
}
