//! A server's health: errors counted on every request, and, when it has a probe, a probe task
//! keeping the results of the last `window` probes: the server is healthy while at least
//! `threshold` of them succeeded (Varnish's `.probe`). A director skips sick servers; a backend
//! whose servers are all sick is not asked for objects that may be served stale (they are
//! served stale at once, `stale::Backend::Failed`), and anything else still goes to it, so a
//! wrong verdict costs at most a stale page, never an error page.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use http::{Method, Request};

use super::server::Server;
use crate::body::Body;
use crate::config::Probe;

/// What is known of a server's health.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    /// The last probes' results, the newest in bit 0.
    results: AtomicU64,
    window: u32,
    threshold: u32,
    /// Requests that got no usable response (refused, timed out, garbage).
    pub errors: AtomicU64,
    /// Probes that succeeded.
    pub probes_ok: AtomicU64,
    /// Probes that failed.
    pub probes_failed: AtomicU64,
}

impl Health {
    /// Healthy, with `initial` good results, for `probe` (none: always healthy).
    pub(crate) fn new(initial: u32, probe: Option<&Probe>) -> Health {
        let (window, threshold) = probe.map_or((1, 1), |p| (p.window, p.threshold));
        Health {
            healthy: AtomicBool::new(initial >= threshold),
            results: AtomicU64::new(mask(initial)),
            window,
            threshold,
            errors: AtomicU64::new(0),
            probes_ok: AtomicU64::new(0),
            probes_failed: AtomicU64::new(0),
        }
    }

    /// Whether the server is believed healthy (always, without a probe).
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Good probes in the window, and the window (`varnishadm backend.list`'s `3/8`).
    pub fn good(&self) -> (u32, u32) {
        let results = self.results.load(Ordering::Relaxed) & mask(self.window);
        (results.count_ones(), self.window)
    }

    pub(crate) fn record(&self, ok: bool) {
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes a probe's result; the server's name is for the log.
    pub(crate) fn probed(&self, ok: bool, name: &str) {
        let counter = if ok {
            &self.probes_ok
        } else {
            &self.probes_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // One probe task per server: no other writer.
        let results =
            ((self.results.load(Ordering::Relaxed) << 1) | u64::from(ok)) & mask(self.window);
        self.results.store(results, Ordering::Relaxed);
        let healthy = results.count_ones() >= self.threshold;
        if self.healthy.swap(healthy, Ordering::Relaxed) != healthy {
            let good = results.count_ones();
            let verdict = if healthy { "healthy" } else { "sick" };
            tracing::warn!(
                "backend server {name} {verdict}: {good} of the last {} probes good",
                self.window
            );
        }
    }
}

/// The `n` lowest bits set.
fn mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Probes `server` forever (the task is aborted at a reload or shutdown).
pub async fn run(server: Arc<Server>, probe: Probe) {
    let mut ticks = tokio::time::interval(probe.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let path = probe.path.parse().ok();
    loop {
        ticks.tick().await;
        let mut request = Request::new(Body::Empty);
        *request.method_mut() = Method::GET;
        *request.uri_mut() = server.uri(path.as_ref());
        super::frame(&mut request);
        let client = server.client.clone();
        let expected = probe.expected;
        let ok = match tokio::time::timeout(probe.timeout, async move {
            let response = client.request(request).await.ok()?;
            let status = response.status();
            let ok = match expected {
                Some(expected) => status == expected,
                None => status.is_success() || status.is_redirection(),
            };
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
        server.health.probed(ok, &server.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn probe(window: u32, threshold: u32, initial: u32) -> Probe {
        Probe {
            path: "/".into(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            window,
            threshold,
            initial,
            expected: None,
        }
    }

    // Varnish's window: healthy while `threshold` of the last `window` probes were good.
    #[test]
    fn window_and_threshold() {
        let p = probe(5, 3, 3);
        let health = Health::new(p.initial, Some(&p));
        assert!(health.is_healthy());
        assert_eq!(health.good(), (3, 5));
        // 00111 -> 01110 -> 11100 -> 11000 (2 of 5): sick at the third failure.
        health.probed(false, "s");
        health.probed(false, "s");
        assert!(health.is_healthy());
        health.probed(false, "s");
        assert!(!health.is_healthy());
        assert_eq!(health.good(), (2, 5));
        health.probed(true, "s");
        assert!(!health.is_healthy(), "10001: 2 of 5");
        health.probed(true, "s");
        assert!(!health.is_healthy(), "00011: 2 of 5");
        health.probed(true, "s");
        assert!(health.is_healthy(), "00111: 3 of 5");
        assert_eq!(health.probes_failed.load(Ordering::Relaxed), 3);
    }

    // The top-level [probe]'s meaning: sick after `threshold` failures in a row, healthy after
    // one success (a window of `threshold`, one success needed).
    #[test]
    fn consecutive_failures() {
        let p = probe(2, 1, 1);
        let health = Health::new(1, Some(&p));
        health.probed(false, "s");
        assert!(health.is_healthy());
        health.probed(false, "s");
        assert!(!health.is_healthy());
        health.probed(true, "s");
        assert!(health.is_healthy());
        // Starting sick (initial below threshold), as Varnish's default does.
        let p = probe(8, 3, 2);
        assert!(!Health::new(2, Some(&p)).is_healthy());
        assert!(Health::new(1, None).is_healthy());
        assert_eq!(mask(64), u64::MAX);
    }
}
