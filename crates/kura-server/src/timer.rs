//! Timers for the code that runs on worker threads. A worker's event loop
//! has no timer wheel of its own unless its connections time out when idle
//! (`-o idle_timeout`, a timer at every read): tokio's time driver reads the
//! clock three times and walks its wheel at every wake-up of the loop, some
//! 400 instructions a request with no timer armed
//! (bench/results/2026-11-25-instructions.txt). The few timers such a worker
//! needs (a TLS handshake, a closing stream, a wait for room for a value or
//! for replicas' acknowledgements, a replica's heartbeat) run on one shared
//! timer thread instead, and a [`timeout`] whose work is ready at once arms
//! none.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

thread_local! {
    /// Whether this thread's event loop has no time driver: its timers go
    /// to the timer thread.
    static REMOTE: Cell<bool> = const { Cell::new(false) };
}

/// The timer thread's event loop, started with the first worker that needs
/// it; `None` if it could not be (workers then keep their own time drivers).
fn timer_thread() -> Option<&'static Handle> {
    static TIMERS: OnceLock<Option<Handle>> = OnceLock::new();
    TIMERS.get_or_init(start_timer_thread).as_ref()
}

fn start_timer_thread() -> Option<Handle> {
    let started = Builder::new_current_thread()
        .enable_time()
        .build()
        .and_then(|rt| {
            let handle = rt.handle().clone();
            std::thread::Builder::new()
                .name("kura-timer".into())
                // Runs the sleeps spawned on it, for the process's life.
                .spawn(move || rt.block_on(std::future::pending::<()>()))
                .map(|_| handle)
        });
    started
        .inspect_err(|e| tracing::warn!("no timer thread ({e}): workers keep their own"))
        .ok()
}

/// Builds the event loop of a worker thread (call it on that thread): with
/// a time driver of its own when `local_timers`, else without one.
pub(crate) fn worker_runtime(local_timers: bool) -> std::io::Result<Runtime> {
    let mut builder = Builder::new_current_thread();
    builder.enable_io();
    if local_timers || timer_thread().is_none() {
        builder.enable_time();
    } else {
        REMOTE.set(true);
    }
    builder.build()
}

/// A future that completes at a deadline; see [`sleep`].
pub(crate) struct Sleep {
    deadline: Instant,
    armed: Option<Armed>,
}

enum Armed {
    Local(Pin<Box<tokio::time::Sleep>>),
    Remote(JoinHandle<()>),
}

/// A sleep until `after` from now, armed at its first poll: on this
/// thread's time driver, or the timer thread's for a worker without one.
pub(crate) fn sleep(after: Duration) -> Sleep {
    sleep_until(Instant::now() + after)
}

/// A sleep until `deadline`; see [`sleep`].
pub(crate) fn sleep_until(deadline: Instant) -> Sleep {
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
            match timer_thread().filter(|_| REMOTE.get()) {
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
            // An error is the timer thread gone: the time is up as well.
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

/// `work`'s output, or `None` if it took longer than `limit`.
pub(crate) async fn timeout<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    timeout_at(Instant::now() + limit, work).await
}

/// `work`'s output, or `None` if it is not done by `deadline`.
pub(crate) async fn timeout_at<F: Future>(deadline: Instant, work: F) -> Option<F::Output> {
    tokio::select! {
        biased;
        out = work => Some(out),
        () = sleep_until(deadline) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker without a time driver sleeps on the timer thread; work that
    /// is ready at once arms no timer.
    #[test]
    fn a_worker_without_a_time_driver_still_times_out() {
        std::thread::spawn(|| {
            let rt = worker_runtime(false).unwrap();
            rt.block_on(async {
                assert_eq!(timeout(Duration::from_secs(60), async { 7 }).await, Some(7));
                let never = std::future::pending::<()>();
                assert_eq!(timeout(Duration::from_millis(1), never).await, None);
                sleep(Duration::from_millis(1)).await;
            });
        })
        .join()
        .unwrap();
    }
}
