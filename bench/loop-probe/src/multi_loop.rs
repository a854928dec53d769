//! The io_uring loop with a multishot recv: armed once a connection, it takes a buffer from a
//! ring of provided buffers for each arrival; single issuer, task work deferred to the wait.

use std::io;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, types, IoUring};

use crate::ring::{push, Conn, Recv};

const ENTRIES: u16 = 512;
const BUF: usize = 4096;
const GROUP: u16 = 7;
const ENOBUFS: i32 = 105;

/// The provided buffers: a ring of entries the kernel takes from, and their memory.
struct Bufs {
    ring: *mut types::BufRingEntry,
    data: Vec<u8>,
    tail: u16,
}

impl Bufs {
    /// Puts buffer `bid` back in the ring (seen by the kernel at the next `publish`).
    fn give(&mut self, bid: u16) {
        // SAFETY: the ring has ENTRIES entries, a power of two; the entry at the tail is not
        // the kernel's until the tail passes it.
        let e = unsafe { &mut *self.ring.add(usize::from(self.tail & (ENTRIES - 1))) };
        e.set_addr(self.data.as_ptr() as u64 + u64::from(bid) * BUF as u64);
        e.set_len(BUF as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field of the registered ring, which the kernel reads.
        let tail = unsafe { &*(types::BufRingEntry::tail(self.ring) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    fn slice(&self, bid: u16, len: usize) -> &[u8] {
        let at = usize::from(bid) * BUF;
        &self.data[at..at + len.min(BUF)]
    }
}

impl Recv for Bufs {
    fn arm(&mut self, ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
        let e = opcode::RecvMulti::new(types::Fd(c.sock.as_raw_fd()), GROUP)
            .build()
            .user_data((i as u64) << 1);
        c.in_flight += 1;
        push(ring, e)
    }

    fn done(&mut self, c: &mut Conn, res: i32, flags: u32) -> bool {
        let more = cqueue::more(flags);
        if !more {
            c.in_flight -= 1;
        }
        if let Some(bid) = cqueue::buffer_select(flags) {
            if res > 0 && !c.closing {
                c.answer_bytes(self.slice(bid, res as usize));
            }
            self.give(bid);
        }
        if res == 0 || (res < 0 && res != -ENOBUFS) {
            c.closing = true;
            return false;
        }
        // Out of buffers, or the kernel ended it: armed again.
        !more
    }

    fn end_of_batch(&mut self) {
        self.publish();
    }
}

pub fn run(l: TcpListener) -> io::Result<()> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(1024)?;
    let layout = std::alloc::Layout::from_size_align(usize::from(ENTRIES) * 16, 4096)
        .map_err(|_| io::Error::other("buffer ring layout"))?;
    // SAFETY: a layout of non-zero size; zeroed entries are valid. The memory is never freed:
    // the ring uses it until the process ends.
    let base = unsafe { std::alloc::alloc_zeroed(layout) } as *mut types::BufRingEntry;
    if base.is_null() {
        return Err(io::Error::other("no memory for the buffer ring"));
    }
    let mut bufs = Bufs {
        ring: base,
        data: vec![0; usize::from(ENTRIES) * BUF],
        tail: 0,
    };
    // SAFETY: the entries live until the process ends (above).
    unsafe {
        ring.submitter()
            .register_buf_ring_with_flags(base as u64, ENTRIES, GROUP, 0)?;
    }
    for bid in 0..ENTRIES {
        bufs.give(bid);
    }
    bufs.publish();
    crate::ring::run(ring, &l, bufs)
}
