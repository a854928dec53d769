//! Why a server could not be bound or started: [`ServerError`], the error
//! of kura-server's public API (the `kura` binary reports it). Each message
//! is whole, its cause included, as the crate's other errors write theirs.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::auth::AuthFileError;
use crate::config::ConfigError;
use crate::tls::TlsError;

/// See the module documentation.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The data dir's hash seed could not be read or made.
    #[error(transparent)]
    Seed(#[from] kura_log::LogError),
    #[error("cannot resolve listen address {0}: {1}")]
    Resolve(String, std::io::Error),
    #[error("listen address {0} resolves to nothing")]
    NoAddress(String),
    #[error("failed to listen on TCP {0}: {1}")]
    Tcp(SocketAddr, std::io::Error),
    #[error("failed to listen on UDP {0}: {1}")]
    Udp(SocketAddr, std::io::Error),
    #[error("failed to listen on unix socket {}: {error}", path.display())]
    Unix {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("--metrics-listen {0}: give host:port, e.g. 127.0.0.1:9150")]
    MetricsAddress(String),
    #[error("metrics address {0} resolves to nothing")]
    MetricsNowhere(String),
    #[error("failed to listen for metrics on {0}: {1}")]
    Metrics(SocketAddr, Box<ServerError>),
    /// A socket's setting, or a thread or event loop, that could not be
    /// made.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Auth(#[from] AuthFileError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Keyspace(#[from] kura_keyspace::OpenError),
    #[error(transparent)]
    ReplicaOf(#[from] kura_keyspace::ReplicaOfError),
    /// The flash tier's files (`--ext-path`) could not be opened.
    #[error("flash tier (ext_path): {0}")]
    Flash(std::io::Error),
}
