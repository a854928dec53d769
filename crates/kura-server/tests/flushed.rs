//! `get_flushed`: commands that meet an item `flush_all` dropped, counted
//! as memcached 1.6 counts them (the first lookup of such an item by any
//! command counts, and lets it go; later ones are plain misses), compared
//! with Debian's memcached on the same requests.
//!
//! Run: `cargo test -p kura-server --test flushed`

mod common;

use std::net::SocketAddr;

use common::{Client, Memcached, TestServer};

fn stat(addr: SocketAddr, name: &str) -> String {
    let mut c = Client::connect(addr);
    c.send(b"stats\r\n");
    let text = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    let prefix = format!("STAT {name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name}"))
        .to_string()
}

/// Runs the script on `addr`; the replies and `get_flushed` after it.
fn run(addr: SocketAddr) -> (Vec<u8>, String) {
    let mut c = Client::connect(addr);
    let mut req = Vec::new();
    for k in ["a", "b", "c", "d", "e", "f", "g"] {
        req.extend_from_slice(format!("set {k} 0 0 1\r\n{k}\r\n").as_bytes());
    }
    req.extend_from_slice(b"flush_all\r\n");
    // A get that meets a flushed item counts once; a second is a miss.
    req.extend_from_slice(b"get a\r\nget a\r\ngets b\r\n");
    // So do the other commands that look an item up first, but storage
    // commands. (A store also makes memcached reclaim flushed items at the
    // tail of its LRU: none comes before the last lookup here.)
    req.extend_from_slice(b"delete c\r\nincr d 1\r\nmg e v\r\ngat 10 f\r\n");
    req.extend_from_slice(b"set g 0 0 1\r\nG\r\nget g\r\n");
    // Never stored: not flushed.
    req.extend_from_slice(b"get never\r\nmn\r\n");
    c.send(&req);
    (c.read_until(b"MN\r\n"), stat(addr, "get_flushed"))
}

#[test]
fn get_flushed_counts_as_memcached_counts() {
    let Some(bin) = common::memcached_bin() else {
        return;
    };
    let memcached = Memcached::start(&bin);
    let kura = TestServer::start();
    let theirs = run(memcached.addr);
    let ours = run(kura.addr);
    assert_eq!(
        String::from_utf8_lossy(&ours.0),
        String::from_utf8_lossy(&theirs.0)
    );
    assert_ne!(theirs.1, "0", "the script meets no flushed item");
    assert_eq!(ours.1, theirs.1, "get_flushed");
}
