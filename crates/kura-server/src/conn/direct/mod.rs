//! The worker's readiness loop: plain TCP and Unix connections served
//! straight from their socket's readiness, without a task each. One epoll
//! set (mio) per worker holds its connections; the worker's event loop
//! wakes one task when that set has events, and the task reads, frames,
//! runs and answers every ready connection in turn with plain syscalls:
//! no future, waker or readiness registration per connection. What is
//! left of tokio is its wake-up of this one task (its park and the set's
//! readiness, some 1,000 instructions a wake-up, shared by every request
//! it serves; bench/results/2026-11-28-worker-loop.txt).
//!
//! A connection that has to wait for anything but its socket's next bytes
//! (room for a large value, a client that does not read its replies, a
//! replication stream, an invalidation subscription) moves to a task of
//! its own ([`super::serve`] with a [`super::Resume`]) and stays there. The loop is
//! not used where every request may wait (`--data-dir`, `--min-replicas-ack`,
//! `-o idle_timeout`), nor for TLS (`-o worker_loop=tasks` turns it off).

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use super::End;
use crate::metrics::ThreadStats;
use crate::server::Incoming;
use crate::shared::Shared;
use crate::stop::StopSignal;

mod client;

use client::{Client, Outcome, Sock, Worker};

/// Events taken from the set at a time.
const EVENTS: usize = 256;

/// True when this server's plain connections go through the readiness
/// loop: nothing in its settings makes requests wait.
pub(crate) fn enabled(shared: &Shared) -> bool {
    let c = &shared.config;
    c.worker_loop == crate::config::WorkerLoop::Direct
        && c.idle_timeout == 0
        && c.min_replicas_ack == 0
        && shared.durable.is_none()
}

/// The connections of one worker's loop, by token.
struct Clients<'a> {
    slots: Vec<Option<Client<'a>>>,
    free: Vec<usize>,
}

impl<'a> Clients<'a> {
    fn add(&mut self, c: Client<'a>) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(c);
                i
            }
            None => {
                self.slots.push(Some(c));
                self.slots.len() - 1
            }
        }
    }

    fn take(&mut self, i: usize) -> Option<Client<'a>> {
        let c = self.slots.get_mut(i)?.take()?;
        self.free.push(i);
        Some(c)
    }
}

/// The token of the set's waker: connections arrived, or the stop.
const WAKE: Token = Token(usize::MAX);

/// What other tasks of the worker hand to its loop.
#[derive(Default)]
struct Mailbox {
    arrivals: RefCell<Vec<Incoming>>,
    stopping: Cell<bool>,
}

/// Serves a worker's connections until the server stops and the acceptor
/// has gone: plain ones in the readiness loop, TLS ones in tasks.
pub(crate) async fn run_worker(
    shared: Arc<Shared>,
    stats: Arc<ThreadStats>,
    stop: Rc<StopSignal>,
    mut rx: mpsc::UnboundedReceiver<Incoming>,
) {
    let (mut set, registry, waker) = match readiness_set() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("worker: no readiness loop ({e}); a task per connection");
            while let Some(incoming) = rx.recv().await {
                crate::server::spawn_task(incoming, &shared, &stats, &stop);
            }
            return;
        }
    };
    // Arrivals and the stop reach the loop through the set's waker, so that
    // the loop waits on the set alone (a select over the queue and the stop
    // beside it cost some 400 instructions at every wake-up).
    let mailbox = Rc::new(Mailbox::default());
    tokio::task::spawn_local({
        let (mailbox, waker, stop) = (mailbox.clone(), waker.clone(), stop.clone());
        let (shared, stats) = (shared.clone(), stats.clone());
        async move {
            while let Some(incoming) = rx.recv().await {
                if mailbox.stopping.get() {
                    // Served by a task, which sees the stop at once.
                    crate::server::spawn_task(incoming, &shared, &stats, &stop);
                } else {
                    mailbox.arrivals.borrow_mut().push(incoming);
                    let _ = waker.wake();
                }
            }
        }
    });
    tokio::task::spawn_local({
        let (mailbox, waker, stop) = (mailbox.clone(), waker.clone(), stop.clone());
        async move {
            stop.stopped().await;
            mailbox.stopping.set(true);
            let _ = waker.wake();
        }
    });
    let w = Worker {
        shared: &shared,
        limits: shared.limits,
        no_room: kura_proto::Limits {
            item_size_max: 0,
            ..shared.limits
        },
        per_event: shared.config.reqs_per_event.max(1) as usize,
    };
    let mut clients = Clients {
        slots: Vec::new(),
        free: Vec::new(),
    };
    let mut events = Events::with_capacity(EVENTS);
    let mut again: Vec<usize> = Vec::new();
    let ctx = (&shared, &stats, &stop);
    // The waker lives as long as the loop: dropped, its descriptor would
    // leave the set with its last event unread.
    let _waker = waker;
    'serving: loop {
        let mut ready = match set.readable_mut().await {
            Ok(guard) => guard,
            Err(e) => {
                tracing::error!("worker: readiness loop failed: {e}");
                break;
            }
        };
        loop {
            if let Err(e) = ready
                .get_inner_mut()
                .poll(&mut events, Some(Duration::ZERO))
            {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!("worker: readiness loop failed: {e}");
                    break 'serving;
                }
                continue;
            }
            let n = events.iter().count();
            for event in events.iter() {
                if event.token() != WAKE {
                    serve_one(
                        event.token().0,
                        &mut clients,
                        &mut again,
                        &w,
                        &registry,
                        ctx,
                    );
                }
            }
            // What the waker's event announced (checked at every round: the
            // two cells cost less than telling which wake-up it was).
            if mailbox.stopping.get() {
                break 'serving;
            }
            if !mailbox.arrivals.borrow().is_empty() {
                let arrivals = std::mem::take(&mut *mailbox.arrivals.borrow_mut());
                for incoming in arrivals {
                    admit(incoming, &mut clients, &registry, ctx);
                }
            }
            // Connections that gave way after -R requests, until none is left.
            while !again.is_empty() {
                for i in std::mem::take(&mut again) {
                    serve_one(i, &mut clients, &mut again, &w, &registry, ctx);
                }
            }
            if n < EVENTS {
                break;
            }
        }
        // Cleared unless an event came since the set was last read.
        ready.clear_ready();
    }
    // The server stops: connections of the loop have nothing half done
    // (everything read is answered), so they close now; those that arrived
    // but were not yet taken go to tasks, which see the stop.
    for c in std::mem::take(&mut clients.slots).into_iter().flatten() {
        let _ = registry.deregister(&mut SourceFd(&c.sock.fd()));
        c.close(&shared, End::Stopping);
    }
    for incoming in std::mem::take(&mut *mailbox.arrivals.borrow_mut()) {
        crate::server::spawn_task(incoming, &shared, &stats, &stop);
    }
}

/// The worker's epoll set (its descriptor watched by the worker's event
/// loop), a handle to register sockets in it, and its waker.
fn readiness_set() -> io::Result<(AsyncFd<Poll>, mio::Registry, Arc<mio::Waker>)> {
    let poll = Poll::new()?;
    let registry = poll.registry().try_clone()?;
    let waker = Arc::new(mio::Waker::new(&registry, WAKE)?);
    // SAFETY: a mio `Poll` owns its epoll descriptor from creation to drop
    // and always answers the same one, as registration asks; the `Poll` is
    // never swapped out of the `AsyncFd` (only polled through
    // `get_inner_mut`).
    let set = unsafe { AsyncFd::register_with_interest(poll, tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)?;
    Ok((set, registry, waker))
}

/// Takes a new connection into the loop (a TLS one goes to a task).
fn admit<'a>(
    incoming: Incoming,
    clients: &mut Clients<'a>,
    registry: &mio::Registry,
    (shared, stats, stop): (&'a Arc<Shared>, &'a Arc<ThreadStats>, &Rc<StopSignal>),
) {
    let (sock, guard) = match incoming {
        Incoming::Tcp(s, g) => {
            let _ = s.set_nodelay(true);
            (Sock::Tcp(s), g)
        }
        Incoming::Unix(s, g) => (Sock::Unix(s), g),
        tls @ Incoming::Tls(..) => {
            crate::server::spawn_task(tls, shared, stats, stop);
            return;
        }
    };
    let nonblocking = match &sock {
        Sock::Tcp(s) => s.set_nonblocking(true),
        Sock::Unix(s) => s.set_nonblocking(true),
    };
    let fd = sock.fd();
    let i = clients.add(Client::new(sock, guard, shared, stats));
    let registered = nonblocking
        .and_then(|()| registry.register(&mut SourceFd(&fd), Token(i), Interest::READABLE));
    if registered.is_err() {
        if let Some(c) = clients.take(i) {
            c.close(shared, End::Io);
        }
    }
}

/// Serves the connection with token `i`, and closes it or moves it to a
/// task when it is done here.
fn serve_one<'a>(
    i: usize,
    clients: &mut Clients<'a>,
    again: &mut Vec<usize>,
    w: &Worker<'a>,
    registry: &mio::Registry,
    (shared, stats, stop): (&Arc<Shared>, &Arc<ThreadStats>, &Rc<StopSignal>),
) {
    let Some(Some(c)) = clients.slots.get_mut(i) else {
        return;
    };
    match c.serve(w) {
        Outcome::Wait => {}
        Outcome::Again => {
            if !again.contains(&i) {
                again.push(i);
            }
        }
        Outcome::Task(then) => {
            if let Some(c) = clients.take(i) {
                let _ = registry.deregister(&mut SourceFd(&c.sock.fd()));
                c.into_task(then, shared, stats, stop);
            }
        }
        Outcome::End(end) => {
            if let Some(c) = clients.take(i) {
                let _ = registry.deregister(&mut SourceFd(&c.sock.fd()));
                c.close(shared, end);
            }
        }
    }
}
