//! The worker's readiness set: an epoll set of its connections, each
//! registered edge-triggered for reading under the index of its slot, and
//! an eventfd the task thread writes to wake the worker (new connections,
//! the stop). Through rustix, whose calls go straight to the kernel: libc's
//! epoll_wait is a cancellation point, some 30 instructions a wait for a
//! cancellation no thread here uses, and the loop waits once a request
//! when it is not busy.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use rustix::event::{eventfd, EventfdFlags};

/// The token of the set's waker.
const WAKE: u64 = u64::MAX;

/// A ready connection, by the token it was added under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ready {
    pub token: usize,
    /// The client's side is closed, or the socket failed: data and the end
    /// of file can come in one event, and no event follows for the end.
    pub closed: bool,
}

/// The set.
pub(super) struct Set {
    epoll: OwnedFd,
}

/// What wakes the worker from its wait.
pub(super) struct Waker {
    fd: OwnedFd,
}

impl Set {
    /// A new set, with its waker in it.
    pub(super) fn new() -> io::Result<(Set, Waker)> {
        let set = Set {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
        };
        let waker = Waker {
            fd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        };
        set.register(waker.fd.as_fd(), WAKE)?;
        Ok((set, waker))
    }

    /// Adds a connection's socket under `token`.
    pub(super) fn add(&self, fd: BorrowedFd<'_>, token: usize) -> io::Result<()> {
        self.register(fd, token as u64)
    }

    fn register(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let flags = EventFlags::IN | EventFlags::RDHUP | EventFlags::ET;
        Ok(epoll::add(
            &self.epoll,
            fd,
            EventData::new_u64(token),
            flags,
        )?)
    }

    /// Takes a socket out of the set (before it closes or moves to a task).
    pub(super) fn remove(&self, fd: BorrowedFd<'_>) {
        let _ = epoll::delete(&self.epoll, fd);
    }

    /// Waits until something is ready; `events` then holds what is (the
    /// waker's own events are taken out: `woken` says whether it rang).
    pub(super) fn wait(&self, events: &mut Vec<Event>, woken: &mut bool) -> io::Result<()> {
        events.clear();
        epoll::wait(&self.epoll, spare_capacity(events), None)?;
        *woken = false;
        events.retain(|e| {
            let wake = e.data.u64() == WAKE;
            *woken |= wake;
            !wake
        });
        Ok(())
    }
}

/// What an event says of its connection.
pub(super) fn ready(e: &Event) -> Ready {
    let flags = e.flags;
    Ready {
        token: e.data.u64() as usize,
        closed: flags.intersects(EventFlags::HUP | EventFlags::RDHUP | EventFlags::ERR),
    }
}

impl Waker {
    /// Wakes the worker (at once, or from its next wait).
    pub(super) fn wake(&self) {
        // A full counter (EAGAIN) is a wake-up already pending.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Empties the counter once the ringing is seen, so it never fills
    /// (the edge-triggered set reports every write all the same).
    pub(super) fn reset(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn connections_and_the_waker_are_told_apart() {
        let (set, waker) = Set::new().expect("set");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (sock, _) = listener.accept().expect("accept");
        set.add(sock.as_fd(), 7).expect("add");
        let mut events = Vec::with_capacity(8);
        let mut woken = false;
        // What one wait finds: the connections ready, and whether the
        // waker rang.
        let mut wait = || {
            set.wait(&mut events, &mut woken).expect("wait");
            (events.iter().map(ready).collect::<Vec<_>>(), woken)
        };
        let conn = |closed| vec![Ready { token: 7, closed }];

        client.write_all(b"get a\r\n").expect("write");
        assert_eq!(wait(), (conn(false), false));

        waker.wake();
        assert_eq!(wait(), (vec![], true), "the waker alone");
        waker.reset();

        // The client's bytes and its end in one event: closed.
        client.write_all(b"x").expect("write");
        drop(client);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(wait(), (conn(true), false));

        // Removed: nothing more from it.
        set.remove(sock.as_fd());
        waker.wake();
        assert_eq!(wait(), (vec![], true));
    }
}
