//! What the two io_uring loops share: a connection's buffers, sends, accepting, and the loop
//! itself (one `io_uring_enter` a wake-up: it submits what the last completions queued and waits
//! for the next); the loops differ only in how a connection receives ([`Recv`]).

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::{answer, READ};

/// The user data of the listener's accepts; a connection's operations carry its slot index
/// shifted left by one, the low bit set for a send.
const ACCEPT: u64 = u64::MAX;
const MSG_NOSIGNAL: i32 = 0x4000;
const EINTR: i32 = 4;

pub struct Conn {
    pub sock: OwnedFd,
    /// Bytes received and not yet answered (an incomplete request).
    pub rbuf: Vec<u8>,
    /// Replies waiting for the send in flight.
    out: Vec<u8>,
    /// The replies being sent, and how much of them is.
    sending: Vec<u8>,
    sent: usize,
    /// Operations submitted and not yet completed: the connection's buffers stay until none.
    pub in_flight: u32,
    pub closing: bool,
}

impl Conn {
    /// Answers what `rbuf` holds.
    pub fn answer_rbuf(&mut self) {
        let used = answer(&self.rbuf, &mut self.out);
        self.rbuf.drain(..used);
    }

    /// Answers `got` (received into a buffer of the loop's), keeping what is incomplete.
    pub fn answer_bytes(&mut self, got: &[u8]) {
        if self.rbuf.is_empty() {
            let used = answer(got, &mut self.out);
            self.rbuf.extend_from_slice(&got[used..]);
        } else {
            self.rbuf.extend_from_slice(got);
            self.answer_rbuf();
        }
    }
}

/// How a loop's connections receive.
pub trait Recv {
    /// Submits a receive for connection `i` (counting it in `in_flight`).
    fn arm(&mut self, ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()>;
    /// Takes a receive's completion into `c` (answering what it brought, or marking the
    /// connection closing); true when a receive has to be armed again.
    fn done(&mut self, c: &mut Conn, res: i32, flags: u32) -> bool;
    /// After a wake-up's completions are taken.
    fn end_of_batch(&mut self) {}
}

/// Queues `e`, submitting what is queued first if the queue is full.
pub fn push(ring: &mut IoUring, e: squeue::Entry) -> io::Result<()> {
    // SAFETY: every buffer an entry points to is in a boxed Conn (or the loop's buffer ring)
    // that stays until the operation has completed (`in_flight`).
    unsafe {
        while ring.submission().push(&e).is_err() {
            ring.submit()?;
        }
    }
    Ok(())
}

fn arm_send(ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
    let rest = &c.sending[c.sent..];
    let e = opcode::Send::new(
        types::Fd(c.sock.as_raw_fd()),
        rest.as_ptr(),
        rest.len() as u32,
    )
    .flags(MSG_NOSIGNAL)
    .build()
    .user_data(((i as u64) << 1) | 1);
    c.in_flight += 1;
    push(ring, e)
}

/// Sends what was answered unless a send is in flight (it follows that one).
fn send_replies(ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
    if c.sending.is_empty() && !c.out.is_empty() {
        std::mem::swap(&mut c.sending, &mut c.out);
        c.sent = 0;
        arm_send(ring, c, i)?;
    }
    Ok(())
}

fn arm_accept(ring: &mut IoUring, l: &TcpListener) -> io::Result<()> {
    let e = opcode::AcceptMulti::new(types::Fd(l.as_raw_fd()))
        .build()
        .user_data(ACCEPT);
    push(ring, e)
}

fn accepted(
    ring: &mut IoUring,
    conns: &mut Vec<Option<Box<Conn>>>,
    fd: i32,
    recv: &mut impl Recv,
) -> io::Result<()> {
    // SAFETY: a new socket the kernel just gave us, ours alone.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::net::sockopt::set_tcp_nodelay(&sock, true)?;
    let i = conns.iter().position(Option::is_none).unwrap_or_else(|| {
        conns.push(None);
        conns.len() - 1
    });
    let mut c = Box::new(Conn {
        sock,
        rbuf: Vec::with_capacity(READ),
        out: Vec::with_capacity(READ),
        sending: Vec::with_capacity(READ),
        sent: 0,
        in_flight: 0,
        closing: false,
    });
    recv.arm(ring, &mut c, i)?;
    conns[i] = Some(c);
    Ok(())
}

/// Serves the connections `l` accepts on `ring`, receiving with `recv`, until an error.
pub fn run(mut ring: IoUring, l: &TcpListener, mut recv: impl Recv) -> io::Result<()> {
    let mut conns: Vec<Option<Box<Conn>>> = Vec::new();
    arm_accept(&mut ring, l)?;
    let mut done = Vec::with_capacity(256);
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(EINTR) => continue,
            Err(e) => return Err(e),
        }
        done.clear();
        done.extend(
            ring.completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(data, res, flags) in &done {
            if data == ACCEPT {
                if res >= 0 {
                    accepted(&mut ring, &mut conns, res, &mut recv)?;
                }
                if !cqueue::more(flags) {
                    arm_accept(&mut ring, l)?;
                }
                continue;
            }
            let i = (data >> 1) as usize;
            let Some(c) = conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if data & 1 == 0 {
                let again = recv.done(c, res, flags);
                send_replies(&mut ring, c, i)?;
                if again && !c.closing {
                    recv.arm(&mut ring, c, i)?;
                }
            } else {
                c.in_flight -= 1;
                if res < 0 {
                    c.closing = true;
                } else {
                    c.sent += res as usize;
                    if c.sent < c.sending.len() {
                        arm_send(&mut ring, c, i)?;
                    } else {
                        c.sending.clear();
                        send_replies(&mut ring, c, i)?;
                    }
                }
            }
            if c.closing && c.in_flight == 0 {
                conns[i] = None;
            }
        }
        recv.end_of_batch();
    }
}
