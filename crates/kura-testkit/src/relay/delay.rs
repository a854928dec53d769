//! A TCP relay that delays every chunk by a fixed time in each direction,
//! a network stand-in on loopback (this kernel has no netem). The client
//! benches (kura-client's `writeback`, kura-record's `login`) put one in
//! front of each cache server.
//!
//! Each direction of a connection is two threads: a reader stamps every
//! chunk with its deadline (arrival + delay) and a writer holds it until
//! then. A chunk waits for its own deadline only, so bytes that follow each
//! other closely arrive closely: a pipelined batch pays the delay once, as
//! on a network. Tokio's timers round up to whole milliseconds, so the
//! writer sleeps until [`SPIN`] before the deadline and spins on
//! [`Instant`] for the rest: a 500 µs delay is 500 µs plus the wake-up, not
//! 1-2 ms. Spinning costs CPU only in the last [`SPIN`] of each chunk's wait.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long before a deadline the writer stops sleeping and spins.
pub const SPIN: Duration = Duration::from_micros(150);

/// Starts one relay per server (`host:port`), each on a free loopback port,
/// and returns their addresses in the same order. The relays live until the
/// process exits; each connection's threads end when either side closes.
pub fn start(servers: &[String], delay: Duration) -> io::Result<Vec<String>> {
    let mut out = Vec::with_capacity(servers.len());
    for server in servers {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        out.push(listener.local_addr()?.to_string());
        let upstream = server.clone();
        thread::Builder::new()
            .name("relay-accept".into())
            .spawn(move || {
                for down in listener.incoming().flatten() {
                    if let Err(e) = connect(down, &upstream, delay) {
                        eprintln!("relay to {upstream}: {e}");
                    }
                }
            })?;
    }
    Ok(out)
}

fn connect(down: TcpStream, upstream: &str, delay: Duration) -> io::Result<()> {
    let up = TcpStream::connect(upstream)?;
    up.set_nodelay(true)?;
    down.set_nodelay(true)?;
    pipe(down.try_clone()?, up.try_clone()?, delay)?;
    pipe(up, down, delay)
}

/// Relays `from` to `to`, each chunk `delay` after it was read.
fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration) -> io::Result<()> {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::Builder::new()
        .name("relay-write".into())
        .spawn(move || {
            while let Ok((at, chunk)) = rx.recv() {
                wait_until(at);
                if to.write_all(&chunk).is_err() {
                    break;
                }
            }
            // the reader saw the end (or the peer went away): pass it on
            let _ = to.shutdown(Shutdown::Write);
        })?;
    thread::Builder::new()
        .name("relay-read".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tx
                            .send((Instant::now() + delay, buf[..n].to_vec()))
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
        })?;
    Ok(())
}

/// Sleeps until [`SPIN`] before `at`, then spins until `at`.
pub fn wait_until(at: Instant) {
    let now = Instant::now();
    if at > now + SPIN {
        thread::sleep(at - now - SPIN);
    }
    while Instant::now() < at {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback that answers every read with the same
    /// bytes; ends when its one client closes.
    fn echo() -> String {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        });
        addr
    }

    #[test]
    fn relays_bytes_both_ways_and_passes_the_close_on() {
        let relays = start(&[echo()], Duration::from_micros(300)).expect("relay");
        let mut c = TcpStream::connect(&relays[0]).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let t = Instant::now();
        for round in 0..5u8 {
            let msg = [round; 100];
            c.write_all(&msg).expect("write");
            let mut got = [0u8; 100];
            c.read_exact(&mut got).expect("echoed");
            assert_eq!(got, msg);
        }
        // five round trips, each delayed twice: never sooner than 5 x 600 us
        assert!(t.elapsed() >= Duration::from_micros(3000));
        c.shutdown(Shutdown::Write).expect("shutdown");
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).expect("the relay closes too");
        assert!(rest.is_empty());
    }

    #[test]
    fn wait_until_never_returns_early() {
        for us in [0u64, 50, 400, 1200] {
            let at = Instant::now() + Duration::from_micros(us);
            wait_until(at);
            assert!(Instant::now() >= at);
        }
    }
}
