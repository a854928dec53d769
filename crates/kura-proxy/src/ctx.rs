//! What every connection shares: the current router (replaced whole by a
//! reload, on SIGHUP or `POST /reload`; a request keeps the one it started
//! with), the configuration it was built from, and the counters.

use std::sync::atomic::{AtomicBool, Ordering};
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
    /// What clients may hold (read at start: a reload keeps these).
    pub limits: crate::config::Limits,
}

impl Ctx {
    pub fn new(router: Router, config: Config) -> Ctx {
        Ctx {
            router: RwLock::new(Arc::new(router)),
            threads: config.threads,
            limits: config.limits,
            file: Mutex::new(file_of(&config)),
            config: Mutex::new(config),
            stopping: AtomicBool::new(false),
            stats: Arc::new(Stats::default()),
            started: Instant::now(),
        }
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
        let router = Router::build(&new, Some(&self.router())).map_err(|e| e.to_string())?;
        router.start();
        self.set_router(router);
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = file_of(&new);
        *config = new;
        tracing::info!("configuration reloaded");
        Ok(())
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
