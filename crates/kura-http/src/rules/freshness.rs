//! How long a response stays fresh (RFC 9111 §4.2.1, heuristics §4.2.2) and the summary the
//! cache keeps beside a stored response so that a hit needs no header parsing: lifetime, initial
//! age, receipt time and what the response allows once stale.
//!
//! Lifetime, first rule that applies (a shared cache, §4.2.1):
//! 1. `s-maxage`; 2. `max-age`; 3. `Expires` − `Date` (not under an RFC 9213 targeted field,
//!    and `Date` defaults to the receipt time); an invalid value at any of these steps (a bad or
//!    conflicting `max-age`, `Expires: 0`, two different `Expires`) makes the response stale at
//!    once (§4.2.1, §5.3), it does not fall through to the next step;
//! 4. a heuristic, only for heuristically cacheable statuses or `public` (§4.2.2):
//!    [`CachePolicy::heuristic_percent`] of (`Date` − `Last-Modified`), at most
//!    [`CachePolicy::heuristic_max`], or [`CachePolicy::default_ttl`] without a usable
//!    `Last-Modified`;
//! 5. otherwise zero.

use std::time::{Duration, SystemTime};

use http::header::{DATE, EXPIRES, LAST_MODIFIED};

use super::age;
use super::cache_control::Seconds;
use super::dates::{self, FieldDate};
use super::delta;
use super::head::ResponseHead;
use super::policy::CachePolicy;
use super::status;
use super::targeted::ResponseControl;

/// Where a freshness lifetime came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifetimeSource {
    /// `s-maxage`.
    SMaxAge,
    /// `max-age`.
    MaxAge,
    /// `Expires` − `Date`.
    Expires,
    /// Invalid explicit freshness information: stale from the start.
    Invalid,
    /// A share of the time since `Last-Modified`.
    LastModified,
    /// The operator's default TTL.
    DefaultTtl,
    /// Nothing allows a lifetime.
    None,
}

impl LifetimeSource {
    /// Whether the lifetime is a heuristic one (§4.2.2).
    pub fn is_heuristic(self) -> bool {
        matches!(
            self,
            LifetimeSource::LastModified | LifetimeSource::DefaultTtl
        )
    }
}

/// What a response allows once it is stale (§4.2.4, §5.2.2, RFC 5861).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StaleRules {
    /// Unqualified `no-cache`: never served without a successful validation, fresh or not.
    pub no_cache: bool,
    /// `must-revalidate` or `proxy-revalidate`: never served stale, not even on error.
    pub must_revalidate: bool,
    /// `s-maxage` is present: it implies `proxy-revalidate` (§5.2.2.10), so permissions from
    /// outside the response (operator's grace, client's `max-stale`) do not apply; the
    /// response's own `stale-while-revalidate`/`stale-if-error` still do (docs/http.md).
    pub s_maxage: bool,
    /// The response's `stale-while-revalidate`.
    pub while_revalidate: Option<Duration>,
    /// The response's `stale-if-error`.
    pub if_error: Option<Duration>,
}

/// The freshness of a stored response: everything the hit path needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// Freshness lifetime.
    pub lifetime: Duration,
    /// Where [`Freshness::lifetime`] came from.
    pub source: LifetimeSource,
    /// `corrected_initial_age` (§4.2.3).
    pub initial_age: Duration,
    /// When the response (or the 304 that last validated it) was received.
    pub response_time: SystemTime,
    /// What the response allows once stale.
    pub stale: StaleRules,
}

impl Freshness {
    /// The freshness of `response`, governed by `control`, requested at `request_time` and
    /// received at `response_time` (for a response updated by a 304: the merged header fields
    /// and the times of the validation exchange).
    pub fn new(
        policy: &CachePolicy,
        response: ResponseHead<'_>,
        control: &ResponseControl,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> Self {
        let (lifetime, source) = lifetime(policy, response, control, response_time);
        let directives = &control.directives;
        let seconds = |s: Seconds| s.value().map(delta::to_duration);
        Self {
            lifetime,
            source,
            initial_age: age::initial_age(response.headers, request_time, response_time),
            response_time,
            stale: StaleRules {
                no_cache: directives.no_cache == super::cache_control::FieldScope::All,
                must_revalidate: directives.forbids_stale(),
                s_maxage: directives.s_maxage.is_present(),
                while_revalidate: seconds(directives.stale_while_revalidate),
                if_error: seconds(directives.stale_if_error),
            },
        }
    }

    /// `current_age` at `now` (§4.2.3).
    pub fn current_age(&self, now: SystemTime) -> Duration {
        age::current_age(self.initial_age, self.response_time, now)
    }

    /// Whether the response is fresh at `now`: `freshness_lifetime > current_age` (§4.2).
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        self.lifetime > self.current_age(now)
    }

    /// How long the response stays fresh after `now` (zero once stale).
    pub fn remaining(&self, now: SystemTime) -> Duration {
        self.lifetime.saturating_sub(self.current_age(now))
    }

    /// How far past its lifetime the response is at `now` (zero while fresh).
    pub fn staleness(&self, now: SystemTime) -> Duration {
        self.current_age(now).saturating_sub(self.lifetime)
    }

    /// Whether storing the response can ever save a fetch. A response that is stale from the
    /// start (or `no-cache`) is worth keeping only with a validator to revalidate it cheaply, or
    /// with its own `stale-while-revalidate`/`stale-if-error`; otherwise every use would be a
    /// full fetch anyway (Varnish does not store responses with a TTL of zero either).
    pub fn worth_storing(&self, has_validators: bool) -> bool {
        if self.stale.no_cache {
            return has_validators;
        }
        let may_serve_stale = !self.stale.must_revalidate
            && (self.stale.while_revalidate.is_some_and(|d| !d.is_zero())
                || self.stale.if_error.is_some_and(|d| !d.is_zero()));
        !self.lifetime.is_zero() || has_validators || may_serve_stale
    }
}

fn lifetime(
    policy: &CachePolicy,
    response: ResponseHead<'_>,
    control: &ResponseControl,
    response_time: SystemTime,
) -> (Duration, LifetimeSource) {
    let directives = &control.directives;
    let explicit = |seconds: Seconds, source| match seconds.value() {
        Some(value) => (delta::to_duration(value), source),
        None => (Duration::ZERO, LifetimeSource::Invalid),
    };
    if directives.s_maxage.is_present() {
        return explicit(directives.s_maxage, LifetimeSource::SMaxAge);
    }
    if directives.max_age.is_present() {
        return explicit(directives.max_age, LifetimeSource::MaxAge);
    }
    let date = dates::read(response.headers, &DATE)
        .valid()
        .unwrap_or(response_time);
    if control.uses_expires() {
        match dates::read(response.headers, &EXPIRES) {
            FieldDate::Valid(expires) => {
                let lifetime = expires.duration_since(date).unwrap_or(Duration::ZERO);
                return (lifetime.min(age_cap()), LifetimeSource::Expires);
            }
            FieldDate::Invalid => return (Duration::ZERO, LifetimeSource::Invalid),
            FieldDate::Absent => {}
        }
    }
    if !(directives.public || status::is_heuristically_cacheable(response.status)) {
        return (Duration::ZERO, LifetimeSource::None);
    }
    match dates::read(response.headers, &LAST_MODIFIED).valid() {
        Some(modified) if modified <= date => {
            let since = date.duration_since(modified).unwrap_or(Duration::ZERO);
            let share = since.saturating_mul(policy.heuristic_percent) / 100;
            (
                share.min(policy.heuristic_max),
                LifetimeSource::LastModified,
            )
        }
        _ => (policy.default_ttl, LifetimeSource::DefaultTtl),
    }
}

fn age_cap() -> Duration {
    Duration::from_secs(delta::DELTA_SECONDS_MAX)
}

#[cfg(test)]
mod tests;
