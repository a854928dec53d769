//! The threads and the process: `threads` workers, each an event loop of
//! its own (a current-thread tokio runtime and a `LocalSet`, as kura
//! server's workers) that owns its client connections and its connections
//! to the backends (`backend.rs`), so a request is served start to end on
//! one thread; and the main thread's loop: accepting (connections are
//! handed to the workers round-robin), the Prometheus endpoint, the probes
//! and journal replays it starts, SIGHUP (the configuration read again and
//! the router replaced; connections stay, backends with the same address
//! keep their health and journal) and SIGTERM/SIGINT.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::ctx::Ctx;
use crate::router::Router;

/// Runs the proxy until SIGTERM or SIGINT.
///
/// # Errors
/// The runtime, the listener or a journal cannot be set up.
pub fn run(config: Config) -> std::io::Result<()> {
    let rt = runtime()?;
    rt.block_on(serve(config))
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A worker's event loop: I/O only, its timers on the timer thread
/// (`timer.rs`).
fn worker_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
}

/// A worker: serves the connections it is handed until the acceptor is
/// gone, then lets them finish.
fn worker(ctx: Arc<Ctx>, rx: mpsc::UnboundedReceiver<(std::net::TcpStream, usize)>) {
    let rt = match worker_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("proxy worker: cannot start its event loop: {e}");
            return;
        }
    };
    // The event loop runs the LocalSet alone: a future given to
    // `LocalSet::block_on` would be polled at every turn of the loop, not
    // only when woken; the connections come in through a task of their own.
    let local = tokio::task::LocalSet::new();
    local.spawn_local(take_connections(ctx, rx));
    rt.block_on(local);
}

/// Starts a task for each connection handed to this worker, until the
/// acceptor is gone; once a second, closes the connections to backends a
/// reload dropped.
async fn take_connections(
    ctx: Arc<Ctx>,
    mut rx: mpsc::UnboundedReceiver<(std::net::TcpStream, usize)>,
) {
    let second = std::time::Duration::from_secs(1);
    let mut tick = std::pin::pin!(crate::timer::sleep(second));
    loop {
        tokio::select! {
            next = rx.recv() => match next {
                Some((s, lane)) => {
                    if let Ok(s) = tokio::net::TcpStream::from_std(s) {
                        tokio::task::spawn_local(crate::conn::serve(s, ctx.clone(), lane));
                    }
                }
                None => break,
            },
            () = &mut tick => {
                crate::backend::close_retired();
                tick.set(crate::timer::sleep(second));
            }
        }
    }
}

/// Starts the workers; returns where to hand them connections.
fn workers(
    ctx: &Arc<Ctx>,
    n: usize,
) -> std::io::Result<Vec<mpsc::UnboundedSender<(std::net::TcpStream, usize)>>> {
    let mut senders = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, rx) = mpsc::unbounded_channel();
        let ctx = ctx.clone();
        std::thread::Builder::new()
            .name(format!("kura-proxy-{i}"))
            .spawn(move || worker(ctx, rx))?;
        senders.push(tx);
    }
    Ok(senders)
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
    let senders = workers(&ctx, config.threads.max(1))?;
    let mut accepted_n = 0usize;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted.and_then(|(s, _)| s.into_std()) {
                Ok(stream) => {
                    // Worker by worker; a client's lane picks its backend
                    // connection within its worker.
                    let n = accepted_n;
                    accepted_n = accepted_n.wrapping_add(1);
                    let (w, lane) = (n % senders.len(), n / senders.len());
                    if senders[w].send((stream, lane)).is_err() {
                        tracing::error!("a proxy worker is gone");
                    }
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
