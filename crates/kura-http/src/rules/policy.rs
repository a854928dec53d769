//! The operator's settings that the rules consult: default and heuristic lifetimes, grace,
//! stale-if-error, how clients' request directives are treated, what to do with `Set-Cookie`,
//! and which RFC 9213 targeted field (e.g. `CDN-Cache-Control`) takes precedence over
//! `Cache-Control`. Every default is a constant here and is explained in docs/http.md.

use std::time::Duration;

use http::HeaderName;

/// Lifetime given to a response that may be cached heuristically but has no `Last-Modified`
/// to base a heuristic on (Varnish's `default_ttl` is also 120 s).
pub const DEFAULT_TTL: Duration = Duration::from_secs(120);
/// Share of the time since `Last-Modified` used as a heuristic lifetime, in percent
/// (RFC 9111 §4.2.2 suggests 10%).
pub const DEFAULT_HEURISTIC_PERCENT: u32 = 10;
/// Upper bound of a heuristic lifetime based on `Last-Modified`: one day.
pub const DEFAULT_HEURISTIC_MAX: Duration = Duration::from_secs(86_400);
/// How long past its freshness a stored response may be served while it is refreshed in the
/// background, when the response allows it (Varnish's `default_grace` is also 10 s).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// How long past its freshness a stored response may be served when the backend fails.
pub const DEFAULT_STALE_IF_ERROR: Duration = Duration::from_secs(10);

/// How the cache treats the `Cache-Control` directives of clients' requests that ask for a
/// fresher (`no-cache`, `max-age`, `min-fresh`) or staler (`max-stale`, `stale-if-error`)
/// response than the cache would otherwise serve.
///
/// `no-store` and `only-if-cached` in a request are honoured in both modes (docs/http.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientDirectives {
    /// Ignore them, as Varnish does: a reverse proxy acts for the origin (RFC 9110 §3.7), and a
    /// browser's reload (`max-age=0`) or a client's `no-cache` must not let any client send every
    /// request through to the backend.
    #[default]
    Ignore,
    /// Honour them as RFC 9111 §5.2.1 and RFC 5861 describe.
    Honour,
}

/// What the cache does with a response that carries `Set-Cookie`.
///
/// RFC 9111 does not forbid storing such a response (its security considerations note that
/// `Set-Cookie` does not inhibit caching); an operator rarely wants one client's cookie handed
/// to the next. A `Set-Cookie` removed by the response's own `no-cache="set-cookie"`
/// never counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetCookie {
    /// Do not store the response (Varnish's built-in behaviour).
    #[default]
    Pass,
    /// Store the response without its `Set-Cookie` fields (the client that caused the fetch still
    /// gets them).
    Strip,
    /// Store it with its `Set-Cookie` fields, as the RFC allows.
    Store,
}

/// The operator's settings for the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePolicy {
    /// Lifetime of a response that may be cached heuristically and has no `Last-Modified`.
    pub default_ttl: Duration,
    /// Heuristic lifetime as a percentage of (`Date` − `Last-Modified`).
    pub heuristic_percent: u32,
    /// Upper bound of a heuristic lifetime based on `Last-Modified`.
    pub heuristic_max: Duration,
    /// Operator's grace: how long a stale response may be served while it is refreshed in the
    /// background, unless the response forbids serving it stale.
    pub grace: Duration,
    /// How long a stale response may be served while the backend fails, unless the response
    /// forbids serving it stale.
    pub stale_if_error: Duration,
    /// How clients' request directives are treated.
    pub client_directives: ClientDirectives,
    /// What to do with responses that carry `Set-Cookie`.
    pub set_cookie: SetCookie,
    /// RFC 9213 target list: targeted cache-control fields (e.g. `cdn-cache-control`), in order
    /// of precedence. Empty (the default): only `Cache-Control` and `Expires` count.
    pub targeted_fields: Vec<HeaderName>,
    /// Whether a response to a request with credentials (`Cookie`, `Authorization`) may be
    /// stored with a heuristic or default lifetime. Off by default: such a response is stored
    /// only with explicit freshness (`max-age`, `s-maxage`, `Expires`), as a page that says
    /// nothing about caching may be that user's own.
    pub heuristic_with_credentials: bool,
    /// Whether `Surrogate-Control` is read (as Fastly and Akamai read it: `rules::surrogate`)
    /// and removed from responses to clients. On by default: the field is meant for a
    /// reverse proxy at the origin's side.
    pub surrogate_control: bool,
}

impl Default for CachePolicy {
    fn default() -> Self {
        Self {
            default_ttl: DEFAULT_TTL,
            heuristic_percent: DEFAULT_HEURISTIC_PERCENT,
            heuristic_max: DEFAULT_HEURISTIC_MAX,
            grace: DEFAULT_GRACE,
            stale_if_error: DEFAULT_STALE_IF_ERROR,
            client_directives: ClientDirectives::default(),
            set_cookie: SetCookie::default(),
            targeted_fields: Vec::new(),
            heuristic_with_credentials: false,
            surrogate_control: true,
        }
    }
}

impl CachePolicy {
    /// The policy with `CDN-Cache-Control` (RFC 9213 §3) as its only targeted field.
    pub fn with_cdn_cache_control(mut self) -> Self {
        self.targeted_fields = vec![HeaderName::from_static("cdn-cache-control")];
        self
    }
}
