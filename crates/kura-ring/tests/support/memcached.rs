//! Debian's memcached servers on loopback for the differential tests, and
//! asking them which keys they hold.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kura_ring::Server;

use kura_testkit::process::await_listen;

use super::{free_port, Process};

/// Starts memcached on `addr`; None if it exits (the port is taken).
pub fn start_memcached_at(bin: &Path, addr: SocketAddr) -> Option<Process> {
    let child = Command::new(bin)
        .args(["-u", "root", "-U", "0", "-m", "64", "-t", "1"])
        .args(["-l", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    await_listen(child, addr, "memcached", Duration::from_secs(10))
}

/// Starts memcached on a free port of 127.0.0.1 (retrying when the port is
/// taken meanwhile).
pub fn start_memcached(bin: &Path) -> (Process, SocketAddr) {
    for _ in 0..5 {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        if let Some(p) = start_memcached_at(bin, addr) {
            return (p, addr);
        }
    }
    panic!("memcached failed to start 5 times");
}

/// Memcached servers on loopback.
pub struct Cluster {
    _procs: Vec<Process>,
    pub addrs: Vec<SocketAddr>,
}

impl Cluster {
    pub fn start(bin: &Path, n: usize) -> Cluster {
        let (procs, addrs) = (0..n).map(|_| start_memcached(bin)).unzip();
        Cluster {
            _procs: procs,
            addrs,
        }
    }

    /// `n` servers on port 11211 of loopback addresses 127.61.x.y (any
    /// address of 127/8 is the loopback interface on Linux); None when
    /// something holds port 11211 on every address tried (a memcached
    /// listening on all interfaces).
    pub fn start_on_default_port(bin: &Path, n: usize) -> Option<Cluster> {
        let (mut procs, mut addrs) = (Vec::new(), Vec::new());
        let base = std::process::id() % 200;
        for attempt in 0..(n as u32 + 10) {
            if addrs.len() == n {
                break;
            }
            let host = [
                127,
                61,
                (base + attempt / 50) as u8,
                (2 + attempt % 50) as u8,
            ];
            let addr = SocketAddr::from((host, 11211));
            // Bind first: memcached failing to bind could go unnoticed if
            // another server already answers on the address.
            if TcpListener::bind(addr).is_err() {
                continue;
            }
            if let Some(p) = start_memcached_at(bin, addr) {
                procs.push(p);
                addrs.push(addr);
            }
        }
        (addrs.len() == n).then_some(Cluster {
            _procs: procs,
            addrs,
        })
    }

    /// The ring's servers: these addresses with `weights`.
    pub fn servers(&self, weights: &[u32]) -> Vec<Server> {
        self.addrs
            .iter()
            .zip(weights)
            .map(|(a, &w)| Server::new(a.ip().to_string(), a.port()).with_weight(w))
            .collect()
    }

    /// Empties every server.
    pub fn flush(&self) {
        for addr in &self.addrs {
            let mut c = connect(*addr);
            c.write_all(b"flush_all\r\n").expect("send flush_all");
            let mut line = String::new();
            BufReader::new(c)
                .read_line(&mut line)
                .expect("flush_all reply");
            assert_eq!(line, "OK\r\n", "flush_all on {addr}");
        }
    }

    /// For each key, the index of the one server holding it (None if none
    /// does); panics if two servers hold it.
    pub fn holders(&self, keys: &[String]) -> Vec<Option<usize>> {
        let mut at = vec![None; keys.len()];
        let index: std::collections::HashMap<&[u8], usize> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_bytes(), i))
            .collect();
        for (server, addr) in self.addrs.iter().enumerate() {
            for held in held_keys(*addr, keys) {
                let Some(&i) = index.get(held.as_slice()) else {
                    panic!(
                        "{addr} returned a key never asked for: {:?}",
                        String::from_utf8_lossy(&held)
                    );
                };
                if let Some(other) = at[i].replace(server) {
                    panic!("key {:?} is on servers {other} and {server}", keys[i]);
                }
            }
        }
        at
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set a read timeout");
    c
}

/// The keys among `keys` that the server at `addr` holds: quiet meta gets
/// (`mg <key> k q`, a hit answers `HD k<key>`, a miss nothing) in batches
/// ended by `mn`.
fn held_keys(addr: SocketAddr, keys: &[String]) -> Vec<Vec<u8>> {
    let c = connect(addr);
    let mut w = c.try_clone().expect("clone the connection");
    let mut r = BufReader::new(c);
    let mut held = Vec::new();
    for batch in keys.chunks(200) {
        let mut req = Vec::new();
        for k in batch {
            req.extend_from_slice(b"mg ");
            req.extend_from_slice(k.as_bytes());
            req.extend_from_slice(b" k q\r\n");
        }
        req.extend_from_slice(b"mn\r\n");
        w.write_all(&req).expect("send meta gets");
        for _ in 0..=batch.len() {
            let mut line = Vec::new();
            r.read_until(b'\n', &mut line).expect("read a meta reply");
            if line == b"MN\r\n" {
                break;
            }
            let key = line
                .strip_prefix(b"HD k")
                .and_then(|l| l.strip_suffix(b"\r\n"))
                .unwrap_or_else(|| {
                    panic!(
                        "{addr}: unexpected reply {:?}",
                        String::from_utf8_lossy(&line)
                    )
                });
            held.push(key.to_vec());
        }
    }
    held
}
