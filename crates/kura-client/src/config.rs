//! The client's settings, each with its default.

use std::time::Duration;

use kura_ring::Kind;

/// The wire protocol spoken to every server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// memcached's meta protocol (memcached 1.6 and kura): opaque tokens on
    /// every request, quiet batches, leases. The default.
    #[default]
    Meta,
    /// The classic text protocol, for servers without meta commands:
    /// multi-operations are still one write and one round trip per server
    /// (one `gets` for reads, acknowledged commands in order for writes),
    /// but leases ([`crate::Client::get_or_fill`]) are not available.
    Text,
    /// memcached's binary protocol (deprecated by memcached, still spoken
    /// by many servers): quiet opcodes in batches ended by `NOOP`, opaques
    /// on every response; no leases.
    Binary,
}

impl Protocol {
    pub(crate) fn is_text(self) -> bool {
        self == Protocol::Text
    }

    pub(crate) fn is_meta(self) -> bool {
        self == Protocol::Meta
    }
}

/// What a read of a key whose server is down returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DownPolicy {
    /// [`crate::Error::ServerDown`] (the default).
    #[default]
    Error,
    /// A miss, as if the key were not cached. Writes still fail.
    Miss,
}

/// Settings of a [`crate::Client`]; [`crate::ClientBuilder`] sets them.
#[derive(Debug, Clone)]
pub struct Config {
    /// Wire protocol (default meta).
    pub protocol: Protocol,
    /// Key placement (default libmemcached's ketama, as pylibmc and PHP
    /// place keys).
    pub ring: Kind,
    /// Pipelined connections per server (default 2).
    pub connections_per_server: usize,
    /// Time to establish a connection (default 500 ms).
    pub connect_timeout: Duration,
    /// Time for a request's complete reply, or a batch chunk's (default 1 s).
    pub request_timeout: Duration,
    /// Consecutive failures (connect, timeout, I/O, bad reply) after which
    /// a server is marked down (default 3).
    pub failure_limit: u32,
    /// First delay before probing a down server, doubled up to
    /// `probe_backoff_max`, each with up to 50% random jitter (default
    /// 100 ms and 5 s).
    pub probe_backoff_min: Duration,
    pub probe_backoff_max: Duration,
    /// What reads of a down server's keys return (default an error).
    pub down_policy: DownPolicy,
    /// Keys per quiet batch: a multi-operation sends a server its keys in
    /// chunks of this many, each one write (default 10,000).
    pub chunk_keys: usize,
    /// Largest value sent; larger ones are per-key errors before anything
    /// is sent (default 1,048,000 bytes, under memcached's `-I 1m` item
    /// limit for any key).
    pub max_value_len: usize,
    /// Seconds a lease placeholder lives (meta `N`; default 30).
    pub lease_ttl: u32,
    /// How long a [`crate::Client::get_or_fill`] caller that lost the lease
    /// waits for the winner's value before computing it itself (default
    /// 1 s); it polls with a delay growing from 5 ms.
    pub lease_wait: Duration,
    /// TLS to every server (default none): the CA its certificate must
    /// chain to, the name it must carry (SNI; each server's host without
    /// one), a client certificate ([`kura_tls::ClientTls::load`]).
    pub tls: Option<kura_tls::ClientTlsConfig>,
    /// The login every new connection makes before its first request
    /// (default none).
    pub auth: Option<crate::auth::Auth>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            protocol: Protocol::Meta,
            ring: Kind::Libmemcached,
            connections_per_server: 2,
            connect_timeout: Duration::from_millis(500),
            request_timeout: Duration::from_secs(1),
            failure_limit: 3,
            probe_backoff_min: Duration::from_millis(100),
            probe_backoff_max: Duration::from_secs(5),
            down_policy: DownPolicy::Error,
            chunk_keys: 10_000,
            max_value_len: 1_048_000,
            lease_ttl: 30,
            lease_wait: Duration::from_secs(1),
            tls: None,
            auth: None,
        }
    }
}
