//! What every connection shares: the current router (replaced whole on
//! SIGHUP; a request keeps the one it started with) and the counters.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use crate::router::Router;
use crate::stats::Stats;

pub struct Ctx {
    router: RwLock<Arc<Router>>,
    pub stats: Arc<Stats>,
    pub started: Instant,
    pub threads: usize,
}

impl Ctx {
    pub fn new(router: Router, threads: usize) -> Ctx {
        Ctx {
            router: RwLock::new(Arc::new(router)),
            stats: Arc::new(Stats::default()),
            started: Instant::now(),
            threads,
        }
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
