//! The worker's readiness loop: plain TCP and Unix connections served
//! straight from their socket's readiness, without a task each. Each worker
//! thread blocks in epoll_wait on its own set (set.rs) of its connections and,
//! for every ready one, reads, frames, runs and answers with plain
//! syscalls: no future, waker or readiness registration per connection,
//! and no async runtime between the wake-up and the read.
//!
//! A connection that has to wait for anything but its socket's next bytes
//! (room for a large value, a client that does not read its replies, a
//! replication stream, an invalidation subscription) moves to a task of
//! its own ([`super::serve`] with a [`super::Resume`]) on the worker's task
//! thread (`kura-wtask-N`: a current-thread tokio loop beside each worker,
//! which also serves its TLS connections, takes its new connections from
//! the acceptor and hears the stop, telling the worker through the set's
//! waker). A get whose values are on the flash tier moves its connection
//! to a task too, which waits for the reads (exec/flash.rs). The loop is
//! not used where every request may wait (`--data-dir`,
//! `--min-replicas-ack`, `-o idle_timeout`); `-o worker_loop=tasks` turns
//! it off.

use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use std::os::fd::AsFd;

use tokio::sync::mpsc;

use super::End;
use crate::metrics::ThreadStats;
use crate::server::Incoming;
use crate::shared::{RunState, Shared};
use crate::stop::StopSignal;

mod client;
mod set;

use client::{Client, Moved, Outcome, Sock, Worker};
use set::{Set, Waker};

/// Events taken from the set at a time.
const EVENTS: usize = 256;

/// True when this server's plain connections go through the readiness
/// loop: nothing in its settings makes requests wait.
pub(crate) fn enabled(shared: &Shared) -> bool {
    let c = &shared.config;
    c.worker_loop == crate::config::WorkerLoop::Direct
        && c.idle_timeout == 0
        && c.min_replicas_ack == 0
        && shared.keyspace.durable().is_none()
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

/// What the task thread hands to the worker's loop.
#[derive(Default)]
struct Mailbox {
    arrivals: Mutex<Vec<Incoming>>,
    has_arrivals: AtomicBool,
    stopping: AtomicBool,
}

/// What the worker's loop hands to its task thread.
enum Handoff {
    /// A connection to serve in a task from the start (TLS; any after the stop).
    New(Incoming),
    /// A connection of the loop that has to wait for something (boxed: the
    /// channel's slots stay the size of a new connection; moves are rare).
    Moved(Box<Moved>),
}

/// Runs worker `index`: its readiness loop on this thread, its tasks on a
/// thread beside it; returns once the server has stopped and every
/// connection of both has finished.
pub(crate) fn run(index: usize, shared: Arc<Shared>, rx: mpsc::UnboundedReceiver<Incoming>) {
    let (set, waker) = match Set::new() {
        Ok((set, waker)) => (set, Arc::new(waker)),
        Err(e) => {
            tracing::warn!("worker {index}: no readiness loop ({e}); a task per connection");
            crate::server::worker_tasks(index, shared, rx);
            return;
        }
    };
    let mailbox = Arc::new(Mailbox::default());
    let (handoff, handoffs) = mpsc::unbounded_channel();
    let (handle_tx, handle_rx) = std::sync::mpsc::sync_channel(1);
    let tasks = std::thread::Builder::new()
        .name(format!("kura-wtask-{index}"))
        .spawn({
            let (shared, mailbox, waker) = (shared.clone(), mailbox.clone(), waker.clone());
            move || task_thread(index, shared, rx, handoffs, mailbox, waker, handle_tx)
        });
    let tasks = match tasks {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("worker {index}: cannot start its task thread: {e}");
            shared.shutdown();
            return;
        }
    };
    // The request path may spawn on a runtime (tokio::spawn): the task
    // thread's.
    let handle = handle_rx.recv().ok();
    let _entered = handle.as_ref().map(|h| h.enter());
    serve_loop(
        &shared,
        &shared.thread_stats[index],
        (&set, &waker),
        &mailbox,
        &handoff,
    );
    drop(handoff);
    drop(waker);
    let _ = tasks.join();
}

/// The task thread of worker `index`: new connections to the loop (through
/// the mailbox and the waker), TLS connections and moved ones in tasks,
/// the stop.
fn task_thread(
    index: usize,
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Incoming>,
    mut handoffs: mpsc::UnboundedReceiver<Handoff>,
    mailbox: Arc<Mailbox>,
    waker: Arc<Waker>,
    handle_tx: std::sync::mpsc::SyncSender<tokio::runtime::Handle>,
) {
    let rt = match crate::timer::worker_runtime(false) {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("worker {index}: cannot start its task loop: {e}");
            drop(handle_tx);
            mailbox.stopping.store(true, Ordering::Release);
            waker.wake();
            return;
        }
    };
    let _ = handle_tx.send(rt.handle().clone());
    crate::server::place_worker(&shared, index);
    // The tasks' own counters (one writer a ThreadStats).
    let stats = shared.thread_stats[shared.config.threads + 1 + index].clone();
    let stop = Rc::new(StopSignal::default());
    let local = tokio::task::LocalSet::new();
    local.spawn_local({
        let (stop, mut watch, mailbox, waker) =
            (stop.clone(), shared.watch(), mailbox.clone(), waker.clone());
        async move {
            let _ = watch.wait_for(|s| *s == RunState::Stopping).await;
            stop.stop();
            mailbox.stopping.store(true, Ordering::Release);
            waker.wake();
        }
    });
    local.spawn_local({
        let (shared, stats, stop, mailbox) =
            (shared.clone(), stats.clone(), stop.clone(), mailbox.clone());
        async move {
            while let Some(incoming) = rx.recv().await {
                if mailbox.stopping.load(Ordering::Acquire) {
                    // A task sees the stop at once.
                    crate::server::spawn_task(incoming, &shared, &stats, &stop);
                    continue;
                }
                if let Ok(mut a) = mailbox.arrivals.lock() {
                    a.push(incoming);
                }
                mailbox.has_arrivals.store(true, Ordering::Release);
                waker.wake();
            }
        }
    });
    local.spawn_local(async move {
        while let Some(h) = handoffs.recv().await {
            match h {
                Handoff::New(incoming) => {
                    crate::server::spawn_task(incoming, &shared, &stats, &stop)
                }
                Handoff::Moved(m) => (*m).spawn(&shared, &stats, &stop),
            }
        }
    });
    rt.block_on(local);
}

/// The loop: waits on the set, serves what is ready, takes arrivals, until
/// the stop.
fn serve_loop(
    shared: &Shared,
    stats: &ThreadStats,
    (set, waker): (&Set, &Waker),
    mailbox: &Mailbox,
    handoff: &mpsc::UnboundedSender<Handoff>,
) {
    let w = Worker {
        shared,
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
    let mut events = Vec::with_capacity(EVENTS);
    let mut woken = false;
    let mut again: Vec<usize> = Vec::new();
    loop {
        if let Err(e) = set.wait(&mut events, &mut woken) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!("worker: readiness loop failed: {e}");
            break;
        }
        for ready in events.iter().map(set::ready) {
            serve_one(ready, &mut clients, &mut again, &w, set, handoff);
        }
        // Connections that gave way after -R requests, until none is left.
        while !again.is_empty() {
            for token in std::mem::take(&mut again) {
                let ready = set::Ready {
                    token,
                    closed: false,
                };
                serve_one(ready, &mut clients, &mut again, &w, set, handoff);
            }
        }
        if woken {
            waker.reset();
        }
        if mailbox.stopping.load(Ordering::Acquire) {
            break;
        }
        if mailbox.has_arrivals.swap(false, Ordering::Acquire) {
            let arrivals = match mailbox.arrivals.lock() {
                Ok(mut a) => std::mem::take(&mut *a),
                Err(_) => Vec::new(),
            };
            for incoming in arrivals {
                admit(incoming, &mut clients, set, (shared, stats, handoff));
            }
        }
    }
    // The server stops: connections of the loop have nothing half done
    // (everything read is answered), so they close now; those that arrived
    // but were not yet taken go to tasks, which see the stop.
    for c in std::mem::take(&mut clients.slots).into_iter().flatten() {
        set.remove(c.sock.as_fd());
        c.close(shared, End::Stopping);
    }
    if let Ok(mut a) = mailbox.arrivals.lock() {
        for incoming in a.drain(..) {
            hand_off(handoff, Handoff::New(incoming), shared);
        }
    }
}

/// Sends `h` to the worker's task thread. Should that thread be gone (it
/// could not start, or it ended first at the stop), the send's error drops
/// the connection, which closes it, and it leaves the count of open
/// connections as every other closing does.
fn hand_off(handoff: &mpsc::UnboundedSender<Handoff>, h: Handoff, shared: &Shared) {
    if handoff.send(h).is_err() {
        shared.counters.curr.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Takes a new connection into the loop (a TLS one goes to a task).
fn admit<'a>(
    incoming: Incoming,
    clients: &mut Clients<'a>,
    set: &Set,
    (shared, stats, handoff): (&'a Shared, &'a ThreadStats, &mpsc::UnboundedSender<Handoff>),
) {
    let (sock, guard) = match incoming {
        Incoming::Tcp(s, g) => {
            let _ = s.set_nodelay(true);
            (Sock::Tcp(s), g)
        }
        Incoming::Unix(s, g) => (Sock::Unix(s), g),
        tls @ Incoming::Tls(..) => {
            hand_off(handoff, Handoff::New(tls), shared);
            return;
        }
    };
    let nonblocking = match &sock {
        Sock::Tcp(s) => s.set_nonblocking(true),
        Sock::Unix(s) => s.set_nonblocking(true),
    };
    let i = clients.add(Client::new(sock, guard, shared, stats));
    let registered = nonblocking.and_then(|()| match &clients.slots[i] {
        Some(c) => set.add(c.sock.as_fd(), i),
        None => Ok(()),
    });
    if registered.is_err() {
        if let Some(c) = clients.take(i) {
            c.close(shared, End::Io);
        }
    }
}

/// Serves the connection with token `i`, and closes it or moves it to a
/// task when it is done here.
fn serve_one<'a>(
    set::Ready { token: i, closed }: set::Ready,
    clients: &mut Clients<'a>,
    again: &mut Vec<usize>,
    w: &Worker<'a>,
    set: &Set,
    handoff: &mpsc::UnboundedSender<Handoff>,
) {
    let Some(Some(c)) = clients.slots.get_mut(i) else {
        return;
    };
    match c.serve(w, closed) {
        Outcome::Wait => {}
        Outcome::Again => {
            if !again.contains(&i) {
                again.push(i);
            }
        }
        Outcome::Task(then) => {
            if let Some(c) = clients.take(i) {
                set.remove(c.sock.as_fd());
                hand_off(
                    handoff,
                    Handoff::Moved(Box::new(c.into_moved(then))),
                    w.shared,
                );
            }
        }
        Outcome::End(end) => {
            if let Some(c) = clients.take(i) {
                set.remove(c.sock.as_fd());
                c.close(w.shared, end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_connection_the_task_thread_cannot_take_is_closed_and_uncounted() {
        let shared = Shared::new(
            crate::ServerConfig::default(),
            kura_keyspace::Keyspace::in_memory(Arc::default()),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (sock, _) = listener.accept().expect("accept");
        // As the acceptor counts and registers it.
        shared.counters.curr.fetch_add(1, Ordering::Relaxed);
        let guard = shared.conns.register(1, "peer".into(), "local".into(), 0);
        let (tx, rx) = mpsc::unbounded_channel();
        drop(rx);
        hand_off(&tx, Handoff::New(Incoming::Tcp(sock, guard)), &shared);
        assert_eq!(shared.counters.curr.load(Ordering::Relaxed), 0);
        let mut buf = [0u8; 1];
        assert_eq!(client.read(&mut buf).expect("read"), 0, "closed");
    }
}
