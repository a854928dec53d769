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
use std::net::{SocketAddr, TcpListener};

mod epoll_loop;
mod multi_loop;
mod ring;
mod uring_loop;

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
