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

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::ctx::Ctx;
use crate::listen::{Incoming, Listener};
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
fn worker(ctx: Arc<Ctx>, rx: mpsc::UnboundedReceiver<(Incoming, usize)>) {
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
/// reload dropped, and with `preconnect` opens its connections to every
/// backend at start and after each reload.
async fn take_connections(ctx: Arc<Ctx>, mut rx: mpsc::UnboundedReceiver<(Incoming, usize)>) {
    let second = std::time::Duration::from_secs(1);
    let mut tick = std::pin::pin!(crate::timer::sleep(second));
    let mut reloads = ctx.reloads();
    ctx.preconnect();
    loop {
        tokio::select! {
            next = rx.recv() => match next {
                Some((s, lane)) => crate::listen::start(s, &ctx, lane),
                None => break,
            },
            () = &mut tick => {
                crate::backend::close_retired();
                if ctx.reloads() != reloads {
                    reloads = ctx.reloads();
                    ctx.preconnect();
                }
                tick.set(crate::timer::sleep(second));
            }
        }
    }
}

/// Starts the workers; returns where to hand them connections.
fn workers(
    ctx: &Arc<Ctx>,
    n: usize,
) -> std::io::Result<Vec<mpsc::UnboundedSender<(Incoming, usize)>>> {
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

async fn serve(config: Config) -> std::io::Result<()> {
    let router = Router::build(&config, None)?;
    router.start();
    let listen = config.listen.clone();
    let metrics_listen = config.metrics_listen.clone();
    let threads = config.threads.max(1);
    let unix_mode = config.net.unix_mode;
    let ctx = Arc::new(Ctx::new(router, config).map_err(std::io::Error::other)?);
    let listener = Listener::bind(&listen, unix_mode).await?;
    if let Some(addr) = &metrics_listen {
        let m = tokio::net::TcpListener::bind(addr).await?;
        tracing::info!(listen = %m.local_addr()?, "metrics endpoint");
        tokio::spawn(crate::metrics::serve(m, ctx.clone()));
    }
    tracing::info!(listen = %listener.describe(), tls = ctx.tls.is_some(), "kura proxy listening");
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let senders = workers(&ctx, threads)?;
    kura_service::ready();
    let mut accepted_n = 0usize;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
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
            _ = hup.recv() => reload(&ctx),
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    ctx.stop();
    kura_service::stopping();
    tracing::info!("kura proxy stopping");
    Ok(())
}

/// SIGHUP: the configuration read again, or kept if the new one is bad.
fn reload(ctx: &Ctx) {
    kura_service::reloading();
    match ctx.reload() {
        Ok(()) => kura_service::reloaded("configuration reloaded"),
        Err(e) => {
            tracing::error!(%e, "reload failed; the configuration in use stays");
            kura_service::reloaded("reload failed; the configuration in use stays");
        }
    }
}
