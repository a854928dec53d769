//! Binding and running a server. Threads: one acceptor (accepting TCP and
//! Unix connections, serving UDP), `-t` workers each running its own
//! single-threaded event loop with its connections pinned to it (handed out
//! round-robin, like memcached's), and the store's reaper. On a TLS
//! listener the worker runs the handshake before serving the connection.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use kura_keyspace::{Keyspace, KeyspaceConfig, Login, Reloadable};
use kura_store::{Reaper, Store};
use tokio::sync::mpsc;

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::metrics::ConnGuard;
use crate::shared::Shared;
use crate::tls::{strip_notls, TlsContext};

/// How often the reaper sweeps for expired items.
const REAP_INTERVAL: Duration = Duration::from_secs(1);

/// A connection on its way to a worker.
pub(crate) enum Incoming {
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

mod sockets;
mod threads;

use sockets::{bind_tcp, bind_unix, host_port, listen, listeners, resolve};
use threads::{acceptor, worker, Listeners};
pub(crate) use threads::{place_worker, spawn_task, worker_tasks};

impl Server {
    /// Checks the settings and binds every listener.
    ///
    /// # Errors
    /// Invalid settings, or an address that cannot be bound.
    pub fn bind(config: ServerConfig) -> Result<Server, ServerError> {
        config.validate()?;
        let mut store_config = config.store_config();
        // A durable store keeps the seed that places its keys in shards, so that a restart
        // puts a full cache back in the shards it fitted (kura_log::seed).
        if let Some(dir) = &config.data_dir {
            store_config.hash_seed = Some(kura_log::load_or_create_seed(dir)?);
        }
        let store = Arc::new(Store::new(store_config));
        Server::bind_with_store(config, store)
    }

    /// Like [`Server::bind`], serving an existing store.
    ///
    /// # Errors
    /// Invalid settings, or an address that cannot be bound.
    pub fn bind_with_store(config: ServerConfig, store: Arc<Store>) -> Result<Server, ServerError> {
        config.validate()?;
        let mut bound = Vec::new();
        let mut udp = Vec::new();
        if config.unix_socket.is_none() && config.tcp {
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
        }
        if config.unix_socket.is_none() && config.udp() {
            // With -U -1 (a free port), later sockets share the first's.
            let mut port = config.udp_port;
            for entry in &config.listen {
                let (_, addr) = strip_notls(entry);
                let (host, _) = host_port(addr, port);
                for sa in resolve(&host, port)? {
                    let s = UdpSocket::bind(sa).map_err(|e| ServerError::Udp(sa, e))?;
                    s.set_nonblocking(true)?;
                    if port == 0 {
                        port = s.local_addr()?.port();
                    }
                    udp.push(s);
                }
            }
        }
        let metrics = match &config.metrics_listen {
            Some(addr) => {
                if !addr.contains(':') || addr.ends_with(']') {
                    return Err(ServerError::MetricsAddress(addr.clone()));
                }
                let sa = resolve(addr, 0)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| ServerError::MetricsNowhere(addr.clone()))?;
                let socket = bind_tcp(sa).map_err(|e| ServerError::Metrics(sa, Box::new(e)))?;
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
        // (Tables are opened once the data dir is locked: their files may
        // live in it.)
        // The flash tier, on the store still empty (its files emptied:
        // a cache, never read back).
        if let Some(flash) = config.flash_config() {
            store.attach_flash(flash).map_err(ServerError::Flash)?;
        }
        let keyspace = Keyspace::open(keyspace_config(&config)?, store)?;
        // Connections are taken only now that the data is loaded: a
        // health check that only connects does not call a loading server
        // up, and nothing queues behind a recovery that fails.
        let tcp = bound
            .into_iter()
            .map(|(socket, tls)| Ok((listen(socket, config.backlog)?, tls)))
            .collect::<std::io::Result<Vec<_>>>()?;
        let unix = match &config.unix_socket {
            Some(path) => Some((bind_unix(path, config.unix_mask)?, path.clone())),
            None => None,
        };
        let metrics = metrics
            .map(|socket| listen(socket, config.backlog))
            .transpose()?;
        let mut shared = Shared::new(config, keyspace);
        shared.listeners = listeners(&tcp, unix.as_ref(), &udp);
        shared.credentials = credentials.map(crate::reload::Reloadable::new);
        shared.tls = tls;
        let shared = Arc::new(shared);
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
    pub fn start(self) -> Result<ServerHandle, ServerError> {
        let shared = self.shared;
        let reaper = Reaper::spawn(&shared.store, REAP_INTERVAL);
        // The shared timer thread starts here, not from the first worker
        // that asks for it: a thread inherits its creator's CPUs, and a
        // worker may be pinned to one (-o worker_cpulist).
        let _ = crate::timer::thread();
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
        shared.keyspace.start()?;
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
        // Every connection is closed: the replica's thread stops and the
        // rest of the log goes to disk.
        self.shared.keyspace.close();
    }
}

/// The keyspace's settings, with the replica's login and TLS read from
/// their files.
fn keyspace_config(config: &ServerConfig) -> Result<KeyspaceConfig, ServerError> {
    let mut k = config.keyspace_config();
    if let Some(path) = &config.replica_auth_file {
        k.replication.login = Some(Reloadable::new(replica_login(
            &crate::auth::Credentials::load(path)?,
        )));
    }
    let rt = &config.replica_tls;
    if let Some(ca) = &rt.ca {
        let cert_key = rt.cert.as_deref().zip(rt.key.as_deref());
        k.replication.tls = Some(Reloadable::new(crate::tls::replica_config(ca, cert_key)?));
    }
    Ok(k)
}

/// What a replica authenticates with: the first user of its auth file.
pub(crate) fn replica_login(c: &crate::auth::Credentials) -> Option<Login> {
    c.first().map(|(user, pass)| Login {
        user: user.to_vec(),
        pass: pass.to_vec(),
    })
}
