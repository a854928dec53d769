//! The stop signal as the connections of one worker hear it. The worker
//! waits for the server-wide signal (`Shared::watch`) once and wakes its
//! connections; each connection's [`Stopped`] future is then a flag test
//! when polled beside its reads and writes, where a wait on the
//! server-wide channel cost some 400 instructions a request (the channel's
//! version check and its `Notify` registration, at every poll;
//! bench/results/2026-11-25-instructions.txt).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One worker's stop signal: a flag and the wakers of the connections
/// waiting for it. Single-threaded, as the worker's connections are.
#[derive(Default)]
pub(crate) struct StopSignal {
    stopping: Cell<bool>,
    /// One slot per connection that has a [`Stopped`]; `None` until its
    /// first poll, or when the slot is free.
    waiters: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl StopSignal {
    /// Raises the flag and wakes every waiting connection.
    pub(crate) fn stop(&self) {
        self.stopping.set(true);
        let wakers: Vec<Waker> = self
            .waiters
            .borrow_mut()
            .iter_mut()
            .flat_map(Option::take)
            .collect();
        for w in wakers {
            w.wake();
        }
    }

    /// A future that completes once the worker stops.
    pub(crate) fn stopped(self: &Rc<Self>) -> Stopped {
        let slot = match self.free.borrow_mut().pop() {
            Some(slot) => slot,
            None => {
                let mut waiters = self.waiters.borrow_mut();
                waiters.push(None);
                waiters.len() - 1
            }
        };
        Stopped {
            signal: self.clone(),
            slot,
        }
    }
}

/// Completes when its worker's [`StopSignal`] is raised.
pub(crate) struct Stopped {
    signal: Rc<StopSignal>,
    slot: usize,
}

impl Future for Stopped {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.stopping.get() {
            return Poll::Ready(());
        }
        // A connection's task keeps its waker: stored once, compared after.
        let mut waiters = self.signal.waiters.borrow_mut();
        let slot = &mut waiters[self.slot];
        if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *slot = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.signal.waiters.borrow_mut()[self.slot] = None;
        self.signal.free.borrow_mut().push(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_waiting_connections_and_answers_later_ones() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let signal = Rc::new(StopSignal::default());
                let waiting = tokio::task::spawn_local(signal.stopped());
                let dropped = signal.stopped();
                tokio::task::yield_now().await;
                assert!(!waiting.is_finished());
                drop(dropped);
                signal.stop();
                waiting.await.unwrap();
                // A connection that starts after the stop sees it at once.
                signal.stopped().await;
                // Slots are reused.
                assert_eq!(signal.waiters.borrow().len(), 2);
            })
            .await;
    }
}
