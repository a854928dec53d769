//! Timers for worker event loops without a time driver of their own.
//!
//! tokio's time driver reads the clock and walks its timer wheel at every
//! wake-up of an event loop, timer armed or not: some 400 instructions a
//! request in the server, 1,500 in the proxy (bench/results/
//! 2026-11-25-instructions.txt, 2026-11-25-proxy-instructions.txt). A
//! worker's few timers (a TLS handshake, a closing stream, a wait for room
//! or for replicas, a heartbeat; a backend's request deadline, a connect
//! timeout) are armed on one shared thread instead, `kura-timer`, which also
//! runs the work that lives on timers ([`spawn`], [`enter`]).
//!
//! A thread whose event loop keeps its own time driver (built by
//! [`worker_runtime`] with `local_timers`, e.g. the server's workers under
//! `-o idle_timeout`) arms its timers there. Everywhere else a timer is a
//! task on the timer thread, whatever the caller's event loop is.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, EnterGuard, Handle, Runtime};
use tokio::task::JoinHandle;

thread_local! {
    /// This thread's event loop has a time driver its timers go to.
    static LOCAL: Cell<bool> = const { Cell::new(false) };
}

/// The timer thread's event loop (time and I/O, for the work spawned on
/// it), started on first use; `None` if it could not be started.
pub fn thread() -> Option<&'static Handle> {
    static TIMERS: OnceLock<Option<Handle>> = OnceLock::new();
    TIMERS.get_or_init(start).as_ref()
}

fn start() -> Option<Handle> {
    let started = Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|rt| {
            let handle = rt.handle().clone();
            std::thread::Builder::new()
                .name("kura-timer".into())
                // Runs what is spawned on it, for the process's life.
                .spawn(move || rt.block_on(std::future::pending::<()>()))
                .map(|_| handle)
        });
    started
        .inspect_err(|e| tracing::warn!("no timer thread ({e}): event loops keep their own"))
        .ok()
}

/// Builds the event loop of a worker thread (call it on that thread): I/O,
/// and a time driver of its own when `local_timers` or when the timer
/// thread cannot be started.
///
/// # Errors
/// The event loop cannot be built.
pub fn worker_runtime(local_timers: bool) -> std::io::Result<Runtime> {
    let mut builder = Builder::new_current_thread();
    builder.enable_io();
    let local = local_timers || thread().is_none();
    if local {
        builder.enable_time();
    }
    LOCAL.set(local);
    builder.build()
}

/// Runs `task` on the timer thread (work that sleeps and times out), or on
/// the caller's event loop if the timer thread could not be started.
pub fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match thread() {
        Some(h) => h.spawn(task),
        None => tokio::spawn(task),
    }
}

/// Makes the timer thread's event loop the current one until the guard
/// drops, for calls that may `tokio::spawn` work with timers; `None` (the
/// caller's loop stays current) if the timer thread could not be started.
pub fn enter() -> Option<EnterGuard<'static>> {
    thread().map(Handle::enter)
}

/// A future that completes at a deadline, armed at its first poll.
pub struct Sleep {
    deadline: Instant,
    armed: Option<Armed>,
}

enum Armed {
    Local(Pin<Box<tokio::time::Sleep>>),
    Remote(JoinHandle<()>),
}

/// A sleep of `after` from now.
pub fn sleep(after: Duration) -> Sleep {
    sleep_until(Instant::now() + after)
}

/// A sleep until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        armed: None,
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let armed = self.armed.get_or_insert_with(|| {
            match thread().filter(|_| !LOCAL.get()) {
                // Made on the timer thread: a tokio sleep belongs to the
                // time driver of the thread that makes it.
                Some(timers) => Armed::Remote(timers.spawn(async move {
                    tokio::time::sleep_until(deadline).await;
                })),
                None => Armed::Local(Box::pin(tokio::time::sleep_until(deadline))),
            }
        });
        match armed {
            Armed::Local(s) => s.as_mut().poll(cx),
            // An error is the timer thread's task gone: the time is up as well.
            Armed::Remote(h) => Pin::new(h).poll(cx).map(|_| ()),
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(Armed::Remote(h)) = &self.armed {
            h.abort();
        }
    }
}

/// `work`'s output, or `None` if it took longer than `limit`. Work that is
/// ready at its first poll arms no timer.
pub async fn timeout<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    timeout_at(Instant::now() + limit, work).await
}

/// `work`'s output, or `None` if it is not done by `deadline`.
pub async fn timeout_at<F: Future>(deadline: Instant, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    let mut sleep = std::pin::pin!(sleep_until(deadline));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

#[cfg(test)]
mod tests;
