//! Differential test of UDP (`-U`): the same datagrams go to Debian's
//! memcached 1.6 and to kura, text and binary, and every reply datagram
//! must be equal byte for byte (frame header included), except CAS values
//! in binary response headers, which become the order of their first
//! appearance on each side.
//!
//! Each case runs on fresh servers after the same seed datagrams, then a
//! marker datagram (its own request id, `mn`) follows; a case's replies
//! are everything that arrives before the marker's. Both servers serve UDP
//! from one thread (memcached runs with `-t 1`), so the order is the order
//! of the datagrams.
//!
//! Fresh servers, because memcached serves every UDP client through one
//! connection whose state outlives a datagram: after a `quit` (or a request
//! that would close a TCP connection) the next datagram, whoever sends it,
//! is cut short after its first reply. Not sent either (memcached quirks
//! kura does not copy, see docs/compatibility.md): a datagram that ends
//! inside a value (memcached reads the next datagram as the rest of it),
//! `version` and `stats` (their text differs on purpose).
//!
//! Run: `cargo test -p kura-server --test udp_differential -- --nocapture`

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use common::{arith_extras, bin, set_extras, Memcached, TestServer};

const MARKER_ID: u16 = 0xfff0;
/// Datagrams that ask whether the server listens yet.
const READY_ID: u16 = 0xfff1;

/// One datagram: frame header fields and payload.
#[derive(Clone, Debug)]
struct Datagram {
    id: u16,
    seq: u16,
    total: u16,
    payload: Vec<u8>,
}

fn dg(id: u16, payload: &[u8]) -> Datagram {
    Datagram {
        id,
        seq: 0,
        total: 1,
        payload: payload.to_vec(),
    }
}

impl Datagram {
    fn header(mut self, seq: u16, total: u16) -> Datagram {
        self.seq = seq;
        self.total = total;
        self
    }

    fn encode(&self) -> Vec<u8> {
        let mut d = self.id.to_be_bytes().to_vec();
        d.extend_from_slice(&self.seq.to_be_bytes());
        d.extend_from_slice(&self.total.to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d.extend_from_slice(&self.payload);
        d
    }
}

fn udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

/// One server's side: a socket that talks to it.
struct Side {
    sock: UdpSocket,
    server: SocketAddr,
    /// CAS values seen, numbered in order of appearance.
    cas: HashMap<u64, u64>,
}

impl Side {
    fn new(server: SocketAddr) -> Side {
        let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
        sock.set_read_timeout(Some(Duration::from_secs(10))).ok();
        Side {
            sock,
            server,
            cas: HashMap::new(),
        }
    }

    /// Waits until the server answers on UDP (memcached binds its UDP
    /// socket just after it starts listening on TCP).
    fn wait_ready(&mut self) {
        let ready = dg(READY_ID, b"mn\r\n").encode();
        let mut buf = [0u8; 64];
        self.sock
            .set_read_timeout(Some(Duration::from_millis(50)))
            .ok();
        for _ in 0..200 {
            self.sock.send_to(&ready, self.server).expect("send");
            if self.sock.recv_from(&mut buf).is_ok() {
                self.sock
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .ok();
                return;
            }
        }
        panic!("no UDP reply from {}", self.server);
    }

    /// Sends the case's datagrams, then a marker; returns every datagram
    /// that came back before the marker's reply.
    fn exchange(&mut self, case: &[Datagram]) -> Vec<Vec<u8>> {
        for d in case {
            self.sock.send_to(&d.encode(), self.server).expect("send");
        }
        let marker = dg(MARKER_ID, b"mn\r\n").encode();
        self.sock.send_to(&marker, self.server).expect("send");
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        for _ in 0..10_000 {
            let (n, _) = self.sock.recv_from(&mut buf).expect("a reply");
            let d = buf[..n].to_vec();
            if d[..2] == READY_ID.to_be_bytes() {
                continue;
            }
            if d[..2] == MARKER_ID.to_be_bytes() {
                assert_eq!(&d[8..], b"MN\r\n");
                return got.into_iter().map(|d| self.normalize(d)).collect();
            }
            got.push(d);
        }
        panic!("no end to the replies");
    }

    /// Numbers the CAS of a binary response that starts a message.
    fn normalize(&mut self, mut d: Vec<u8>) -> Vec<u8> {
        let first = d.len() >= 8 && d[2..4] == [0, 0];
        if first && d.len() >= 8 + 24 && d[8] == 0x81 {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&d[24..32]);
            let cas = u64::from_be_bytes(raw);
            if cas != 0 {
                let next = self.cas.len() as u64 + 1;
                let n = *self.cas.entry(cas).or_insert(next);
                d[24..32].copy_from_slice(&n.to_be_bytes());
            }
        }
        d
    }
}

fn get(op: u8, key: &[u8]) -> Vec<u8> {
    bin(op, &[], key, &[], 0, 0)
}

fn noop() -> Vec<u8> {
    bin(0x0a, &[], &[], &[], 0, 0)
}

/// Binary request bytes with a lying body length.
fn lying(op: u8, key: &[u8], body_len: u32) -> Vec<u8> {
    let mut r = bin(op, &[], key, &[], 0, 0);
    r[8..12].copy_from_slice(&body_len.to_be_bytes());
    r
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn set(key: &[u8], value: &[u8], opaque: u32) -> Vec<u8> {
    bin(0x01, &set_extras(5, 0), key, value, opaque, 0)
}

/// What every case finds stored: text `k`, `big`, binary `b`, `bbig`.
fn seed() -> Vec<Datagram> {
    let big = vec![b'x'; 3000];
    vec![
        dg(100, b"set k 0 0 5\r\nhello\r\n"),
        dg(101, &cat(&[b"set big 0 0 3000\r\n", &big, b"\r\n"])),
        dg(102, &set(b"b", b"hello", 0)),
        dg(103, &set(b"bbig", &big, 0)),
    ]
}

fn cases() -> Vec<(&'static str, Vec<Datagram>)> {
    let big = vec![b'x'; 3000];
    let text_big = cat(&[b"set big 0 0 3000\r\n", &big, b"\r\n"]);
    vec![
        ("text set", vec![dg(1, b"set k 0 0 5\r\nhello\r\n")]),
        ("text get", vec![dg(2, b"get k\r\n")]),
        ("text get k k", vec![dg(3, b"get k k\r\n")]),
        ("text get nope k", vec![dg(4, b"get nope k\r\n")]),
        ("text get k nope", vec![dg(5, b"get k nope\r\n")]),
        ("text get nope", vec![dg(6, b"get nope\r\n")]),
        ("text get nope nope", vec![dg(7, b"get nope nope\r\n")]),
        ("text set big", vec![dg(8, &text_big)]),
        ("text get big k", vec![dg(9, b"get big k\r\n")]),
        ("text get k big", vec![dg(10, b"get k big\r\n")]),
        ("text gat", vec![dg(11, b"gat 0 k nope k\r\n")]),
        (
            "text two requests",
            vec![dg(12, b"set a 0 0 1\r\n1\r\nget a\r\n")],
        ),
        ("text error then get", vec![dg(13, b"bogus\r\nget k\r\n")]),
        (
            "text noreply",
            vec![dg(14, b"set n 0 0 1 noreply\r\n1\r\nget n\r\n")],
        ),
        ("text quit then get", vec![dg(15, b"quit\r\nget k\r\n")]),
        ("text get then quit", vec![dg(16, b"get k\r\nquit\r\n")]),
        ("text no newline", vec![dg(17, b"get k")]),
        (
            "meta pipeline",
            vec![dg(18, b"mg k v\r\nmg nope v q\r\nmn\r\n")],
        ),
        ("meta quiet set", vec![dg(19, b"ms q 2 q\r\nhi\r\n")]),
        (
            "meta quiet misses",
            vec![dg(20, b"md nope q\r\nma nope q\r\n")],
        ),
        (
            "text incr delete",
            vec![dg(21, b"incr a 5\r\ndelete a\r\ndelete a\r\n")],
        ),
        (
            "text then binary",
            vec![dg(22, &cat(&[b"get k\r\n", &get(0, b"k")]))],
        ),
        (
            "key too long",
            vec![dg(23, &cat(&[b"get ", &[b'k'; 300], b"\r\nmn\r\n"]))],
        ),
        ("several datagrams", vec![dg(24, b"get k\r\n").header(0, 2)]),
        ("count 0", vec![dg(25, b"get k\r\n").header(0, 0)]),
        ("sequence 3", vec![dg(26, b"get k\r\n").header(3, 1)]),
        ("empty payload", vec![dg(27, b"")]),
        ("binary get miss", vec![dg(40, &get(0x00, b"nope"))]),
        ("binary set", vec![dg(41, &set(b"b", b"hello", 9))]),
        ("binary get hit", vec![dg(42, &get(0x00, b"b"))]),
        (
            "binary quiet pipeline",
            vec![dg(43, &cat(&[&get(0x09, b"b"), &get(0x00, b"b"), &noop()]))],
        ),
        ("binary set big", vec![dg(44, &set(b"bbig", &big, 1))]),
        ("binary get big", vec![dg(45, &get(0x00, b"bbig"))]),
        ("binary short header", vec![dg(46, &get(0x00, b"b")[..20])]),
        (
            "binary bad magic",
            vec![dg(47, &[&[0x81], &get(0x00, b"b")[1..]].concat())],
        ),
        (
            "binary unknown then noop",
            vec![dg(48, &cat(&[&bin(0x55, &[], &[], &[], 0, 0), &noop()]))],
        ),
        (
            "binary unknown with body then noop",
            vec![dg(49, &cat(&[&bin(0x55, &[], &[], b"abc", 0, 0), &noop()]))],
        ),
        (
            "binary quit then noop",
            vec![dg(50, &cat(&[&get(0x07, b""), &noop()]))],
        ),
        (
            "binary quitq then noop",
            vec![dg(51, &cat(&[&get(0x17, b""), &noop()]))],
        ),
        (
            "binary key past body",
            vec![dg(52, &cat(&[&lying(0x00, b"kk", 1), &noop()]))],
        ),
        (
            "binary invalid extras",
            vec![dg(
                53,
                &cat(&[&bin(0x00, b"1234", b"b", &[], 0, 0), &noop()]),
            )],
        ),
        (
            "binary key too long",
            vec![dg(54, &cat(&[&set(&[b'k'; 300], b"v", 0), &noop()]))],
        ),
        (
            "binary setq",
            vec![dg(55, &bin(0x11, &set_extras(0, 0), b"q", b"v", 0, 0))],
        ),
        ("binary getq miss", vec![dg(56, &get(0x09, b"nope"))]),
        (
            "binary getq miss noop",
            vec![dg(57, &cat(&[&get(0x09, b"nope"), &noop()]))],
        ),
        (
            "binary getk",
            vec![dg(58, &cat(&[&get(0x0c, b"b"), &get(0x0c, b"nope")]))],
        ),
        (
            "binary getkq",
            vec![dg(59, &cat(&[&get(0x0d, b"nope"), &get(0x0d, b"b")]))],
        ),
        (
            "binary then garbage",
            vec![dg(60, &cat(&[&get(0x00, b"b"), &[0, 0]]))],
        ),
        (
            "binary then part of one",
            vec![dg(61, &cat(&[&get(0x00, b"b"), &[0x80, 0]]))],
        ),
        (
            "binary then text",
            vec![dg(62, &cat(&[&get(0x00, b"b"), b"get k\r\n"]))],
        ),
        (
            "binary incr creates",
            vec![dg(
                63,
                &bin(0x05, &arith_extras(1, 7, 0), b"ctr", &[], 0, 0),
            )],
        ),
        (
            "binary incr decr",
            vec![dg(
                64,
                &cat(&[
                    &bin(0x05, &arith_extras(5, 0, 0), b"ctr", &[], 1, 0),
                    &bin(0x06, &arith_extras(2, 0, 0), b"ctr", &[], 2, 0),
                    &bin(0x15, &arith_extras(1, 0, 0), b"ctr", &[], 3, 0),
                ]),
            )],
        ),
        (
            "binary add replace append prepend",
            vec![dg(
                65,
                &cat(&[
                    &bin(0x02, &set_extras(0, 0), b"b", b"x", 1, 0),
                    &bin(0x03, &set_extras(0, 0), b"nope", b"x", 2, 0),
                    &bin(0x0e, &[], b"b", b"-end", 3, 0),
                    &bin(0x0f, &[], b"b", b"start-", 4, 0),
                    &get(0x00, b"b"),
                ]),
            )],
        ),
        (
            "binary touch gat",
            vec![dg(
                66,
                &cat(&[
                    &bin(0x1c, &0u32.to_be_bytes(), b"b", &[], 1, 0),
                    &bin(0x1d, &0u32.to_be_bytes(), b"b", &[], 2, 0),
                    &bin(0x23, &0u32.to_be_bytes(), b"nope", &[], 3, 0),
                ]),
            )],
        ),
        (
            "binary delete",
            vec![dg(
                67,
                &cat(&[&get(0x04, b"b"), &get(0x04, b"b"), &get(0x14, b"k")]),
            )],
        ),
        (
            "binary sasl",
            vec![dg(
                68,
                &cat(&[&get(0x20, b""), &bin(0x21, &[], b"PLAIN", b"\0a\0b", 0, 0)]),
            )],
        ),
        (
            "binary several datagrams",
            vec![dg(69, &get(0x00, b"bbig")).header(0, 2)],
        ),
        (
            "binary stat of no group",
            vec![dg(70, &get(0x10, b"nosuch"))],
        ),
        (
            "binary flush",
            vec![dg(
                71,
                &cat(&[&get(0x18, b""), &get(0x08, b""), &get(0x00, b"bbig")]),
            )],
        ),
        ("text after flush", vec![dg(72, b"get k big\r\n")]),
    ]
}

#[test]
fn udp_datagrams_match_memcached() {
    let Some(bin_path) = common::memcached_bin() else {
        return;
    };
    let mut failures = Vec::new();
    for (name, case) in cases() {
        let mport = udp_port();
        let memcached = Memcached::start_with(&bin_path, &["-U", &mport.to_string(), "-t", "1"]);
        let kport = udp_port();
        let kura = TestServer::with(|c| c.udp_port = kport);
        let mut sides = [
            Side::new(SocketAddr::new(memcached.addr.ip(), mport)),
            Side::new(kura.udp.expect("kura udp")),
        ];
        for side in &mut sides {
            side.wait_ready();
            side.exchange(&seed());
            side.cas.clear();
        }
        let m = sides[0].exchange(&case);
        let k = sides[1].exchange(&case);
        if m != k {
            failures.push(format!(
                "{name}:\n  memcached: {:?}\n  kura:      {:?}",
                m.iter()
                    .map(|d| String::from_utf8_lossy(d))
                    .collect::<Vec<_>>(),
                k.iter()
                    .map(|d| String::from_utf8_lossy(d))
                    .collect::<Vec<_>>(),
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
