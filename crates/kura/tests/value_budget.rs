//! Memory under clients that send most of a large value and then stall: a
//! `kura server -m 64` process must stay within 1.5 x `-m` resident (the
//! values being received are charged to a budget, `kura-server`'s
//! `budget.rs`), for text, meta and binary sets alike, and the values that
//! were taken in complete whole once their senders finish.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;

const MEMORY_MB: u64 = 64;
const CONNECTIONS: usize = 600;
const VALUE: usize = 1_000_000;
/// What each client sends of its value before it stalls.
const PART: usize = 990_000;
const OOM: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";

/// A server process, killed when dropped.
struct Kura(Child);

impl Drop for Kura {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A figure of /proc/PID/status, in bytes.
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                return s;
            }
            Err(e) if Instant::now() > deadline => panic!("server did not come up: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn read_until(s: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut b = [0u8; 65536];
    while !out.ends_with(end) {
        let n = s.read(&mut b).expect("read");
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&b[..n]);
    }
    out
}

/// The server's `bytes_read`; `asked` counts the bytes of the requests.
fn bytes_read(admin: &mut TcpStream, asked: &mut u64) -> u64 {
    admin.write_all(b"stats\r\n").unwrap();
    *asked += 7;
    let text = String::from_utf8(read_until(admin, b"END\r\n")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("STAT bytes_read "))
        .and_then(|v| v.parse().ok())
        .expect("bytes_read")
}

/// Client `i`'s value: a rotation of the alphabet, so that a value put
/// together from the wrong bytes shows.
fn value(base: &[u8], i: usize) -> &[u8] {
    &base[i % 26..i % 26 + VALUE]
}

/// Client `i`'s request head and trailer: text, meta and binary in turn.
fn framing(i: usize) -> (Vec<u8>, &'static [u8]) {
    let key = format!("k{i}");
    match i % 3 {
        0 => (format!("set {key} 0 0 {VALUE}\r\n").into_bytes(), b"\r\n"),
        1 => (format!("ms {key} {VALUE} T0\r\n").into_bytes(), b"\r\n"),
        _ => {
            let mut h = vec![0x80, 0x01];
            h.extend_from_slice(&(key.len() as u16).to_be_bytes());
            h.extend_from_slice(&[8, 0, 0, 0]);
            h.extend_from_slice(&((8 + key.len() + VALUE) as u32).to_be_bytes());
            h.extend_from_slice(&(i as u32).to_be_bytes());
            h.extend_from_slice(&[0; 8]);
            h.extend_from_slice(&[0; 8]);
            h.extend_from_slice(key.as_bytes());
            (h, b"")
        }
    }
}

/// Writes `head` and then `body[..]` on every stream without blocking on
/// any, until all is sent.
fn send_all(streams: &mut [TcpStream], parts: &[Vec<u8>]) {
    let mut sent = vec![0usize; streams.len()];
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let mut progress = false;
        let mut done = true;
        for (i, s) in streams.iter_mut().enumerate() {
            let part = &parts[i];
            if sent[i] == part.len() {
                continue;
            }
            done = false;
            match s.write(&part[sent[i]..]) {
                Ok(n) => {
                    sent[i] += n;
                    progress |= n > 0;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("client {i}: {e}"),
            }
        }
        if done {
            return;
        }
        assert!(Instant::now() < deadline, "the server stopped reading");
        if !progress {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Reads client `i`'s reply: true when its value was stored, false when
/// it was refused for memory.
fn stored(s: &mut TcpStream, i: usize) -> bool {
    if i % 3 == 2 {
        let mut head = [0u8; 24];
        s.read_exact(&mut head).expect("binary reply");
        let mut body =
            vec![0u8; u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize];
        s.read_exact(&mut body).unwrap();
        return match u16::from_be_bytes([head[6], head[7]]) {
            0 => true,
            0x82 => false,
            other => panic!("client {i}: status {other:#x}"),
        };
    }
    let line = read_until(s, b"\r\n");
    match &line[..] {
        b"STORED\r\n" | b"HD\r\n" => true,
        l if l == OOM => false,
        l => panic!("client {i}: {:?}", String::from_utf8_lossy(l)),
    }
}

#[test]
fn stalled_large_values_stay_within_the_memory_limit() {
    let port = free_port();
    let server = Kura(
        Command::new(env!("CARGO_BIN_EXE_kura"))
            .args(["server", "-l", "127.0.0.1", "-p", &port.to_string()])
            .args(["-m", &MEMORY_MB.to_string(), "-c", "2000", "-t", "2"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kura"),
    );
    let pid = server.0.id();
    let mut admin = connect(port);
    let mut asked = 0u64;
    let base: Vec<u8> = (0..VALUE + 26).map(|i| b'a' + (i % 26) as u8).collect();
    let idle_rss = status_bytes(pid, "VmRSS:");

    let mut streams: Vec<TcpStream> = (0..CONNECTIONS).map(|_| connect(port)).collect();
    let heads: Vec<(Vec<u8>, &[u8])> = (0..CONNECTIONS).map(framing).collect();
    let first: Vec<Vec<u8>> = (0..CONNECTIONS)
        .map(|i| [&heads[i].0[..], &value(&base, i)[..PART]].concat())
        .collect();
    for s in &streams {
        s.set_nonblocking(true).unwrap();
    }
    send_all(&mut streams, &first);
    // Everything sent has been read (taken in, or skipped once refused).
    let total: u64 = first.iter().map(|p| p.len() as u64).sum();
    let deadline = Instant::now() + Duration::from_secs(120);
    while bytes_read(&mut admin, &mut asked) < total + asked {
        assert!(Instant::now() < deadline, "the server did not read it all");
        std::thread::sleep(Duration::from_millis(20));
    }
    let peak = status_bytes(pid, "VmHWM:");
    let limit = MEMORY_MB * 1024 * 1024;
    println!(
        "{CONNECTIONS} clients x {PART} of {VALUE} bytes at -m {MEMORY_MB}: \
         resident {} MiB idle, peak {} MiB",
        idle_rss >> 20,
        peak >> 20
    );
    assert!(
        peak < limit * 3 / 2,
        "peak resident {} MiB, over 1.5 x -m",
        peak >> 20
    );

    // The senders finish: every value was either taken in and is stored
    // whole, or was refused as out of memory and is absent.
    let rest: Vec<Vec<u8>> = (0..CONNECTIONS)
        .map(|i| [&value(&base, i)[PART..], heads[i].1].concat())
        .collect();
    send_all(&mut streams, &rest);
    let mut kept = Vec::new();
    for (i, s) in streams.iter_mut().enumerate() {
        s.set_nonblocking(false).unwrap();
        if stored(s, i) {
            kept.push(i);
        }
    }
    assert!(!kept.is_empty(), "no large value was taken in");
    assert!(kept.len() < CONNECTIONS, "every value was taken in");
    println!("{} of {CONNECTIONS} values stored", kept.len());
    for i in 0..CONNECTIONS {
        admin.write_all(format!("get k{i}\r\n").as_bytes()).unwrap();
        let reply = read_until(&mut admin, b"END\r\n");
        if kept.contains(&i) {
            let head = format!("VALUE k{i} 0 {VALUE}\r\n");
            assert_eq!(&reply[..head.len()], head.as_bytes(), "client {i}");
            assert_eq!(&reply[head.len()..head.len() + VALUE], value(&base, i));
        } else {
            assert_eq!(reply, b"END\r\n", "client {i}");
        }
    }
    // The server still takes ordinary and large values.
    admin.write_all(b"set after 0 0 2\r\nok\r\n").unwrap();
    assert_eq!(read_until(&mut admin, b"\r\n"), b"STORED\r\n");
}
