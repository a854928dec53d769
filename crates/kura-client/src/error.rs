//! The client's one error type. It is `Clone` because a failure of one
//! server's batch is handed to every key of that batch.

use std::sync::Arc;
use std::time::Duration;

/// Why a key is not acceptable, found before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("empty key")]
    Empty,
    #[error("key of {0} bytes (memcached's limit is 250)")]
    TooLong(usize),
    #[error("key has byte 0x{0:02x} (spaces and control bytes are not allowed)")]
    ForbiddenByte(u8),
}

/// What went wrong with a request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The key cannot be sent (checked before sending).
    #[error("bad key: {0}")]
    BadKey(#[from] KeyError),
    /// The value is over the configured limit (checked before sending).
    #[error("value of {len} bytes is over the limit of {max} bytes")]
    ValueTooLarge { len: usize, max: usize },
    /// The key's server is marked down; the request was not sent.
    #[error("server {0} is down")]
    ServerDown(String),
    /// No connection to the server within the connect timeout.
    #[error("connecting to {server}: no connection within {after:?}")]
    ConnectTimeout { server: String, after: Duration },
    /// No complete reply within the request timeout; the connection was
    /// closed (so a late reply cannot reach another request).
    #[error("{server}: no reply within {after:?}")]
    Timeout { server: String, after: Duration },
    /// A socket error.
    #[error("{server}: {source}")]
    Io {
        server: String,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The connection closed (or was closed after an error) before the
    /// reply came.
    #[error("{0}: connection closed before the reply")]
    ConnectionClosed(String),
    /// The server sent bytes that are not a reply to what was asked; the
    /// connection was closed and will be replaced.
    #[error("{server}: bad reply: {what}")]
    Protocol { server: String, what: String },
    /// The server answered with `CLIENT_ERROR`, `SERVER_ERROR` or `ERROR`.
    #[error("server replied: {0}")]
    Server(String),
    /// The operation needs the meta protocol (leases, for example).
    #[error("{0} needs the meta protocol")]
    NeedsMeta(&'static str),
    /// A fenced write ([`crate::Fence`]) would have gone out on a
    /// connection made after the fence: the server may have restarted
    /// since the read the write depends on. Nothing was sent.
    #[error("{0}: connection newer than the fence; not sent")]
    Fenced(String),
    /// The TLS handshake with the server failed: its certificate is not
    /// trusted or not for its name, or it refused ours.
    #[error("{server}: TLS: {what}")]
    Tls { server: String, what: String },
    /// The server refused the login ([`crate::Auth`]).
    #[error("{server}: authentication refused: {what}")]
    Auth { server: String, what: String },
    /// The client's configuration is unusable.
    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    /// Whether this error says something about the server's health (and
    /// counts towards marking it down), rather than about the request.
    pub fn is_server_failure(&self) -> bool {
        matches!(
            self,
            Error::ConnectTimeout { .. }
                | Error::Timeout { .. }
                | Error::Io { .. }
                | Error::ConnectionClosed(_)
                | Error::Protocol { .. }
                | Error::Tls { .. }
                | Error::Auth { .. }
        )
    }

    /// A socket error on `server`'s connection; a TLS error carried in
    /// it (an alert: the server refused our certificate after the
    /// handshake, as TLS 1.3 servers do) is [`Error::Tls`].
    pub fn io(server: &str, e: std::io::Error) -> Error {
        let tls = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<kura_tls::rustls::Error>());
        if let Some(t) = tls {
            return Error::Tls {
                server: server.to_string(),
                what: t.to_string(),
            };
        }
        Error::Io {
            server: server.to_string(),
            source: Arc::new(e),
        }
    }

    /// A reply that is not an outcome of its command, as kura-proto's
    /// reader found it.
    pub(crate) fn read(server: &str, e: kura_proto::client::ReadError) -> Error {
        match e {
            kura_proto::client::ReadError::Server(line) => Error::Server(line),
            kura_proto::client::ReadError::Unexpected(what) => Error::protocol(server, what),
        }
    }

    pub(crate) fn protocol(server: &str, what: impl Into<String>) -> Error {
        Error::Protocol {
            server: server.to_string(),
            what: what.into(),
        }
    }
}

/// The client's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
