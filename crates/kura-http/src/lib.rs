//! kura's HTTP cache.
//!
//! [`rules`] holds RFC 9111's rules for a shared cache as pure functions over the `http`
//! crate's types (no sockets, storage or clocks). The rest is `kura http`, a caching reverse
//! proxy built on them: [`server`] (hyper, keep-alive, TLS with HTTP/2), [`cache`] (objects in
//! kura-store), [`coalesce`] (one backend fetch feeding every waiting client, streamed),
//! [`backend`] (pooled client, timeouts, health probes), [`config`] (flags and TOML),
//! [`stats`] and [`access_log`]; [`wire`] reads HTTP/1.1 request framing as hyper does, for the
//! guard in front of it. docs/http.md describes what it does.

pub mod access_log;
pub mod backend;
pub mod bans;
pub mod body;
pub mod cache;
pub mod coalesce;
pub mod compress;
pub mod config;
pub mod keys;
pub mod rules;
pub mod server;
pub mod stats;
pub mod wire;

pub use config::{Config, HttpArgs};
pub use server::{Server, StartError};

/// Runs `kura http` with `config` until SIGINT or SIGTERM.
///
/// # Errors
/// The server cannot start.
pub fn run(config: Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .thread_name("kura-http")
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let server = Server::start(config).await?;
        for addr in &server.http {
            tracing::info!("listening on http://{addr}");
        }
        for addr in &server.https {
            tracing::info!("listening on https://{addr}");
        }
        kura_service::ready();
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        kura_service::stopping();
        server.shutdown().await;
        Ok(())
    })
}
