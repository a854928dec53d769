//! Fake servers for fault tests: one that accepts connections and never answers, one
//! that answers with bytes of the test's choosing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};

/// A server that accepts connections and reads them, and never answers.
pub fn silent_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut b = [0u8; 65536];
                while matches!(c.read(&mut b), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// A server that, for each connection, reads until it has seen `until`
/// bytes (or `\n` when 0) and then sends `reply` (None: closes the
/// connection instead).
pub fn scripted_server(until: usize, reply: Option<Vec<u8>>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut b = [0u8; 65536];
                loop {
                    let enough = if until == 0 {
                        seen.contains(&b'\n')
                    } else {
                        seen.len() >= until
                    };
                    if enough {
                        break;
                    }
                    match c.read(&mut b) {
                        Ok(n) if n > 0 => seen.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                }
                if let Some(r) = reply {
                    let _ = c.write_all(&r);
                    // keep reading so the client sees no EOF
                    while matches!(c.read(&mut b), Ok(n) if n > 0) {}
                }
            });
        }
    });
    addr
}
