//! The flash tier's reader threads: a read from the device is handed to
//! one of a bounded number of threads (`ext_threads`), so the thread that
//! asked — a tokio worker of kura http, a connection worker of kura server —
//! never waits on the device. The answer comes back through a
//! [`FlashRead`]: a future for async callers, or [`FlashRead::wait`].
//!
//! A bounded thread pool rather than io_uring: a read from flash is one
//! `pread` of one record, mostly served by the page cache; a pool needs no
//! kernel feature, works the same under every sandbox and on every file
//! system the tests run on, and its cost (a queue push and a wake-up) is
//! paid only on flash hits, never on RAM hits or misses.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::api::Hit;

type Job = Box<dyn FnOnce() + Send>;

/// Jobs waiting for a reader thread.
struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    closed: AtomicBool,
}

/// The reader threads and their queue.
pub(crate) struct Pool {
    queue: Arc<Queue>,
    cap: usize,
}

impl Pool {
    /// A pool taking at most `cap` waiting jobs; no threads until
    /// [`Pool::start`].
    pub(crate) fn new(cap: usize) -> Pool {
        Pool {
            queue: Arc::new(Queue {
                jobs: Mutex::new(VecDeque::new()),
                ready: Condvar::new(),
                closed: AtomicBool::new(false),
            }),
            cap,
        }
    }

    /// Starts `threads` reader threads.
    pub(crate) fn start(&self, threads: usize) -> std::io::Result<()> {
        for i in 0..threads.max(1) {
            let queue = Arc::clone(&self.queue);
            std::thread::Builder::new()
                .name(format!("kura-flash-read-{i}"))
                .spawn(move || run(&queue))?;
        }
        Ok(())
    }

    /// Queues `job`: false (and `job` dropped) when the queue is full.
    pub(crate) fn submit(&self, job: Job) -> bool {
        let mut jobs = self.queue.jobs.lock();
        if jobs.len() >= self.cap {
            return false;
        }
        jobs.push_back(job);
        drop(jobs);
        self.queue.ready.notify_one();
        true
    }

    /// Jobs waiting now (`extstore_io_queue`).
    pub(crate) fn waiting(&self) -> usize {
        self.queue.jobs.lock().len()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.queue.closed.store(true, Ordering::Release);
        self.queue.ready.notify_all();
    }
}

fn run(queue: &Queue) {
    loop {
        let job = {
            let mut jobs = queue.jobs.lock();
            loop {
                if let Some(job) = jobs.pop_front() {
                    break job;
                }
                if queue.closed.load(Ordering::Acquire) {
                    return;
                }
                queue.ready.wait(&mut jobs);
            }
        };
        job();
    }
}

#[derive(Default)]
struct SlotState {
    done: Option<Option<Hit>>,
    waker: Option<Waker>,
}

/// Where a reader thread leaves its answer.
#[derive(Default)]
pub(crate) struct Slot {
    state: Mutex<SlotState>,
    filled: Condvar,
}

impl Slot {
    /// Gives the answer and wakes whoever waits for it.
    pub(crate) fn fill(&self, hit: Option<Hit>) {
        let waker = {
            let mut st = self.state.lock();
            st.done = Some(hit);
            st.waker.take()
        };
        self.filled.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// A read from the flash tier under way on a reader thread: await it, or
/// [`FlashRead::wait`] for it. Its answer is what [`Store::get`] would
/// have answered (a hit, or `None` when the record was damaged, gone or
/// replaced meanwhile).
///
/// [`Store::get`]: crate::Store::get
#[must_use = "the read's answer"]
pub struct FlashRead {
    pub(crate) slot: Arc<Slot>,
}

impl std::fmt::Debug for FlashRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FlashRead")
    }
}

impl FlashRead {
    /// Blocks the calling thread until the read is done.
    pub fn wait(self) -> Option<Hit> {
        let mut st = self.slot.state.lock();
        loop {
            if let Some(hit) = st.done.take() {
                return hit;
            }
            self.slot.filled.wait(&mut st);
        }
    }
}

impl Future for FlashRead {
    type Output = Option<Hit>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Hit>> {
        let mut st = self.slot.state.lock();
        match st.done.take() {
            Some(hit) => Poll::Ready(hit),
            None => {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
