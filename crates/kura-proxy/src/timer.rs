//! Timers for the workers. A worker's event loop has no time driver:
//! tokio's reads the clock and walks its wheel at every wake-up of the
//! loop, timer armed or not, some 1,500 instructions a request
//! (bench/results/2026-11-25-proxy-instructions.txt). A worker's few timers
//! (a backend connection's request deadline, moved at most once per
//! request timeout; a connect timeout; the once-a-second look for retired
//! backends; the timeout of a `stats` or `flush_all` sent to a backend) are
//! armed on one shared timer thread instead. The work that lives on timers
//! (a journal's replay, kura-client's probe of a backend marked down) runs
//! there as well: [`spawn`] and [`enter`].

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, EnterGuard, Handle};
use tokio::task::JoinHandle;

/// The timer thread's event loop (time and I/O), started on first use.
fn timers() -> &'static Handle {
    static TIMERS: OnceLock<Handle> = OnceLock::new();
    TIMERS.get_or_init(|| {
        let rt = Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("kura proxy: cannot start the timer thread's event loop");
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("kura-proxy-timer".into())
            // Runs what is spawned on it, for the process's life.
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("kura proxy: cannot start the timer thread");
        handle
    })
}

/// Runs `task` on the timer thread (work that sleeps and times out).
pub fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    timers().spawn(task)
}

/// Makes the timer thread's event loop the current one until the guard
/// drops, for calls that may `tokio::spawn` work with timers (kura-client's
/// health starts its probe so).
pub fn enter() -> EnterGuard<'static> {
    timers().enter()
}

/// A future that completes at a deadline, armed on the timer thread at
/// its first poll.
pub struct Sleep {
    deadline: Instant,
    armed: Option<JoinHandle<()>>,
}

/// A sleep until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        armed: None,
    }
}

/// A sleep of `after` from now.
pub fn sleep(after: Duration) -> Sleep {
    sleep_until(Instant::now() + after)
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let armed = self.armed.get_or_insert_with(|| {
            // Made on the timer thread: a tokio sleep belongs to the time
            // driver of the thread that makes it.
            timers().spawn(async move { tokio::time::sleep_until(deadline).await })
        });
        // An error is the timer thread's task gone: the time is up as well.
        Pin::new(armed).poll(cx).map(|_| ())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(h) = &self.armed {
            h.abort();
        }
    }
}

/// `work`'s output, or `None` if it took longer than `limit`. Work that
/// is ready at its first poll arms no timer.
pub async fn timeout<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    let deadline = Instant::now() + limit;
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
mod tests {
    use super::*;

    /// An event loop like a worker's: I/O, no time driver.
    fn worker_loop() -> tokio::runtime::Runtime {
        Builder::new_current_thread().enable_io().build().unwrap()
    }

    #[test]
    fn a_sleep_ends_at_its_deadline_on_a_loop_without_timers() {
        let t = Instant::now();
        worker_loop().block_on(sleep(Duration::from_millis(50)));
        assert!(t.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn a_timeout_gives_the_work_or_none() {
        let rt = worker_loop();
        assert_eq!(
            rt.block_on(timeout(Duration::from_secs(5), async { 7 })),
            Some(7)
        );
        let never = std::future::pending::<()>();
        let t = Instant::now();
        assert_eq!(rt.block_on(timeout(Duration::from_millis(50), never)), None);
        assert!(t.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn a_dropped_sleep_cancels_its_timer() {
        let rt = worker_loop();
        let mut s = Box::pin(sleep(Duration::from_secs(3600)));
        let polled = rt.block_on(std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx))));
        assert!(polled.is_pending());
        let h = s.armed.as_ref().map(JoinHandle::abort_handle).unwrap();
        drop(s);
        rt.block_on(async {
            while !h.is_finished() {
                tokio::task::yield_now().await;
            }
        });
    }
}
