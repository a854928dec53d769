//! Binding and running a server. Threads: one acceptor (accepting TCP and
//! Unix connections, serving UDP), `-t` workers each running its own
//! single-threaded event loop with its connections pinned to it (handed out
//! round-robin, like memcached's), and the store's reaper. On a TLS
//! listener the worker runs the handshake before serving the connection.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use kura_store::{Reaper, Store};
use socket2::{Domain, Socket, Type};
use tokio::sync::mpsc;

use crate::config::ServerConfig;
use crate::conn;
use crate::metrics::ConnGuard;
use crate::shared::{RunState, Shared};
use crate::tls::{strip_notls, TlsContext};
use crate::udp;

/// How often the reaper sweeps for expired items.
const REAP_INTERVAL: Duration = Duration::from_secs(1);

/// A connection on its way to a worker.
enum Incoming {
    Tcp(std::net::TcpStream, ConnGuard),
    /// From a TLS listener: handshake first.
    Tls(std::net::TcpStream, ConnGuard),
    Unix(std::os::unix::net::UnixStream, ConnGuard),
}

/// A bound server, not yet serving.
pub struct Server {
    shared: Arc<Shared>,
    /// Each listener, and whether it speaks TLS.
    tcp: Vec<(TcpListener, bool)>,
    unix: Option<(UnixListener, PathBuf)>,
    udp: Vec<UdpSocket>,
    /// The Prometheus endpoint (`--metrics-listen`).
    metrics: Option<TcpListener>,
}

/// Splits `host` or `host:port` (IPv6 as `[::1]:port` or bare `::1`).
fn host_port(addr: &str, default_port: u16) -> (String, u16) {
    if let Some(rest) = addr.strip_prefix('[') {
        if let Some((host, port)) = rest.split_once("]:") {
            return (host.to_string(), port.parse().unwrap_or(default_port));
        }
        return (rest.trim_end_matches(']').to_string(), default_port);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            (host.to_string(), port.parse().unwrap_or(default_port))
        }
        _ => (addr.to_string(), default_port),
    }
}

fn resolve(addr: &str, port: u16) -> anyhow::Result<Vec<SocketAddr>> {
    let (host, port) = host_port(addr, port);
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve listen address {addr}"))?
        .collect();
    if addrs.is_empty() {
        bail!("listen address {addr} resolves to nothing");
    }
    Ok(addrs)
}

/// Binds a TCP address without listening yet: the address is taken (a
/// port in use fails the start at once, `-p 0` gets its port), but a
/// client's connect is refused until [`listen`], after recovery.
fn bind_tcp(addr: SocketAddr) -> anyhow::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket
        .bind(&addr.into())
        .with_context(|| format!("failed to listen on TCP {addr}"))?;
    Ok(socket)
}

/// Starts listening on a socket from [`bind_tcp`].
fn listen(socket: Socket, backlog: u32) -> anyhow::Result<TcpListener> {
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Binds and listens on the Unix socket at `path`.
fn bind_unix(path: &std::path::Path, mask: u32) -> anyhow::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)
        .with_context(|| format!("failed to listen on unix socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mask))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The listening sockets as `stats conns` shows them.
fn listeners(
    tcp: &[(TcpListener, bool)],
    unix: Option<&(UnixListener, PathBuf)>,
    udp: &[UdpSocket],
) -> Vec<crate::metrics::Listener> {
    use std::os::fd::AsRawFd;
    let entry = |fd: i32, addr: String, udp: bool| crate::metrics::Listener {
        id: fd as u64,
        addr,
        udp,
    };
    let mut all = Vec::new();
    for (l, _) in tcp {
        if let Ok(a) = l.local_addr() {
            all.push(entry(l.as_raw_fd(), format!("tcp:{a}"), false));
        }
    }
    if let Some((l, path)) = unix {
        all.push(entry(
            l.as_raw_fd(),
            format!("unix:{}", path.display()),
            false,
        ));
    }
    for s in udp {
        if let Ok(a) = s.local_addr() {
            all.push(entry(s.as_raw_fd(), format!("udp:{a}"), true));
        }
    }
    all
}

impl Server {
    /// Checks the settings and binds every listener.
    ///
    /// # Errors
    /// Invalid settings, or an address that cannot be bound.
    pub fn bind(config: ServerConfig) -> anyhow::Result<Server> {
        config.validate()?;
        let store = Arc::new(Store::new(config.store_config()));
        Server::bind_with_store(config, store)
    }

    /// Like [`Server::bind`], serving an existing store.
    ///
    /// # Errors
    /// Invalid settings, or an address that cannot be bound.
    pub fn bind_with_store(config: ServerConfig, store: Arc<Store>) -> anyhow::Result<Server> {
        config.validate()?;
        let mut bound = Vec::new();
        let mut udp = Vec::new();
        if config.unix_socket.is_none() {
            let mut port = config.port;
            for entry in &config.listen {
                let (notls, addr) = strip_notls(entry);
                for sa in resolve(addr, port)? {
                    let socket = bind_tcp(sa)?;
                    // With port 0, later listeners share the first's port.
                    if port == 0 {
                        port = socket.local_addr()?.as_socket().map_or(0, |a| a.port());
                    }
                    bound.push((socket, config.tls.enabled && !notls));
                }
            }
            if config.udp_port != 0 {
                for entry in &config.listen {
                    let (_, addr) = strip_notls(entry);
                    let (host, _) = host_port(addr, config.udp_port);
                    for sa in resolve(&host, config.udp_port)? {
                        let s = UdpSocket::bind(sa)
                            .with_context(|| format!("failed to listen on UDP {sa}"))?;
                        s.set_nonblocking(true)?;
                        udp.push(s);
                    }
                }
            }
        }
        let metrics = match &config.metrics_listen {
            Some(addr) => {
                if !addr.contains(':') || addr.ends_with(']') {
                    bail!("--metrics-listen {addr}: give host:port, e.g. 127.0.0.1:9150");
                }
                let sa = resolve(addr, 0)?
                    .into_iter()
                    .next()
                    .with_context(|| format!("metrics address {addr} resolves to nothing"))?;
                let socket = bind_tcp(sa)
                    .with_context(|| format!("failed to listen for metrics on {sa}"))?;
                Some(socket)
            }
            None => None,
        };
        let credentials = config
            .credentials_file()
            .map(|p| crate::auth::Credentials::load(&p))
            .transpose()?;
        let tls = if config.tls.enabled {
            Some(TlsContext::load(&config.tls, store.now())?)
        } else {
            None
        };
        // Recovery comes last, once every listener is bound and every file
        // read: a server that cannot start should not have loaded the data.
        let durable = config
            .durable_config()
            .map(|d| crate::durable::Durable::open(d, &store))
            .transpose()?
            .map(Arc::new);
        let mut tables = crate::shared::Tables::default();
        for spec in &config.tables {
            let path = spec.path.clone().or_else(|| {
                config
                    .data_dir
                    .as_ref()
                    .map(|d| d.join(format!("{}.ktbl", spec.name)))
            });
            if let Some(dir) = path.as_ref().and_then(|p| p.parent()) {
                std::fs::create_dir_all(dir).ok();
            }
            let durability = match config.fsync_policy()? {
                kura_log::FsyncPolicy::Always => kura_table::Durability::Always,
                kura_log::FsyncPolicy::EverySec => kura_table::Durability::EverySec,
                kura_log::FsyncPolicy::No => kura_table::Durability::No,
            };
            let table = kura_table::Table::open(
                path.as_deref(),
                kura_table::TableOptions {
                    width: spec.width,
                    max: spec.max,
                    durability,
                },
            )
            .with_context(|| format!("table {}", spec.name))?;
            tables.add(&spec.name, table);
        }
        // Connections are taken only now that the data is loaded: a
        // health check that only connects does not call a loading server
        // up, and nothing queues behind a recovery that fails.
        let tcp = bound
            .into_iter()
            .map(|(socket, tls)| Ok((listen(socket, config.backlog)?, tls)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let unix = match &config.unix_socket {
            Some(path) => Some((bind_unix(path, config.unix_mask)?, path.clone())),
            None => None,
        };
        let metrics = metrics
            .map(|socket| listen(socket, config.backlog))
            .transpose()?;
        let mut shared = Shared::new(config, store);
        shared.listeners = listeners(&tcp, unix.as_ref(), &udp);
        if let Some(path) = &shared.config.replica_auth_file {
            shared.replication.auth = Some(crate::auth::Credentials::load(path)?);
        }
        shared.tables = tables;
        shared.credentials = credentials;
        shared.tls = tls;
        shared.durable = durable;
        let shared = Arc::new(shared);
        if let Some(d) = &shared.durable {
            let weak = Arc::downgrade(&shared);
            d.on_failure(move || {
                if let Some(s) = weak.upgrade() {
                    s.shutdown();
                }
            });
        }
        Ok(Server {
            shared,
            tcp,
            unix,
            udp,
            metrics,
        })
    }

    /// The first TCP address served.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.tcp.first().and_then(|(l, _)| l.local_addr().ok())
    }

    /// Every TCP address served, each with whether it speaks TLS.
    pub fn tcp_addrs(&self) -> Vec<(SocketAddr, bool)> {
        self.tcp
            .iter()
            .filter_map(|(l, tls)| Some((l.local_addr().ok()?, *tls)))
            .collect()
    }

    /// The first UDP address served.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp.first().and_then(|s| s.local_addr().ok())
    }

    /// The address of the Prometheus endpoint, if any.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Writes memcached's port file (see [`crate::port_file`]): every TCP
    /// then UDP port bound. Nothing is written for a Unix socket server, as
    /// in memcached.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write_port_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        if self.unix.is_some() {
            return Ok(());
        }
        let tcp: Vec<SocketAddr> = self.tcp_addrs().into_iter().map(|(a, _)| a).collect();
        let udp: Vec<SocketAddr> = self
            .udp
            .iter()
            .filter_map(|s| s.local_addr().ok())
            .collect();
        crate::port_file::write(path, &crate::port_file::contents(&tcp, &udp))
    }

    /// The shared state (store, settings, counters).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Starts the threads and serves until [`ServerHandle::shutdown`].
    ///
    /// # Errors
    /// A thread or event loop that cannot be created.
    pub fn start(self) -> anyhow::Result<ServerHandle> {
        let shared = self.shared;
        let reaper = Reaper::spawn(&shared.store, REAP_INTERVAL);
        let mut threads = Vec::new();
        let mut senders = Vec::new();
        for i in 0..shared.config.threads {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.push(tx);
            let shared = shared.clone();
            let t = std::thread::Builder::new()
                .name(format!("kura-worker-{i}"))
                .spawn(move || worker(i, shared, rx))?;
            threads.push(t);
        }
        let acceptor = {
            let shared = shared.clone();
            let listeners = Listeners {
                tcp: self.tcp,
                unix: self.unix,
                udp: self.udp,
                metrics: self.metrics,
            };
            std::thread::Builder::new()
                .name("kura-acceptor".into())
                .spawn(move || acceptor(shared, listeners, senders))?
        };
        threads.push(acceptor);
        if let Some(primary) = shared.config.replica_of.clone() {
            threads.push(crate::replication::replica::start(shared.clone(), primary)?);
        }
        Ok(ServerHandle {
            shared,
            threads,
            _reaper: reaper,
        })
    }
}

/// A running server.
pub struct ServerHandle {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    _reaper: Reaper,
}

impl ServerHandle {
    /// The shared state (store, settings, counters).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops accepting, lets connections finish what they have read, and
    /// closes them.
    pub fn shutdown(&self) {
        self.shared.shutdown();
    }

    /// Waits until every thread has finished (after a shutdown).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
        // Every connection is closed: the rest of the log goes to disk.
        if let Some(d) = &self.shared.durable {
            d.close();
        }
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

fn worker(index: usize, shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Incoming>) {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("worker {index}: cannot start event loop: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let stats = shared.thread_stats[index].clone();
    local.block_on(&rt, async move {
        while let Some(incoming) = rx.recv().await {
            let shared = shared.clone();
            let stats = stats.clone();
            tokio::task::spawn_local(async move {
                match incoming {
                    Incoming::Tcp(s, guard) => {
                        let _ = s.set_nodelay(true);
                        if let Ok(s) = tokio::net::TcpStream::from_std(s) {
                            conn::serve(s, &shared, &stats, guard).await;
                        }
                    }
                    Incoming::Tls(s, guard) => {
                        let _ = s.set_nodelay(true);
                        if let (Some(tls), Ok(s)) =
                            (&shared.tls, tokio::net::TcpStream::from_std(s))
                        {
                            if let Some(s) = tls.accept(s, &shared, &guard.info.addr).await {
                                conn::serve(s, &shared, &stats, guard).await;
                            }
                        }
                    }
                    Incoming::Unix(s, guard) => {
                        if let Ok(s) = tokio::net::UnixStream::from_std(s) {
                            conn::serve(s, &shared, &stats, guard).await;
                        }
                    }
                }
                shared.counters.curr.fetch_sub(1, Ordering::Relaxed);
            });
        }
    });
    // The acceptor is gone; let the open connections finish.
    rt.block_on(local);
}

/// Hands out connections round-robin and enforces `-c`.
struct Dispatch {
    shared: Arc<Shared>,
    senders: Vec<mpsc::UnboundedSender<Incoming>>,
    next: usize,
}

impl Dispatch {
    /// Admits a connection, or refuses it as memcached does when at the limit.
    fn admit(
        &mut self,
        id: u64,
        peer: String,
        local: String,
        reject: impl FnOnce(),
    ) -> Option<ConnGuard> {
        let c = &self.shared.counters;
        if c.curr.load(Ordering::Relaxed) >= self.shared.config.max_connections as u64 {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            reject();
            return None;
        }
        c.curr.fetch_add(1, Ordering::Relaxed);
        c.total.fetch_add(1, Ordering::Relaxed);
        Some(
            self.shared
                .conns
                .register(id, peer, local, self.shared.store.now()),
        )
    }

    fn send(&mut self, incoming: Incoming) {
        let i = self.next % self.senders.len();
        self.next = self.next.wrapping_add(1);
        if self.senders[i].send(incoming).is_err() {
            self.shared.counters.curr.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A listening socket the acceptor takes connections from.
trait Accept {
    type Stream: std::os::fd::AsRawFd;
    /// The next connection, as a blocking-mode-agnostic std stream, and the
    /// peer address for `stats conns` (None: use the listener's).
    async fn next(&self) -> std::io::Result<(Self::Stream, Option<String>)>;
    fn incoming(stream: Self::Stream, guard: ConnGuard) -> Incoming;
    /// Tells a refused client why, as memcached does.
    fn refuse(stream: &Self::Stream);
}

impl Accept for tokio::net::TcpListener {
    type Stream = std::net::TcpStream;
    async fn next(&self) -> std::io::Result<(Self::Stream, Option<String>)> {
        let (s, peer) = self.accept().await?;
        Ok((s.into_std()?, Some(format!("tcp:{peer}"))))
    }
    fn incoming(stream: Self::Stream, guard: ConnGuard) -> Incoming {
        Incoming::Tcp(stream, guard)
    }
    fn refuse(mut stream: &Self::Stream) {
        use std::io::Write;
        let _ = stream.write(kura_proto::reply::TOO_MANY_CONNECTIONS);
    }
}

/// A TCP listener whose connections speak TLS (`-Z`).
struct TlsListener(tokio::net::TcpListener);

impl Accept for TlsListener {
    type Stream = std::net::TcpStream;
    async fn next(&self) -> std::io::Result<(Self::Stream, Option<String>)> {
        self.0.next().await
    }
    fn incoming(stream: Self::Stream, guard: ConnGuard) -> Incoming {
        Incoming::Tls(stream, guard)
    }
    /// Closes without a word: plain text would garble a TLS client.
    fn refuse(_: &Self::Stream) {}
}

impl Accept for tokio::net::UnixListener {
    type Stream = std::os::unix::net::UnixStream;
    async fn next(&self) -> std::io::Result<(Self::Stream, Option<String>)> {
        let (s, _) = self.accept().await?;
        Ok((s.into_std()?, None))
    }
    fn incoming(stream: Self::Stream, guard: ConnGuard) -> Incoming {
        Incoming::Unix(stream, guard)
    }
    fn refuse(mut stream: &Self::Stream) {
        use std::io::Write;
        let _ = stream.write(kura_proto::reply::TOO_MANY_CONNECTIONS);
    }
}

/// Accepts connections until the server stops, handing each to a worker.
async fn accept_loop<L: Accept>(
    listener: L,
    local_addr: String,
    dispatch: std::rc::Rc<std::cell::RefCell<Dispatch>>,
    shared: Arc<Shared>,
) {
    use std::os::fd::AsRawFd;
    let mut rx = shared.watch();
    loop {
        let accepted = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => break,
            r = listener.next() => r,
        };
        match accepted {
            Ok((stream, peer)) => {
                let id = stream.as_raw_fd() as u64;
                let peer = peer.unwrap_or_else(|| local_addr.clone());
                let mut d = dispatch.borrow_mut();
                if let Some(guard) = d.admit(id, peer, local_addr.clone(), || L::refuse(&stream)) {
                    d.send(L::incoming(stream, guard));
                }
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// What the acceptor thread serves.
struct Listeners {
    tcp: Vec<(TcpListener, bool)>,
    unix: Option<(UnixListener, PathBuf)>,
    udp: Vec<UdpSocket>,
    metrics: Option<TcpListener>,
}

fn acceptor(
    shared: Arc<Shared>,
    listeners: Listeners,
    senders: Vec<mpsc::UnboundedSender<Incoming>>,
) {
    let Listeners {
        tcp,
        unix,
        udp,
        metrics,
    } = listeners;
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("acceptor: cannot start event loop: {e}");
            shared.shutdown();
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let unix_path = unix.as_ref().map(|(_, p)| p.clone());
    local.block_on(&rt, async move {
        let dispatch = std::rc::Rc::new(std::cell::RefCell::new(Dispatch {
            shared: shared.clone(),
            senders,
            next: 0,
        }));
        if let Some(l) = metrics.and_then(|l| tokio::net::TcpListener::from_std(l).ok()) {
            tokio::task::spawn_local(crate::prometheus::serve(l, shared.clone()));
        }
        for sock in udp {
            if let Ok(sock) = tokio::net::UdpSocket::from_std(sock) {
                let stats = shared.thread_stats[shared.config.threads].clone();
                tokio::task::spawn_local(udp::serve(sock, shared.clone(), stats));
            }
        }
        for (l, tls) in tcp {
            if let Ok(l) = tokio::net::TcpListener::from_std(l) {
                let local_addr = l
                    .local_addr()
                    .map(|a| format!("tcp:{a}"))
                    .unwrap_or_default();
                let (d, sh) = (dispatch.clone(), shared.clone());
                if tls {
                    tokio::task::spawn_local(accept_loop(TlsListener(l), local_addr, d, sh));
                } else {
                    tokio::task::spawn_local(accept_loop(l, local_addr, d, sh));
                }
            }
        }
        if let Some((l, path)) = unix {
            if let Ok(l) = tokio::net::UnixListener::from_std(l) {
                let local_addr = format!("unix:{}", path.display());
                tokio::task::spawn_local(accept_loop(
                    l,
                    local_addr,
                    dispatch.clone(),
                    shared.clone(),
                ));
            }
        }
        let mut rx = shared.watch();
        let _ = rx.wait_for(|s| *s == RunState::Stopping).await;
        // Dropping the dispatcher closes the workers' queues.
        drop(dispatch);
    });
    drop(local);
    if let Some(p) = unix_path {
        let _ = std::fs::remove_file(p);
    }
}
