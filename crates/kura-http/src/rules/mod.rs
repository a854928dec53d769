//! RFC 9111 (HTTP caching) for a shared cache, with no I/O.
//!
//! Every rule is a pure function over the `http` crate's types; the current time is always a
//! parameter, never read from a clock. The proxy built on top asks, in order:
//!
//! 1. on a request: [`vary`] to find the stored variant, [`stale::decide`] whether to serve
//!    it, revalidate it or fetch; [`serve`] for the headers of a response served from the cache
//!    (`Age`, HEAD from GET); [`validation::client`] to answer the client's own conditional
//!    request;
//! 2. to the backend: [`validation::conditional`] for the conditional request;
//! 3. on the backend's response: [`targeted::ResponseControl`] for the directives that govern
//!    it (`Cache-Control`, or an RFC 9213 targeted field), [`storable`] whether it may be
//!    stored and [`headers::for_storage`] which fields are, [`freshness::Freshness`] for how
//!    long it is fresh (with [`age`]) and whether it is worth storing at all,
//!    [`validation::update`] for a 304, [`invalidation`] after unsafe methods.
//!
//! Operator settings are in [`CachePolicy`]. docs/http.md lists every choice and every
//! difference from the RFC and from Varnish.

pub mod age;
pub mod cache_control;
pub mod dates;
pub mod delta;
pub mod freshness;
mod head;
pub mod headers;
pub mod invalidation;
mod policy;
pub mod range;
pub mod serve;
pub mod stale;
pub mod status;
pub mod storable;
pub mod surrogate;
pub mod targeted;
#[cfg(test)]
pub(crate) mod test_support;
pub mod validation;
pub mod vary;

pub use head::{RequestHead, ResponseHead};
pub use policy::{
    CachePolicy, ClientDirectives, SetCookie, DEFAULT_GRACE, DEFAULT_HEURISTIC_MAX,
    DEFAULT_HEURISTIC_PERCENT, DEFAULT_STALE_IF_ERROR, DEFAULT_TTL,
};
