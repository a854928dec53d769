//! kura's HTTP cache.
//!
//! [`rules`] holds RFC 9111's rules for a shared cache as pure functions over the `http`
//! crate's types (no sockets, storage or clocks). The rest is `kura http`, a caching reverse
//! proxy built on them: [`server`] (hyper, keep-alive, TLS with HTTP/2), [`cache`] (objects in
//! kura-store), [`coalesce`] (one backend fetch feeding every waiting client, streamed),
//! [`backend`] (pooled client, timeouts, health probes), [`config`] (flags and TOML),
//! [`stats`] and [`access_log`], [`esi`] (Edge Side Includes); [`wire`] reads HTTP/1.1 request framing as hyper does, for the
//! guard in front of it. docs/http.md describes what it does.

pub mod access_log;
pub mod backend;
pub mod bans;
pub mod body;
pub mod cache;
pub mod coalesce;
pub mod compress;
pub mod config;
pub mod esi;
pub mod keys;
pub mod rules;
pub mod server;
pub mod stats;
pub mod wire;

pub use config::{Config, HttpArgs};
pub use server::{Server, StartError};

/// Runs `kura http` with `config` until SIGINT or SIGTERM; SIGHUP reloads the configuration
/// ([`server::live`]) and reopens the access log, SIGUSR1 only reopens the access log.
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
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let mut user1 = signal(SignalKind::user_defined1())?;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = terminate.recv() => break,
                // SIGUSR1: the access log's file opened again (logrotate), nothing else.
                _ = user1.recv() => server.live.reopen_log(),
                _ = hangup.recv() => {
                    // SIGHUP: the configuration read again, the cache kept; a bad file keeps
                    // the one in use.
                    kura_service::reloading();
                    match server.live.reload() {
                        Ok(_) => kura_service::reloaded("configuration reloaded"),
                        Err(why) => {
                            tracing::error!("reload: {why}; the configuration in use stays");
                            kura_service::reloaded("reload failed; the configuration in use stays");
                        }
                    }
                }
            }
        }
        kura_service::stopping();
        server.shutdown().await;
        Ok(())
    })
}
