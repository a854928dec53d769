//! Loop probe (issue 15): one toy memcached-text server (get, set and version over a store of
//! mutex-guarded hash maps, enough for `kura bench`'s checked values) on three worker loops, to
//! measure what io_uring would save in CPU a request over loopback TCP before building it into
//! kura's worker loop:
//!
//! - `epoll`: kura's loop (conn/direct): edge-triggered epoll, read until a short read, answer,
//!   send; read + send + epoll_wait a request at depth 1.
//! - `uring`: a recv a connection armed at a time and the replies' sends, submitted together:
//!   one io_uring_enter a wake-up.
//! - `multi`: a multishot recv a connection into a ring of provided buffers (armed once), the
//!   sends submitted with the wait; single issuer, deferred task work.
//!
//! Each thread has its own SO_REUSEPORT listener on PORT.
//!
//!   loop-probe epoll|uring|multi PORT THREADS

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const READ: usize = 16 * 1024;
const SHARDS: usize = 64;

type Map = std::collections::HashMap<Vec<u8>, (Vec<u8>, Vec<u8>)>;

/// The toy store: key to (flags as text, value), in shards under a mutex each.
fn store() -> &'static [std::sync::Mutex<Map>] {
    static STORE: std::sync::OnceLock<Vec<std::sync::Mutex<Map>>> = std::sync::OnceLock::new();
    STORE.get_or_init(|| (0..SHARDS).map(|_| Default::default()).collect())
}

fn shard(key: &[u8]) -> &'static std::sync::Mutex<Map> {
    let h = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    &store()[(h % SHARDS as u64) as usize]
}

/// Answers the complete requests at the start of `buf` into `out`; the bytes consumed.
fn answer(buf: &[u8], out: &mut Vec<u8>) -> usize {
    let mut pos = 0;
    while let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') {
        let line = &buf[pos..pos + nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        match words.next() {
            Some(b"get") => {
                for key in words {
                    let map = shard(key).lock().unwrap();
                    if let Some((flags, value)) = map.get(key) {
                        out.extend_from_slice(b"VALUE ");
                        out.extend_from_slice(key);
                        out.push(b' ');
                        out.extend_from_slice(flags);
                        out.push(b' ');
                        out.extend_from_slice(value.len().to_string().as_bytes());
                        out.extend_from_slice(b"\r\n");
                        out.extend_from_slice(value);
                        out.extend_from_slice(b"\r\n");
                    }
                }
                out.extend_from_slice(b"END\r\n");
                pos += nl + 1;
            }
            Some(b"set") => {
                let key = words.next().unwrap_or_default();
                let flags = words.next().unwrap_or_default();
                let n: Option<usize> = words
                    .nth(1)
                    .and_then(|w| std::str::from_utf8(w).ok())
                    .and_then(|w| w.parse().ok());
                let Some(n) = n else {
                    out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
                    pos += nl + 1;
                    continue;
                };
                let start = pos + nl + 1;
                let end = start + n + 2;
                if end > buf.len() {
                    break;
                }
                shard(key).lock().unwrap().insert(
                    key.to_vec(),
                    (flags.to_vec(), buf[start..start + n].to_vec()),
                );
                out.extend_from_slice(b"STORED\r\n");
                pos = end;
            }
            Some(b"version") => {
                out.extend_from_slice(b"VERSION 1.6.18\r\n");
                pos += nl + 1;
            }
            _ => {
                out.extend_from_slice(b"ERROR\r\n");
                pos += nl + 1;
            }
        }
    }
    pos
}

fn listener(port: u16) -> io::Result<TcpListener> {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    rustix::net::sockopt::set_socket_reuseport(&fd, true)?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, 1024)?;
    Ok(TcpListener::from(fd))
}

mod epoll_loop {
    use super::*;
    use rustix::buffer::spare_capacity;
    use rustix::event::epoll::{self, Event, EventData, EventFlags};
    use rustix::net::SendFlags;

    struct Conn {
        sock: TcpStream,
        rbuf: Vec<u8>,
        out: Vec<u8>,
    }

    pub fn run(l: TcpListener) -> io::Result<()> {
        l.set_nonblocking(true)?;
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(&ep, &l, EventData::new_u64(u64::MAX), EventFlags::IN)?;
        let mut conns: Vec<Option<Conn>> = Vec::new();
        let mut events: Vec<Event> = Vec::with_capacity(256);
        loop {
            events.clear();
            match epoll::wait(&ep, spare_capacity(&mut events), None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            for e in &events {
                let token = e.data.u64();
                if token == u64::MAX {
                    while let Ok((s, _)) = l.accept() {
                        s.set_nodelay(true)?;
                        s.set_nonblocking(true)?;
                        let i = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                            conns.push(None);
                            conns.len() - 1
                        });
                        epoll::add(
                            &ep,
                            &s,
                            EventData::new_u64(i as u64),
                            EventFlags::IN | EventFlags::RDHUP | EventFlags::ET,
                        )?;
                        conns[i] = Some(Conn {
                            sock: s,
                            rbuf: Vec::with_capacity(READ),
                            out: Vec::with_capacity(READ),
                        });
                    }
                    continue;
                }
                let i = token as usize;
                let Some(c) = conns[i].as_mut() else { continue };
                if !serve(c) {
                    let _ = epoll::delete(&ep, &c.sock);
                    conns[i] = None;
                }
            }
        }
    }

    /// Reads until a short read, answers, sends; false when the connection is done.
    fn serve(c: &mut Conn) -> bool {
        loop {
            if c.rbuf.capacity() - c.rbuf.len() < READ / 4 {
                c.rbuf.reserve(READ);
            }
            let asked = c.rbuf.capacity() - c.rbuf.len();
            let n = match rustix::io::read(&c.sock, spare_capacity(&mut c.rbuf)) {
                Ok(0) => return false,
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return false,
            };
            let used = answer(&c.rbuf, &mut c.out);
            c.rbuf.drain(..used);
            let mut sent = 0;
            while sent < c.out.len() {
                match rustix::net::send(&c.sock, &c.out[sent..], SendFlags::NOSIGNAL) {
                    Ok(k) => sent += k,
                    Err(rustix::io::Errno::AGAIN) => std::thread::yield_now(),
                    Err(_) => return false,
                }
            }
            c.out.clear();
            if n < asked {
                return true;
            }
        }
    }
}

mod uring_loop {
    use super::*;
    use io_uring::{opcode, squeue, types, IoUring};

    const ACCEPT: u64 = u64::MAX;

    struct Conn {
        sock: OwnedFd,
        rbuf: Vec<u8>,
        out: Vec<u8>,
        sending: Vec<u8>,
        sent: usize,
        in_flight: u32,
        closing: bool,
    }

    fn push(ring: &mut IoUring, e: squeue::Entry) -> io::Result<()> {
        // SAFETY: every buffer an entry points to is in a boxed Conn that stays until its
        // operations have completed (`in_flight`).
        unsafe {
            while ring.submission().push(&e).is_err() {
                ring.submit()?;
            }
        }
        Ok(())
    }

    fn arm_recv(ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
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

    fn arm_send(ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
        let rest = &c.sending[c.sent..];
        let e = opcode::Send::new(
            types::Fd(c.sock.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .flags(libc_msg_nosignal())
        .build()
        .user_data(((i as u64) << 1) | 1);
        c.in_flight += 1;
        push(ring, e)
    }

    fn libc_msg_nosignal() -> i32 {
        0x4000
    }

    pub fn run(l: TcpListener) -> io::Result<()> {
        let mut ring = IoUring::new(1024)?;
        let mut conns: Vec<Option<Box<Conn>>> = Vec::new();
        push(
            &mut ring,
            opcode::AcceptMulti::new(types::Fd(l.as_raw_fd()))
                .build()
                .user_data(ACCEPT),
        )?;
        let mut done = Vec::with_capacity(256);
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(4) => continue,
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
                        // SAFETY: a new socket the kernel just gave us.
                        let sock = unsafe { OwnedFd::from_raw_fd(res) };
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
                        arm_recv(&mut ring, &mut c, i)?;
                        conns[i] = Some(c);
                    }
                    if !io_uring::cqueue::more(flags) {
                        push(
                            &mut ring,
                            opcode::AcceptMulti::new(types::Fd(l.as_raw_fd()))
                                .build()
                                .user_data(ACCEPT),
                        )?;
                    }
                    continue;
                }
                let i = (data >> 1) as usize;
                let Some(c) = conns[i].as_mut() else { continue };
                c.in_flight -= 1;
                if data & 1 == 0 {
                    // A recv.
                    if res <= 0 || c.closing {
                        c.closing = true;
                    } else {
                        // SAFETY: the kernel wrote `res` bytes at the start of the spare capacity.
                        unsafe { c.rbuf.set_len(c.rbuf.len() + res as usize) };
                        let used = answer(&c.rbuf, &mut c.out);
                        c.rbuf.drain(..used);
                        if c.sending.is_empty() && !c.out.is_empty() {
                            std::mem::swap(&mut c.sending, &mut c.out);
                            c.sent = 0;
                            arm_send(&mut ring, c, i)?;
                        }
                        arm_recv(&mut ring, c, i)?;
                    }
                } else if res < 0 {
                    c.closing = true;
                } else {
                    c.sent += res as usize;
                    if c.sent < c.sending.len() {
                        arm_send(&mut ring, c, i)?;
                    } else {
                        c.sending.clear();
                        if !c.out.is_empty() {
                            std::mem::swap(&mut c.sending, &mut c.out);
                            c.sent = 0;
                            arm_send(&mut ring, c, i)?;
                        }
                    }
                }
                if c.closing && c.in_flight == 0 {
                    conns[i] = None;
                }
            }
        }
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("epoll")
        .to_string();
    let port: u16 = args.get(2).and_then(|p| p.parse().ok()).unwrap_or(11311);
    let threads: usize = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(2);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let l = listener(port)?;
            let mode = mode.clone();
            Ok(std::thread::spawn(move || {
                let r = match mode.as_str() {
                    "uring" => uring_loop::run(l),
                    "multi" => multi_loop::run(l),
                    _ => epoll_loop::run(l),
                };
                if let Err(e) = r {
                    eprintln!("loop failed: {e}");
                }
            }))
        })
        .collect::<io::Result<_>>()?;
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

mod multi_loop {
    //! Multishot recv into a ring of provided buffers: a connection's recv is armed once;
    //! each wake-up's io_uring_enter submits the sends of what it answered.
    use super::*;
    use io_uring::{cqueue, opcode, squeue, types, IoUring};
    use std::sync::atomic::{AtomicU16, Ordering};

    const ACCEPT: u64 = u64::MAX;
    const ENTRIES: u16 = 512;
    const BUF: usize = 4096;
    const GROUP: u16 = 7;

    struct Conn {
        sock: OwnedFd,
        rbuf: Vec<u8>,
        out: Vec<u8>,
        sending: Vec<u8>,
        sent: usize,
        in_flight: u32,
        closing: bool,
    }

    struct Bufs {
        ring: *mut types::BufRingEntry,
        data: Vec<u8>,
        tail: u16,
    }

    impl Bufs {
        fn give(&mut self, bid: u16) {
            let mask = ENTRIES - 1;
            // SAFETY: the ring has ENTRIES entries; this one is the kernel's to take only
            // once the tail passes it.
            let e = unsafe { &mut *self.ring.add(usize::from(self.tail & mask)) };
            e.set_addr(self.data.as_ptr() as u64 + u64::from(bid) * BUF as u64);
            e.set_len(BUF as u32);
            e.set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
        }
        fn publish(&self) {
            // SAFETY: the tail field of the registered ring.
            let tail = unsafe { &*(types::BufRingEntry::tail(self.ring) as *const AtomicU16) };
            tail.store(self.tail, Ordering::Release);
        }
        fn slice(&self, bid: u16, len: usize) -> &[u8] {
            let at = usize::from(bid) * BUF;
            &self.data[at..at + len]
        }
    }

    fn push(ring: &mut IoUring, e: squeue::Entry) -> io::Result<()> {
        // SAFETY: buffers pointed to live in boxed Conns until their operations complete.
        unsafe {
            while ring.submission().push(&e).is_err() {
                ring.submit()?;
            }
        }
        Ok(())
    }

    fn arm_recv(ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
        let e = opcode::RecvMulti::new(types::Fd(c.sock.as_raw_fd()), GROUP)
            .build()
            .user_data((i as u64) << 1);
        c.in_flight += 1;
        push(ring, e)
    }

    fn arm_send(ring: &mut IoUring, c: &mut Conn, i: usize) -> io::Result<()> {
        let rest = &c.sending[c.sent..];
        let e = opcode::Send::new(
            types::Fd(c.sock.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .flags(0x4000)
        .build()
        .user_data(((i as u64) << 1) | 1);
        c.in_flight += 1;
        push(ring, e)
    }

    pub fn run(l: TcpListener) -> io::Result<()> {
        let mut ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(1024)?;
        let layout = std::alloc::Layout::from_size_align(usize::from(ENTRIES) * 16, 4096)
            .map_err(|_| io::Error::other("layout"))?;
        // SAFETY: a non-zero layout; zeroed entries are valid.
        let base = unsafe { std::alloc::alloc_zeroed(layout) } as *mut types::BufRingEntry;
        let mut bufs = Bufs {
            ring: base,
            data: vec![0; usize::from(ENTRIES) * BUF],
            tail: 0,
        };
        // SAFETY: the ring memory lives until the process ends.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(base as u64, ENTRIES, GROUP, 0)?;
        }
        for bid in 0..ENTRIES {
            bufs.give(bid);
        }
        bufs.publish();
        let mut conns: Vec<Option<Box<Conn>>> = Vec::new();
        push(
            &mut ring,
            opcode::AcceptMulti::new(types::Fd(l.as_raw_fd()))
                .build()
                .user_data(ACCEPT),
        )?;
        let mut done = Vec::with_capacity(256);
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(4) => continue,
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
                        // SAFETY: a new socket the kernel just gave us.
                        let sock = unsafe { OwnedFd::from_raw_fd(res) };
                        rustix::net::sockopt::set_tcp_nodelay(&sock, true)?;
                        let i = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                            conns.push(None);
                            conns.len() - 1
                        });
                        let mut c = Box::new(Conn {
                            sock,
                            rbuf: Vec::new(),
                            out: Vec::with_capacity(READ),
                            sending: Vec::with_capacity(READ),
                            sent: 0,
                            in_flight: 0,
                            closing: false,
                        });
                        arm_recv(&mut ring, &mut c, i)?;
                        conns[i] = Some(c);
                    }
                    if !cqueue::more(flags) {
                        push(
                            &mut ring,
                            opcode::AcceptMulti::new(types::Fd(l.as_raw_fd()))
                                .build()
                                .user_data(ACCEPT),
                        )?;
                    }
                    continue;
                }
                let i = (data >> 1) as usize;
                let Some(c) = conns[i].as_mut() else { continue };
                if data & 1 == 0 {
                    let more = cqueue::more(flags);
                    if !more {
                        c.in_flight -= 1;
                    }
                    if let Some(bid) = cqueue::buffer_select(flags) {
                        if res > 0 && !c.closing {
                            let got = bufs.slice(bid, res as usize);
                            if c.rbuf.is_empty() {
                                let used = answer(got, &mut c.out);
                                c.rbuf.extend_from_slice(&got[used..]);
                            } else {
                                c.rbuf.extend_from_slice(got);
                                let used = answer(&c.rbuf, &mut c.out);
                                c.rbuf.drain(..used);
                            }
                            if c.sending.is_empty() && !c.out.is_empty() {
                                std::mem::swap(&mut c.sending, &mut c.out);
                                c.sent = 0;
                                arm_send(&mut ring, c, i)?;
                            }
                        }
                        bufs.give(bid);
                    }
                    if res == 0 || (res < 0 && res != -105) {
                        c.closing = true;
                    } else if !more && !c.closing {
                        // ENOBUFS or the kernel ended it: arm again.
                        arm_recv(&mut ring, c, i)?;
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
                            if !c.out.is_empty() {
                                std::mem::swap(&mut c.sending, &mut c.out);
                                c.sent = 0;
                                arm_send(&mut ring, c, i)?;
                            }
                        }
                    }
                }
                if c.closing && c.in_flight == 0 {
                    conns[i] = None;
                }
            }
            bufs.publish();
        }
    }
}
