//! The configuration in use, and reloading it while the server serves (SIGHUP, `POST /reload`
//! on the admin listener).
//!
//! A reload reads the file again (with the same flags) into a new [`Proxy`] that shares the
//! old one's cache, fetches in flight, counters and parameter counts, and puts it in place:
//! each request takes the proxy in place when it begins and keeps it to its end (a fetch keeps
//! the settings it began with), so objects stored before are judged by the new rules at their
//! next lookup. The backends are new ones (new pools and health probes; the old probes stop)
//! and the access log's file is opened again (what logrotate's `postrotate` wants; SIGUSR1
//! does only that). What a listener or
//! the cache's size depends on (listen addresses, TLS listeners, the admin address, memory,
//! the disk tier, threads, max_connections) changes only on restart: a reload that changes it
//! says so and applies the rest. A file that cannot be read or is not valid leaves everything
//! as it was.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::proxy::Proxy;
use super::StartError;
use crate::access_log::AccessLog;
use crate::backend::{health, Backend};
use crate::config::BackendSpec;
use crate::config::{Config, TlsListener};

/// The proxy in place, and what a reload replaces.
pub struct Live {
    /// Read by every request: an `ArcSwap`, whose loads share no lock.
    proxy: ArcSwap<Proxy>,
    /// Tells the health probes of the backends in use to stop.
    probes: Mutex<watch::Sender<bool>>,
    /// The server's stop, which ends the probes too.
    stopped: watch::Receiver<bool>,
    /// Serialises reloads.
    reloading: Mutex<()>,
}

impl Live {
    /// `proxy` in place, its probes started (on the current tokio runtime).
    pub(super) fn new(proxy: Proxy, stopped: watch::Receiver<bool>) -> Live {
        let proxy = Arc::new(proxy);
        let probes = start_probes(&proxy, stopped.clone());
        Live {
            proxy: ArcSwap::new(proxy),
            probes: Mutex::new(probes),
            stopped,
            reloading: Mutex::new(()),
        }
    }

    /// The proxy in place (a request keeps the one it began with).
    pub fn current(&self) -> Arc<Proxy> {
        self.proxy.load_full()
    }

    /// Opens the access log's file again (SIGUSR1: logrotate), after the lines queued so far.
    pub fn reopen_log(&self) {
        if let Some(log) = &self.current().log {
            log.reopen();
        }
    }

    /// Reads the configuration again and puts it in place; on an error the one in use
    /// stays. `Ok` holds what changes only on restart, if anything did.
    ///
    /// # Errors
    /// The file cannot be read or is not valid, or the access log cannot be opened.
    pub fn reload(&self) -> Result<Vec<&'static str>, String> {
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.current();
        let config = Config::load(&old.config.args).map_err(|e| e.to_string())?;
        let unchanged = restart_only(&old.config, &config);
        let next = Arc::new(next(&old, config).map_err(|e| e.to_string())?);
        let probes = start_probes(&next, self.stopped.clone());
        let old_probes = std::mem::replace(
            &mut *self.probes.lock().unwrap_or_else(|e| e.into_inner()),
            probes,
        );
        let _ = old_probes.send(true);
        self.proxy.store(next);
        for what in &unchanged {
            tracing::warn!("reload: {what} changes only on restart; the one in use stays");
        }
        tracing::info!("configuration reloaded");
        Ok(unchanged)
    }
}

/// The proxy of `config` after `old`: the same cache, flights, counters and parameter counts;
/// new backends and access log. What changes only on restart is kept from `old`.
fn next(old: &Proxy, mut config: Config) -> Result<Proxy, StartError> {
    let was = &old.config;
    config.listen.clone_from(&was.listen);
    config.listen_unix.clone_from(&was.listen_unix);
    config.listen_proxy.clone_from(&was.listen_proxy);
    config.tls.clone_from(&was.tls);
    config.admin_listen = was.admin_listen;
    config.memory = was.memory;
    config.disk_cache.clone_from(&was.disk_cache);
    config.threads = was.threads;
    config.max_connections = was.max_connections;
    config.max_pipes = was.max_pipes;
    config.via = config.via.clone().keeping(&was.via);
    let shards = kura_store::default_shards(config.threads);
    config.max_object = config.max_object.min(config.memory / shards / 4);
    // The same file in the same format: the writer stays (no line lost or reordered) and
    // opens the path again after the lines queued so far (logrotate's rename, then SIGHUP).
    let log = match (&config.access_log, &old.log) {
        (Some(path), Some(log)) if log.same(path, &config.access_log_format) => {
            log.reopen();
            Some(log.clone())
        }
        (Some(path), _) => Some(Arc::new(AccessLog::open(
            path,
            config.access_log_format.clone(),
        )?)),
        (None, _) => None,
    };
    Ok(Proxy {
        cache: old.cache.clone(),
        flights: old.flights.clone(),
        backends: backends(&config),
        stats: old.stats.clone(),
        log,
        params: old.params.clone(),
        pipes: old.pipes.clone(),
        config,
    })
}

/// The backends of `config`, in its order.
pub(super) fn backends(config: &Config) -> Vec<Arc<Backend>> {
    config
        .backends
        .iter()
        .map(|spec| Arc::new(Backend::new(&with_probe(spec, config), config)))
        .collect()
}

/// `spec` with the top-level `[probe]` for its servers that have none of their own.
fn with_probe(spec: &BackendSpec, config: &Config) -> BackendSpec {
    let mut spec = spec.clone();
    for server in &mut spec.servers {
        if server.probe.is_none() {
            server.probe.clone_from(&config.probe);
        }
    }
    spec
}

/// Starts a health probe for each server of `proxy`'s backends that has one (its own, its
/// pool's, else the top-level `[probe]`); the sender stops them.
fn start_probes(proxy: &Proxy, server_stopped: watch::Receiver<bool>) -> watch::Sender<bool> {
    let (stop, stopped) = watch::channel(false);
    for server in proxy.backends.iter().flat_map(|b| &b.servers) {
        let Some(probe) = server.probe.clone() else {
            continue;
        };
        let server = server.clone();
        let mut stopped = stopped.clone();
        let mut server_stopped = server_stopped.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = health::run(server, probe) => {}
                _ = stopped.changed() => {}
                _ = server_stopped.changed() => {}
            }
        });
    }
    stop
}

/// The settings that differ between `old` and `new` but change only on restart.
fn restart_only(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    if old.listen != new.listen
        || old.listen_unix != new.listen_unix
        || old.listen_proxy != new.listen_proxy
    {
        out.push("the listen addresses");
    }
    let same_tls = |a: &TlsListener, b: &TlsListener| {
        a.listen == b.listen
            && a.cert == b.cert
            && a.key == b.key
            && a.proxy_protocol == b.proxy_protocol
    };
    if old.tls.len() != new.tls.len() || old.tls.iter().zip(&new.tls).any(|(a, b)| !same_tls(a, b))
    {
        out.push("the TLS listeners");
    }
    if old.admin_listen != new.admin_listen {
        out.push("admin_listen");
    }
    if old.memory != new.memory {
        out.push("memory_mb");
    }
    if old.disk_cache != new.disk_cache {
        out.push("disk_cache");
    }
    if old.threads != new.threads {
        out.push("threads");
    }
    if old.max_pipes != new.max_pipes {
        out.push("max_pipes");
    }
    if old.max_connections != new.max_connections {
        out.push("max_connections");
    }
    out
}
