//! kura's HTTP cache.
//!
//! For now this crate holds only [`rules`]: RFC 9111's rules for a shared cache (what may be
//! stored, for how long, when a stored response may be served, how it is validated and
//! invalidated) as pure functions over the `http` crate's types. It knows nothing of sockets,
//! storage or clocks: every time it needs is passed in. The caching reverse proxy (`kura http`,
//! issue 20) will be built on top of it; docs/http.md describes the rules' decisions.

pub mod rules;
