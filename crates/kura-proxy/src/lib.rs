//! kura-proxy: `kura proxy`, a memcached router. Clients speak text, meta
//! or binary (detected per connection from the first byte, as kura-server
//! does, and parsed with kura-proto's parsers); backends are any servers
//! with memcached's meta protocol (kura, memcached 1.6), reached through
//! each worker's own pipelined connections (requests written and replies
//! framed with kura-proto's `client` codec, health judged by kura-client),
//! placed on kura-ring's rings.
//!
//! - `server.rs`: the worker threads, each an event loop owning its client
//!   connections and its backend connections (`backend/`: appended to
//!   directly, one write per loop round), so a request stays on one thread.
//! - `conn.rs`: a client connection (routes in arrival order, answers in
//!   that order, within `limits.rs`'s bounds); `reply.rs` the reply futures and steps the protocol
//!   modules give it; `idle.rs` the count of clients with nothing pending,
//!   which the backend connections' writer asks.
//! - `listen.rs`: the listener (TCP, TLS over it, or a Unix socket) and
//!   the TLS handshake on the worker a client is handed to.
//! - `mcrouter.rs`: mcrouter's admin keys (`get __mcrouter__.route(set,k)`).
//! - `text.rs`, `meta.rs`, `binary.rs`, `admin.rs`: each protocol's
//!   commands as meta commands to the backends, and the replies back;
//!   `get.rs` splits multi-gets into one quiet batch per backend.
//! - `router.rs`: pools, routes, backends and their gate; `journal.rs` the
//!   rejoin journal that keeps a returning backend from serving old values
//!   and `rejoin.rs` its replay (and the cleanup of the gutter's copies);
//!   `membership.rs` what a reload's ring changes mean for them;
//!   `catch_up.rs` keeps a kura replica that is behind its primary from
//!   serving (`rejoin = "caught-up"`).
//! - `stats.rs` (`stats`, from the counters of `counters.rs` and the
//!   backends'), `metrics.rs` (Prometheus, with `latency.rs`'s
//!   histograms), `config.rs`; `nutcracker.rs`
//!   translates twemproxy's configuration (`--from-nutcracker`).
//! - kura-timer: the workers' timers, on a timer thread (a worker's event
//!   loop has no time driver).
//!
//! docs/proxy.md has every decision.

mod admin;
mod backend;
mod binary;
mod call;
mod catch_up;
pub mod config;
mod conn;
mod counters;
mod ctx;
mod get;
mod idle;
mod journal;
mod latency;
mod limits;
mod listen;
mod mcrouter;
mod membership;
mod meta;
mod metrics;
pub mod nutcracker;
mod rate;
mod rejoin;
mod reply;
mod router;
mod server;
mod stats;
mod text;
use kura_timer as timer;

pub use config::{Config, ConfigError, ProxyArgs};
pub use server::run;
