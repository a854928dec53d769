//! kura-tls: the TLS that kura server (`-Z`, the replica's link), kura
//! proxy (its listener and its backends) and kura-client share, so each
//! setting means the same everywhere and a bad file gets the same clear
//! error.
//!
//! - `settings.rs`: the `[tls]` section, memcached's `-o ssl_*` options
//!   with memcached's names and numbers.
//! - `pem.rs`: reading certificates, keys and CA files; every error names
//!   the setting and the file.
//! - `server.rs`: a rustls server configuration from the `[tls]` settings,
//!   and [`ServerTls`], the acceptor a reload replaces while handshakes go
//!   on.
//! - `client.rs`: [`ClientTls`], the settings of a client (CA or the
//!   system's roots, client certificate, server name), its rustls client
//!   configuration, and [`connect`].
//! - `stream.rs`: [`ClientStream`], a connection that is plain or TLS.

mod client;
mod pem;
mod server;
mod settings;
mod stream;

pub use client::{client_config, connect, server_name, ClientTls, ClientTlsConfig, Identity};
pub use pem::{certificates, private_key, roots, system_roots, TlsError, SYSTEM_ROOTS};
pub use server::{acceptor, server_config, ServerTls};
pub use settings::{MinVersion, TlsConfig, TlsSettingError, VerifyMode, HANDSHAKE_TIMEOUT_SECS};
pub use stream::ClientStream;
pub use tokio_rustls;
pub use tokio_rustls::rustls;
