//! The servers the client tests talk to, all on loopback and all stopped
//! when dropped: `kura server` processes of this workspace, Debian's
//! memcached and redis-server, the gated relay and two fake servers (one
//! that accepts and never answers, one that answers with bytes of the
//! test's choosing), all from kura-testkit; and a raw `get`.
#![allow(dead_code, unused_imports)] // each test file uses its own part

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

pub use kura_testkit::fake::{scripted_server, silent_server};
pub use kura_testkit::relay::{gated_relay, Gate};
pub use kura_testkit::servers::{
    kura, kura_bin, kura_on, memcached, memcached_on, redis_server, servers,
};
pub use kura_testkit::tools::memcached_bin;
pub use kura_testkit::{addrs, free_port, Proc};

/// Raw text request to a server, for checking what the client stored.
pub fn raw_get(addr: &str, key: &str) -> Option<Vec<u8>> {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.write_all(format!("get {key}\r\n").as_bytes())
        .expect("send");
    let mut out = Vec::new();
    let mut b = [0u8; 65536];
    while !out.ends_with(b"END\r\n") {
        let n = c.read(&mut b).expect("read");
        assert!(n > 0, "closed");
        out.extend_from_slice(&b[..n]);
    }
    let head_end = out.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&out[..head_end]).ok()?;
    let len: usize = head
        .strip_prefix("VALUE ")?
        .split(' ')
        .nth(2)?
        .parse()
        .ok()?;
    Some(out[head_end + 2..head_end + 2 + len].to_vec())
}
