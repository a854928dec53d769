//! Hostile and broken clients: garbage, endless lines, lying lengths,
//! clients that never read. The server must answer with errors or close the
//! offending connection, keep serving everyone else, and keep its memory
//! bounded.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::TestServer;
use rand::{Rng, SeedableRng};

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A healthy client still gets correct answers.
fn assert_serving(s: &TestServer) {
    let mut c = s.connect();
    c.roundtrip(
        b"set healthy 0 0 2\r\nok\r\nget healthy\r\n",
        b"STORED\r\nVALUE healthy 0 2\r\nok\r\nEND\r\n",
    );
}

#[test]
fn random_binary_garbage_never_breaks_the_server() {
    let s = TestServer::start();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b757261);
    for round in 0..200 {
        let len = rng.gen_range(1..4096);
        let mut junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if round % 3 == 0 {
            // Garbage that looks like commands with broken arguments.
            let cmds: [&[u8]; 6] = [b"set ", b"get ", b"ms ", b"mg ", b"incr ", b"cas "];
            let mut v = cmds[round % 6].to_vec();
            v.extend_from_slice(&junk);
            v.extend_from_slice(b"\r\n");
            junk = v;
        }
        if junk[0] == 0x80 {
            junk[0] = b'x';
        }
        let mut stream = TcpStream::connect(s.addr).unwrap();
        let _ = stream.write_all(&junk);
        drop(stream);
    }
    assert_serving(&s);
}

#[test]
fn endless_line_closes_the_connection() {
    let s = TestServer::start();
    let mut c = s.connect();
    // No newline in the first 2048 bytes and not a get: memcached closes.
    let _ = c.stream.write_all(&vec![b'a'; 5000]);
    assert!(c.is_closed());
    // A long multi-get line is allowed.
    let mut c = s.connect();
    let mut line = b"get".to_vec();
    for i in 0..1000 {
        line.extend_from_slice(format!(" key{i}").as_bytes());
    }
    line.extend_from_slice(b"\r\n");
    c.roundtrip(&line, b"END\r\n");
    // But not an unbounded one.
    let mut c = s.connect();
    let mut line = b"get ".to_vec();
    line.extend_from_slice(&vec![b'k'; 3 * 1024 * 1024]);
    let _ = c.stream.write_all(&line);
    assert!(c.is_closed());
    assert_serving(&s);
}

#[test]
fn lying_lengths() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(
        b"set a 0 0 -5\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    c.roundtrip(
        b"set a 0 0 99999999999999999999\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
    );
    // INT_MAX - 2, the largest length memcached reads: too large, not a
    // format error (above it, see the differential test).
    c.roundtrip(b"set a 0 0 2147483645 noreply\r\nabc\r\n", b"");
    // The connection is now swallowing what it announced; a new one works.
    assert_serving(&s);
    let mut c = s.connect();
    c.roundtrip(b"ms a -1\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.roundtrip(
        b"ms a 2147483645 T1\r\n",
        b"SERVER_ERROR object too large for cache\r\n",
    );
    assert_serving(&s);
}

#[test]
fn connection_limit_rejects_like_memcached() {
    let s = TestServer::with(|c| c.max_connections = 2);
    let mut a = s.connect();
    let mut b = s.connect();
    a.roundtrip(
        b"version\r\n",
        format!("VERSION {}\r\n", kura_server::VERSION).as_bytes(),
    );
    b.roundtrip(b"mn\r\n", b"MN\r\n");
    let mut third = TcpStream::connect(s.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let _ = third.read_to_end(&mut got);
    assert_eq!(got, b"ERROR Too many open connections\r\n");
    drop(a);
    // Once a slot frees up, new connections are served again.
    let mut served = false;
    for _ in 0..100 {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"mn\r\n").unwrap();
        let mut buf = [0u8; 64];
        let n = c.read(&mut buf).unwrap_or(0);
        if &buf[..n] == b"MN\r\n" {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(served);
    let mut c = s.connect();
    drop(b);
    let _ = &mut c;
    let st = s
        .handle()
        .shared()
        .counters
        .rejected
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(st >= 1);
}

#[test]
fn idle_connections_are_closed_with_idle_timeout() {
    let s = TestServer::with(|c| c.idle_timeout = 1);
    let mut c = s.connect();
    c.roundtrip(b"mn\r\n", b"MN\r\n");
    assert!(c.is_closed());
    // Counted in stats as memcached's idle_kicks.
    let mut c = s.connect();
    c.send(b"stats\r\n");
    let stats = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(stats.contains("STAT idle_kicks 1\r\n"), "{stats}");
}

#[test]
fn clients_that_never_read_do_not_exhaust_memory() {
    let s = TestServer::start();
    let mut c = s.connect();
    let value = vec![b'v'; 500_000];
    let mut req = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    c.roundtrip(&req, b"STORED\r\n");
    let baseline = rss_bytes();
    for _round in 0..5 {
        let mut hogs = Vec::new();
        for _ in 0..8 {
            let stream = TcpStream::connect(s.addr).unwrap();
            stream.set_nonblocking(true).unwrap();
            hogs.push(stream);
        }
        // Each hog asks for ~250 MB of replies and reads none of them.
        let gets = b"get big\r\n".repeat(500);
        for _ in 0..100 {
            for h in hogs.iter_mut() {
                let _ = h.write(&gets);
            }
        }
        // Everyone else is still served promptly while the hogs are stuck.
        assert_serving(&s);
        drop(hogs);
    }
    let growth = rss_bytes().saturating_sub(baseline);
    // Replies for the hogs would be gigabytes if buffered; the bounded
    // buffers keep the growth to a few megabytes per connection.
    eprintln!("RSS growth over 5 rounds: {growth} bytes");
    assert!(growth < 64 * 1024 * 1024, "RSS grew by {growth} bytes");
    assert_serving(&s);
}

#[test]
fn one_huge_multiget_is_not_buffered_in_copies() {
    let s = TestServer::start();
    let mut c = s.connect();
    let value = vec![b'w'; 500_000];
    let mut req = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    c.roundtrip(&req, b"STORED\r\n");
    // A reader gets every copy intact.
    let mut get = b"get".to_vec();
    get.extend_from_slice(&b" big".repeat(100));
    get.extend_from_slice(b"\r\n");
    c.send(&get);
    let reply = c.read_until(b"END\r\n");
    let mut block = b"VALUE big 0 500000\r\n".to_vec();
    block.extend_from_slice(&value);
    block.extend_from_slice(b"\r\n");
    let mut want = block.repeat(100);
    want.extend_from_slice(b"END\r\n");
    assert!(reply == want, "multi-get reply differs");
    // One line asking for 25 GB of replies, never read: the server holds
    // handles to one item, not copies.
    let baseline = rss_bytes();
    let mut hog = TcpStream::connect(s.addr).unwrap();
    let mut line = b"get".to_vec();
    line.extend_from_slice(&b" big".repeat(50_000));
    line.extend_from_slice(b"\r\n");
    hog.write_all(&line).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_serving(&s);
    let growth = rss_bytes().saturating_sub(baseline);
    assert!(growth < 64 * 1024 * 1024, "RSS grew by {growth} bytes");
    drop(hog);
    assert_serving(&s);
}
