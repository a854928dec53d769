//! kura-client: an async (tokio) memcached client for clusters.
//!
//! - Keys are placed with [`kura_ring`], bit for bit as libmemcached,
//!   Dalli, twemproxy or mcrouter place them, so the client joins an
//!   existing cluster without moving keys.
//! - memcached's meta protocol by default (text or binary for servers
//!   without it);
//!   a small pool of pipelined connections per server: concurrent requests
//!   share a connection and leave in one write, and every reply is matched
//!   to its request by its opaque token.
//! - Multi-operations ([`Client::get_multi`], [`Client::set_multi`],
//!   [`Client::add_multi`], [`Client::cas_multi`], [`Client::delete_multi`])
//!   send each server one quiet batch, all servers at once: one round trip
//!   per server (seed 000). Results are per key; a failed server's keys get
//!   its error.
//! - Timeouts, servers marked down after repeated failures and probed back
//!   with backoff; a down server's keys fail fast (or go to a gutter pool),
//!   never silently to another server.
//! - [`Client::get_or_fill`]: stampede protection with meta leases.
//! - An optional near cache ([`NearConfig`]): kura-store in process, kept
//!   coherent in front of kura servers by their invalidations (`mt`),
//!   TTL-bounded in front of memcached; in front of Redis, [`RedisNear`]
//!   keeps it coherent with `CLIENT TRACKING` (feature `redis`, off by
//!   default).
//!
//! docs/client.md has the guide and the example below at length.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> kura_client::Result<()> {
//! use kura_client::Client;
//! let client = Client::builder(["10.0.0.1:11211", "10.0.0.2:11211"]).build()?;
//! let items: Vec<(String, Vec<u8>)> =
//!     (0..1000).map(|i| (format!("user:{i}"), vec![b'x'; 100])).collect();
//! // One quiet batch per server, every server at once.
//! for r in client.set_multi(&items, 300).await {
//!     r?;
//! }
//! # Ok(()) }
//! ```

mod auth;
mod client;
mod config;
mod conn;
mod error;
mod fence;
mod key;
mod lease;
mod multi;
mod near;
mod ops;
mod pool;
pub mod raw;
#[cfg(feature = "redis")]
mod redis_near;

pub use auth::{connect, Auth};
pub use client::{Client, ClientBuilder};
pub use config::{Config, DownPolicy, Protocol};
pub use error::{Error, KeyError, Result};
pub use fence::Fence;
pub use key::{check_key, KEY_MAX};
pub use kura_proto::client::{StoreStatus, Value};
pub use kura_ring::Kind as RingKind;
pub use kura_tls::{ClientStream, ClientTls, ClientTlsConfig};
pub use lease::{FillOptions, Filled, Origin};
pub use near::NearConfig;
pub use ops::SetOptions;
#[cfg(feature = "redis")]
pub use redis_near::RedisNear;

/// The guide (docs/client.md); its example runs as a doc test.
#[doc = include_str!("../../../docs/client.md")]
pub mod guide {}
