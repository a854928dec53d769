//! Test support: a real kura server on an ephemeral port, and a raw client
//! that sends bytes and reads exactly the reply bytes expected.
#![allow(dead_code, unused_imports)] // each test file uses its own part

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use kura_server::{Server, ServerConfig, ServerHandle};

/// A server running in this process; stopped when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub udp: Option<SocketAddr>,
    /// Every TCP address, with whether it speaks TLS.
    pub tcp: Vec<(SocketAddr, bool)>,
    handle: Option<ServerHandle>,
}

impl TestServer {
    /// Starts a server with default settings on 127.0.0.1, port 0.
    pub fn start() -> TestServer {
        Self::with(|_| {})
    }

    /// Starts a server after `tweak` adjusts the settings.
    pub fn with(tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let mut config = ServerConfig {
            port: 0,
            threads: 2,
            ..ServerConfig::default()
        };
        tweak(&mut config);
        let server = Server::bind(config).expect("bind test server");
        let addr = server.local_addr().expect("tcp address");
        let udp = server.udp_addr();
        let tcp = server.tcp_addrs();
        let handle = server.start().expect("start test server");
        TestServer {
            addr,
            udp,
            tcp,
            handle: Some(handle),
        }
    }

    pub fn handle(&self) -> &ServerHandle {
        self.handle.as_ref().expect("running")
    }

    /// Moves the store's clock forward (TTL tests without sleeping).
    pub fn advance_clock(&self, secs: u32) {
        self.handle().shared().store.clock().advance(secs);
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
            h.join();
        }
    }
}

/// A raw protocol client.
pub struct Client {
    pub stream: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).ok();
        stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
        Client { stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Reads exactly `n` bytes.
    pub fn read_exact(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.stream.read_exact(&mut buf).expect("read reply");
        buf
    }

    /// Sends `req` and asserts the reply is exactly `want` (and nothing
    /// more arrives within a short wait).
    pub fn roundtrip(&mut self, req: &[u8], want: &[u8]) {
        self.reply_is(req, want);
        self.expect_silence(Duration::from_millis(30));
    }

    /// `roundtrip` without its 30 ms listen for extra bytes: for loops of
    /// requests on one connection, where a stray byte would misalign the
    /// next reply read (end such a loop with `expect_silence`).
    pub fn reply_is(&mut self, req: &[u8], want: &[u8]) {
        self.send(req);
        let got = self.read_exact(want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Asserts that nothing arrives within `wait`.
    pub fn expect_silence(&mut self, wait: Duration) {
        self.stream.set_read_timeout(Some(wait)).ok();
        let mut b = [0u8; 256];
        match self.stream.read(&mut b) {
            Ok(0) => panic!("connection closed"),
            Ok(n) => panic!("unexpected bytes: {:?}", String::from_utf8_lossy(&b[..n])),
            Err(_) => {}
        }
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok();
    }

    /// Reads until `end` appears at the end of what was read.
    pub fn read_until(&mut self, end: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = [0u8; 65536];
        let deadline = Instant::now() + Duration::from_secs(10);
        while !out.ends_with(end) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {:?}",
                String::from_utf8_lossy(end)
            );
            let n = self.stream.read(&mut b).expect("read");
            assert!(
                n > 0,
                "connection closed before {:?}",
                String::from_utf8_lossy(end)
            );
            out.extend_from_slice(&b[..n]);
        }
        out
    }

    /// True when the server has closed the connection.
    pub fn is_closed(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .ok();
        let mut b = [0u8; 64];
        loop {
            match self.stream.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

/// One binary-protocol response: its header and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinResponse {
    pub header: kura_proto::binary::Header,
    pub body: Vec<u8>,
}

impl BinResponse {
    pub fn extras(&self) -> &[u8] {
        &self.body[..usize::from(self.header.extras_len)]
    }
    pub fn key(&self) -> &[u8] {
        let e = usize::from(self.header.extras_len);
        &self.body[e..e + usize::from(self.header.key_len)]
    }
    pub fn value(&self) -> &[u8] {
        &self.body[usize::from(self.header.extras_len) + usize::from(self.header.key_len)..]
    }
    pub fn status(&self) -> u16 {
        self.header.status
    }
}

/// Encodes a binary request.
pub fn bin(op: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let mut v = Vec::new();
    kura_proto::binary::Header {
        magic: kura_proto::binary::REQUEST_MAGIC,
        opcode: op,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
        ..Default::default()
    }
    .encode(&mut v);
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

/// The 8 bytes of extras of SET/ADD/REPLACE.
pub fn set_extras(flags: u32, exptime: u32) -> Vec<u8> {
    let mut e = flags.to_be_bytes().to_vec();
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

/// The 20 bytes of extras of INCREMENT/DECREMENT.
pub fn arith_extras(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

impl Client {
    /// Reads one binary response.
    pub fn read_bin(&mut self) -> BinResponse {
        let head = self.read_exact(kura_proto::binary::HEADER_LEN);
        let header = kura_proto::binary::Header::decode(&head).expect("24 bytes");
        assert_eq!(
            header.magic,
            kura_proto::binary::RESPONSE_MAGIC,
            "{header:?}"
        );
        let body = self.read_exact(header.body_len as usize);
        BinResponse { header, body }
    }

    /// Sends one binary request and reads one response.
    pub fn bin_call(&mut self, req: &[u8]) -> BinResponse {
        self.send(req);
        self.read_bin()
    }

    /// Reads responses up to and including the one with `opcode` (a NOOP
    /// ending a quiet pipeline, say).
    pub fn read_bin_until(&mut self, opcode: u8) -> Vec<BinResponse> {
        let mut out = Vec::new();
        loop {
            let r = self.read_bin();
            let done = r.header.opcode == opcode;
            out.push(r);
            if done {
                return out;
            }
        }
    }
}

pub use kura_testkit::free_port;
pub use kura_testkit::memcached::Memcached;
pub use kura_testkit::tools::memcached_bin;
