//! The backend's health: errors counted on every request, and, when probes are configured,
//! a probe task that marks the backend sick after `threshold` consecutive failed probes and
//! healthy again after one success. A sick backend is not asked for objects that may be served
//! stale (they are served stale at once, `stale::Backend::Failed`); anything else still goes
//! to it, so a wrong verdict costs at most a stale page, never an error page.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use http::{Method, Request};

use super::Backend;
use crate::body::Body;
use crate::config::Probe;

/// What is known of the backend's health.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    failed_in_a_row: AtomicU32,
    /// Requests that got no usable response (refused, timed out, garbage).
    pub errors: AtomicU64,
    /// Probes that succeeded.
    pub probes_ok: AtomicU64,
    /// Probes that failed.
    pub probes_failed: AtomicU64,
}

impl Health {
    pub(crate) fn new() -> Health {
        Health {
            healthy: AtomicBool::new(true),
            failed_in_a_row: AtomicU32::new(0),
            errors: AtomicU64::new(0),
            probes_ok: AtomicU64::new(0),
            probes_failed: AtomicU64::new(0),
        }
    }

    /// Whether the backend is believed healthy (always, without probes).
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    pub(crate) fn record(&self, ok: bool) {
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn probed(&self, ok: bool, threshold: u32) {
        if ok {
            self.probes_ok.fetch_add(1, Ordering::Relaxed);
            self.failed_in_a_row.store(0, Ordering::Relaxed);
            if !self.healthy.swap(true, Ordering::Relaxed) {
                tracing::warn!("backend healthy again");
            }
        } else {
            self.probes_failed.fetch_add(1, Ordering::Relaxed);
            let failed = self.failed_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
            if failed >= threshold && self.healthy.swap(false, Ordering::Relaxed) {
                tracing::warn!("backend sick after {failed} failed probes");
            }
        }
    }
}

/// Probes the backend forever (the task is aborted at shutdown).
pub async fn run(backend: Arc<Backend>, probe: Probe) {
    let mut ticks = tokio::time::interval(probe.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let path = probe.path.parse().ok();
        let mut request = Request::new(Body::Empty);
        *request.method_mut() = Method::GET;
        *request.uri_mut() = backend.uri(path.as_ref());
        super::frame(&mut request);
        let client = backend.client.clone();
        let ok = match tokio::time::timeout(probe.timeout, async move {
            let response = client.request(request).await.ok()?;
            let ok = response.status().is_success() || response.status().is_redirection();
            // Read the body so the connection can be reused.
            http_body_util::BodyExt::collect(response.into_body())
                .await
                .ok()?;
            Some(ok)
        })
        .await
        {
            Ok(Some(ok)) => ok,
            _ => false,
        };
        backend.health.probed(ok, probe.threshold);
    }
}
