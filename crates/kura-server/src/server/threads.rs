//! The server's threads: the workers' event loops (each with its
//! connections pinned to it) and the acceptor (accept loops for every
//! listener, UDP, the Prometheus endpoint).

use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::Incoming;
use crate::conn;
use crate::metrics::{ConnGuard, ThreadStats};
use crate::shared::{RunState, Shared};
use crate::stop::StopSignal;
use crate::udp;

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Runs worker `index`: the readiness loop where the settings allow it
/// (conn/direct/), else a task per connection.
pub(super) fn worker(index: usize, shared: Arc<Shared>, rx: mpsc::UnboundedReceiver<Incoming>) {
    place_worker(&shared, index);
    if crate::conn::direct::enabled(&shared) {
        crate::conn::direct::run(index, shared, rx);
    } else {
        worker_tasks(index, shared, rx);
    }
}

/// Gives the calling thread of worker `index` its scheduler slice and, if
/// asked, its CPU (kura-sched).
pub(crate) fn place_worker(shared: &Shared, index: usize) {
    if shared.config.worker_slice_us > 0 {
        if let Err(e) = kura_sched::set_slice(shared.config.worker_slice_us) {
            tracing::info!("worker {index}: the kernel kept its time slice: {e}");
        }
    }
    let cpus = &shared.config.worker_cpulist;
    if !cpus.is_empty() {
        let cpu = cpus[index % cpus.len()];
        if let Err(e) = kura_sched::pin_to(cpu) {
            tracing::warn!("worker {index}: not pinned to CPU {cpu}: {e}");
        }
    }
}

/// A worker serving every connection in a task of its own, on one
/// current-thread event loop.
pub(crate) fn worker_tasks(
    index: usize,
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Incoming>,
) {
    let rt = match crate::timer::worker_runtime(shared.config.idle_timeout > 0) {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("worker {index}: cannot start event loop: {e}");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let stats = shared.thread_stats[index].clone();
    // The worker hears the server's stop signal for all its connections.
    let stop = Rc::new(StopSignal::default());
    local.spawn_local({
        let (stop, mut rx) = (stop.clone(), shared.watch());
        async move {
            let _ = rx.wait_for(|s| *s == RunState::Stopping).await;
            stop.stop();
        }
    });
    // Connections arrive in a task of their own, not in the future the
    // event loop runs until done: that one is polled at every wake-up of
    // the loop, whichever task it is for.
    local.spawn_local(async move {
        while let Some(incoming) = rx.recv().await {
            spawn_task(incoming, &shared, &stats, &stop);
        }
    });
    // Until the acceptor is gone (it drops the sending end at the stop) and
    // every connection has finished.
    rt.block_on(local);
}

/// Serves a connection in a task of its own.
pub(crate) fn spawn_task(
    incoming: Incoming,
    shared: &Arc<Shared>,
    stats: &Arc<ThreadStats>,
    stop: &Rc<StopSignal>,
) {
    let (shared, stats, stop) = (shared.clone(), stats.clone(), stop.clone());
    tokio::task::spawn_local(async move {
        match incoming {
            Incoming::Tcp(s, guard) => {
                let _ = s.set_nodelay(true);
                if let Ok(s) = tokio::net::TcpStream::from_std(s) {
                    conn::serve(s, &shared, &stats, &stop, guard, None).await;
                }
            }
            Incoming::Tls(s, guard) => {
                let _ = s.set_nodelay(true);
                if let (Some(tls), Ok(s)) = (&shared.tls, tokio::net::TcpStream::from_std(s)) {
                    if let Some(s) = tls.accept(s, &shared, &guard.info.addr).await {
                        conn::serve(s, &shared, &stats, &stop, guard, None).await;
                    }
                }
            }
            Incoming::Unix(s, guard) => {
                if let Ok(s) = tokio::net::UnixStream::from_std(s) {
                    conn::serve(s, &shared, &stats, &stop, guard, None).await;
                }
            }
        }
        shared.counters.curr.fetch_sub(1, Ordering::Relaxed);
    });
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
        let hub = &self.shared.inspect.watchers;
        if hub.wants(kura_proto::WatchKinds::CONNEVENTS) {
            hub.log(kura_proto::WatchKinds::CONNEVENTS, |o| {
                crate::inspect::watch::conn_event(o, &peer, id, None)
            });
        }
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
pub(super) struct Listeners {
    pub(super) tcp: Vec<(TcpListener, bool)>,
    pub(super) unix: Option<(UnixListener, PathBuf)>,
    pub(super) udp: Vec<UdpSocket>,
    pub(super) metrics: Option<TcpListener>,
}

pub(super) fn acceptor(
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
