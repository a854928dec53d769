//! The listener and the process: a tokio runtime of `threads` workers, the
//! accept loop, SIGHUP (the configuration read again and the router
//! replaced; connections stay, backends with the same address keep their
//! connections, health and journal) and SIGTERM/SIGINT.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use crate::config::Config;
use crate::ctx::Ctx;
use crate::router::Router;

/// Runs the proxy until SIGTERM or SIGINT.
///
/// # Errors
/// The runtime, the listener or a journal cannot be set up.
pub fn run(config: Config) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .thread_name("kura-proxy")
        .enable_all()
        .build()?;
    rt.block_on(serve(config))
}

async fn serve(mut config: Config) -> std::io::Result<()> {
    let router = Router::build(&config, None)?;
    router.start();
    let ctx = Arc::new(Ctx::new(router, config.threads));
    let listener = TcpListener::bind(&config.listen).await?;
    if let Some(addr) = &config.metrics_listen {
        let m = TcpListener::bind(addr).await?;
        tracing::info!(listen = %m.local_addr()?, "metrics endpoint");
        tokio::spawn(crate::metrics::serve(m, ctx.clone()));
    }
    tracing::info!(listen = %listener.local_addr()?, "kura proxy listening");
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let lanes = AtomicUsize::new(0);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let lane = lanes.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(crate::conn::serve(stream, ctx.clone(), lane));
                }
                Err(e) => {
                    tracing::warn!(%e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = hup.recv() => match reload(&ctx, &config) {
                Ok(c) => config = c,
                Err(e) => tracing::error!(%e, "reload failed; the configuration in use stays"),
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    tracing::info!("kura proxy stopping");
    Ok(())
}

fn reload(ctx: &Ctx, config: &Config) -> Result<Config, String> {
    let new = config.reload().map_err(|e| e.to_string())?;
    if new.listen != config.listen {
        tracing::warn!("reload: the listen address changes only on restart");
    }
    let router = Router::build(&new, Some(&ctx.router())).map_err(|e| e.to_string())?;
    router.start();
    ctx.set_router(router);
    tracing::info!("configuration reloaded");
    Ok(new)
}
