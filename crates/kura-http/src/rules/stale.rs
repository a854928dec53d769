//! The hit-path decision: may a stored response be served as it is, served stale while it is
//! refreshed, served stale because the backend fails, or must the backend be asked first?
//! (RFC 9111 §4, §4.2.4, §5.2; RFC 5861.)
//!
//! Who may permit a stale response, and what can forbid it:
//! - the response's own `stale-while-revalidate` and `stale-if-error` (RFC 5861);
//! - the operator's grace and stale-if-error ([`CachePolicy`]); grace only for responses that had
//!   a lifetime (a `max-age=0` response is not served stale while the backend is up);
//! - the client's `max-stale` and `stale-if-error`, when [`ClientDirectives::Honour`].
//!
//! `must-revalidate`, `proxy-revalidate` and unqualified `no-cache` forbid them all (§5.2.2.2:
//! "in all circumstances"). `s-maxage` implies `proxy-revalidate` (§5.2.2.10): kura lets it
//! forbid the permissions from outside the response, but honours the RFC 5861 directives the
//! same response sends beside it (docs/http.md explains this reading).

use std::time::{Duration, SystemTime};

use super::cache_control::{MaxStale, RequestDirectives};
use super::freshness::Freshness;
use super::policy::{CachePolicy, ClientDirectives};

/// The backend's state as the proxy knows it when deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Reachable, as far as is known: ask it when needed.
    Available,
    /// Failed for this request (refused, reset, timed out, or answered 500, 502, 503 or 504),
    /// or marked sick by health probes.
    Failed,
}

/// What to do with a stored response that matched the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Serve it: it is fresh and nothing asks for validation.
    Fresh,
    /// Serve it stale now, and refresh it in the background (grace, `stale-while-revalidate`,
    /// or a client's `max-stale`).
    StaleWhileRevalidate,
    /// Serve it stale because the backend failed (`stale-if-error`, operator's stale-if-error).
    StaleOnError,
    /// Send a conditional request to the backend first (the response has validators).
    Revalidate,
    /// Fetch the response anew first (it has no validators to revalidate with).
    Fetch,
    /// Nothing may be served and the backend may not or cannot be asked: answer 504
    /// (`only-if-cached`, §5.2.1.7; or a failed backend and a response that may not be served
    /// stale, §5.2.2.2).
    GatewayTimeout,
}

/// Decides what to do with stored response `stored` for a request with `request` directives at
/// `now`. Call it with [`Backend::Available`] on a hit, and again with [`Backend::Failed`] when
/// the revalidation or fetch it asked for fails.
pub fn decide(
    policy: &CachePolicy,
    stored: &Freshness,
    has_validators: bool,
    request: &RequestDirectives,
    backend: Backend,
    now: SystemTime,
) -> Decision {
    let client = effective_client(policy, request);
    let age = stored.current_age(now);
    let fresh = stored.lifetime > age;
    let staleness = age.saturating_sub(stored.lifetime);
    let rules = &stored.stale;
    let forbidden = rules.must_revalidate || rules.no_cache;
    let outside_permissions = !rules.s_maxage;
    let ask_backend = if has_validators {
        Decision::Revalidate
    } else {
        Decision::Fetch
    };

    if backend == Backend::Failed {
        if rules.no_cache {
            return Decision::GatewayTimeout;
        }
        if fresh {
            return Decision::Fresh;
        }
        if forbidden {
            return Decision::GatewayTimeout;
        }
        let mut allowance = longest(rules.if_error, rules.while_revalidate);
        if outside_permissions {
            allowance = allowance.max(policy.stale_if_error);
            allowance = allowance.max(client.stale_if_error.value().map_or(Duration::ZERO, secs));
            allowance = allowance.max(max_stale(client.max_stale));
        }
        return if within(staleness, allowance) {
            Decision::StaleOnError
        } else {
            Decision::GatewayTimeout
        };
    }

    let client_wants_fresher = client.no_cache
        || client.max_age.value().is_some_and(|max| age > secs(max))
        || client
            .min_fresh
            .value()
            .is_some_and(|min| stored.lifetime.saturating_sub(age) < secs(min));

    if client.only_if_cached {
        // The backend is not to be asked: serve what may be served, or 504.
        if rules.no_cache {
            return Decision::GatewayTimeout;
        }
        if fresh {
            return Decision::Fresh;
        }
        if !forbidden && within(staleness, stale_allowance(policy, stored, &client)) {
            return Decision::StaleWhileRevalidate;
        }
        return Decision::GatewayTimeout;
    }
    if rules.no_cache || client_wants_fresher {
        return ask_backend;
    }
    if fresh {
        return Decision::Fresh;
    }
    if !forbidden && within(staleness, stale_allowance(policy, stored, &client)) {
        return Decision::StaleWhileRevalidate;
    }
    ask_backend
}

/// The request directives the cache honours under the operator's policy.
fn effective_client(policy: &CachePolicy, request: &RequestDirectives) -> RequestDirectives {
    match policy.client_directives {
        ClientDirectives::Honour => *request,
        ClientDirectives::Ignore => RequestDirectives {
            no_store: request.no_store,
            only_if_cached: request.only_if_cached,
            ..RequestDirectives::default()
        },
    }
}

/// How stale a response may be served while the backend is up.
fn stale_allowance(
    policy: &CachePolicy,
    stored: &Freshness,
    client: &RequestDirectives,
) -> Duration {
    let mut allowance = stored.stale.while_revalidate.unwrap_or(Duration::ZERO);
    if !stored.stale.s_maxage {
        if !stored.lifetime.is_zero() {
            allowance = allowance.max(policy.grace);
        }
        allowance = allowance.max(max_stale(client.max_stale));
    }
    allowance
}

fn max_stale(max_stale: MaxStale) -> Duration {
    match max_stale {
        MaxStale::Any => Duration::MAX,
        MaxStale::Limit(seconds) => secs(seconds),
        MaxStale::Absent | MaxStale::Invalid => Duration::ZERO,
    }
}

fn longest(a: Option<Duration>, b: Option<Duration>) -> Duration {
    a.unwrap_or(Duration::ZERO).max(b.unwrap_or(Duration::ZERO))
}

/// Whether `staleness` is within a non-zero `allowance` (RFC 5861: "more stale than the
/// indicated amount" is refused; an allowance of zero permits nothing).
fn within(staleness: Duration, allowance: Duration) -> bool {
    !allowance.is_zero() && staleness <= allowance
}

fn secs(seconds: u64) -> Duration {
    crate::rules::delta::to_duration(seconds)
}

#[cfg(test)]
mod tests;
