//! The epoll loop, as kura's worker loop (conn/direct): edge-triggered, read to a short read,
//! answer, send.

use std::io;
use std::net::{TcpListener, TcpStream};

use crate::{answer, READ};
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
