//! The io_uring loop with a plain recv: each connection has one recv into its own buffer in
//! flight, armed again once it completes (a recv that finds nothing arms a poll in the kernel).

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;

use io_uring::{opcode, types, IoUring};

use crate::ring::{push, Conn, Recv};
use crate::READ;

struct Plain;

impl Recv for Plain {
    fn arm(&mut self, ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
        if c.rbuf.capacity() - c.rbuf.len() < READ / 4 {
            c.rbuf.reserve(READ);
        }
        let spare = c.rbuf.spare_capacity_mut();
        let e = opcode::Recv::new(
            types::Fd(c.sock.as_raw_fd()),
            spare.as_mut_ptr().cast(),
            spare.len() as u32,
        )
        .build()
        .user_data((i as u64) << 1);
        c.in_flight += 1;
        push(ring, e)
    }

    fn done(&mut self, c: &mut Conn, res: i32, _flags: u32) -> bool {
        c.in_flight -= 1;
        if res <= 0 || c.closing {
            c.closing = true;
            return false;
        }
        // SAFETY: the kernel wrote `res` bytes at the start of the spare capacity, which stayed
        // untouched while the recv was in flight.
        unsafe { c.rbuf.set_len(c.rbuf.len() + res as usize) };
        c.answer_rbuf();
        true
    }
}

pub fn run(l: TcpListener) -> io::Result<()> {
    crate::ring::run(IoUring::new(1024)?, &l, Plain)
}
