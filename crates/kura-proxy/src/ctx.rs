//! What every connection shares: the current router (replaced whole by a
//! reload, on SIGHUP or `POST /reload`; a request keeps the one it started
//! with), the configuration it was built from, and the counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use crate::config::Config;
use crate::counters::Stats;
use crate::router::Router;

pub struct Ctx {
    router: RwLock<Arc<Router>>,
    /// The configuration in use, read again by [`Ctx::reload`].
    config: Mutex<Config>,
    /// Its file and that file's MD5 when it was read (admin keys).
    file: Mutex<(String, String)>,
    /// Set once a stop begins (`/readyz` answers 503 from then on).
    stopping: AtomicBool,
    pub stats: Arc<Stats>,
    pub started: Instant,
    pub threads: usize,
    /// What clients may hold (`[limits]`; a reload replaces them, and
    /// each connection takes the new ones when it sees the reload).
    limits: Mutex<crate::config::Limits>,
    /// The listener's certificate when `[tls]` is enabled (read again by
    /// a reload and `refresh_certs`).
    pub tls: Option<kura_tls::ServerTls>,
    /// Reloads done: the workers preconnect after each.
    reloads: AtomicU64,
}

impl Ctx {
    /// # Errors
    /// `[tls]`'s files cannot be used.
    pub fn new(router: Router, config: Config) -> Result<Ctx, kura_tls::TlsError> {
        let tls = config
            .net
            .tls
            .as_ref()
            .map(kura_tls::ServerTls::load)
            .transpose()?;
        Ok(Ctx {
            tls,
            reloads: AtomicU64::new(0),
            router: RwLock::new(Arc::new(router)),
            threads: config.threads,
            limits: Mutex::new(config.limits),
            file: Mutex::new(file_of(&config)),
            config: Mutex::new(config),
            stopping: AtomicBool::new(false),
            stats: Arc::new(Stats::default()),
            started: Instant::now(),
        })
    }

    /// Reads the configuration again (its file and the same flags) and
    /// puts the router built from it in place; on any error the one in use
    /// stays, and the error says why.
    ///
    /// # Errors
    /// The file cannot be read or is not a valid configuration.
    pub fn reload(&self) -> Result<(), String> {
        let mut config = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let new = config.reload().map_err(|e| e.to_string())?;
        if new.listen != config.listen {
            tracing::warn!("reload: the listen address changes only on restart");
        }
        if new.net.tls.is_some() != self.tls.is_some() {
            tracing::warn!("reload: TLS for clients is turned on or off only on restart");
        }
        if (&new.net.backend_tls_file, &new.net.backend_auth)
            != (&config.net.backend_tls_file, &config.net.backend_auth)
        {
            tracing::info!("reload: [backend_tls] or [backend_auth] changed: every backend's connections are made again");
        }
        if let (Some(tls), Some(t)) = (&self.tls, &new.net.tls) {
            tls.reload(t).map_err(|e| format!("[tls]: {e}"))?;
        }
        let router = Router::build(&new, Some(&self.router())).map_err(|e| e.to_string())?;
        router.start();
        self.set_router(router);
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = file_of(&new);
        *self.limits.lock().unwrap_or_else(|e| e.into_inner()) = new.limits;
        *config = new;
        // Release: a connection that sees this count sees the limits.
        self.reloads.fetch_add(1, Ordering::Release);
        tracing::info!("configuration reloaded");
        Ok(())
    }

    /// Reads the listener's certificate files again (`refresh_certs`).
    ///
    /// # Errors
    /// memcached's wording without TLS; else which file failed (the
    /// certificate in use stays).
    pub fn refresh_certs(&self) -> Result<(), String> {
        let Some(tls) = &self.tls else {
            return Err("TLS not enabled".into());
        };
        let config = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = &config.net.tls else {
            return Err("TLS not enabled".into());
        };
        tls.reload(t)
            .map_err(|e| e.to_string().replace(['\r', '\n'], " "))
    }

    /// Reloads done so far.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Acquire)
    }

    /// What clients may hold now (`[limits]`).
    pub fn limits(&self) -> crate::config::Limits {
        *self.limits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// With `preconnect`, opens this worker's connections to every
    /// backend that has none (a worker calls it).
    pub fn preconnect(&self) {
        let on = self
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .net
            .preconnect;
        if on {
            for n in &self.router().nodes {
                n.preconnect();
            }
        }
    }

    /// The configuration's file (empty without one) and its MD5 in hex as
    /// it was when read.
    pub fn file(&self) -> (String, String) {
        self.file.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A stop has begun.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    pub fn router(&self) -> Arc<Router> {
        self.router
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_router(&self, r: Router) {
        *self.router.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(r);
    }
}

/// A configuration's file and the MD5 of what it holds now.
fn file_of(config: &Config) -> (String, String) {
    match &config.file {
        Some(path) => {
            let bytes = std::fs::read(path).unwrap_or_default();
            (path.display().to_string(), kura_ring::hash::md5_hex(&bytes))
        }
        None => (String::new(), String::new()),
    }
}
