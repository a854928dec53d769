//! Ports for test servers: free, distinct within a process, and never in the kernel's
//! ephemeral range.

use std::net::TcpListener;
use std::sync::Mutex;

/// Where ports are handed out from: below the kernel's ephemeral range.
const FIRST: u16 = 10_000;

/// A TCP port nothing listens on now, never the same one twice in this process: tests run
/// in parallel threads, and the OS may offer a port again once the probe that found it
/// closed.
///
/// Taken below the kernel's ephemeral range (`ip_local_port_range`), so a port the kernel
/// picks (a `-p -1` server of another test, memcached's too, an outgoing connection) is never
/// one given here. A probe of `127.0.0.1:0` would hand out an ephemeral port that such a
/// server could take a moment later; a test then talked to the other test's server (and saw
/// it reset when that test stopped it).
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let span = ephemeral_start().saturating_sub(FIRST).max(1000);
    // Each test process starts at its own place in the range.
    let mut next = (std::process::id() as u16).wrapping_mul(7919) % span;
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        next = (next + 1) % span;
        let port = FIRST + next;
        if given.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
}

/// The first port of the kernel's ephemeral range (32768 where it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_free_distinct_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
        for port in ports {
            assert!((FIRST..ephemeral_start().max(FIRST + 1000)).contains(&port));
            TcpListener::bind(("127.0.0.1", port)).expect("still free");
        }
    }
}
