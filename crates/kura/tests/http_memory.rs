//! `kura http`'s resident memory under churn: far more distinct objects than `-m` holds, of
//! 1 KB to 1 MB, through several keep-alive connections at once. The process's VmRSS (read
//! from /proc) must stay within the bound docs/http.md gives, and the store must evict rather
//! than grow.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const MEMORY_MB: u64 = 64;
/// docs/http.md's bound: the store's arenas hold at most 1.25 x -m (kura-store's room for
/// scattered free space, which objects of 1 KB to 1 MB use whole), plus 40 MiB for the rest:
/// the binary (about 15 MiB of a debug build's text), the runtime, connection buffers and the
/// bodies in flight of eight clients.
fn rss_bound_kb() -> u64 {
    MEMORY_MB * 1024 * 5 / 4 + 40 * 1024
}

/// Reads one HTTP/1.1 message head; the value of Content-Length (0 without).
fn read_head(reader: &mut impl BufRead) -> Option<(String, usize)> {
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            return Some((head, length));
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
        head.push_str(&line);
    }
}

/// An origin with keep-alive: `GET /SIZE/anything` answers SIZE bytes, cacheable for an hour.
fn origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let filler = Arc::new(vec![b'x'; 1 << 20]);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let filler = filler.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                while let Some((head, _)) = read_head(&mut reader) {
                    let size: usize = head
                        .split(' ')
                        .nth(1)
                        .and_then(|path| path.split('/').nth(1))
                        .and_then(|size| size.parse().ok())
                        .unwrap_or(1024)
                        .min(filler.len());
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: {size}\r\n\r\n"
                    );
                    if writer.write_all(answer.as_bytes()).is_err()
                        || writer.write_all(&filler[..size]).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn rss_kb(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn stats(admin: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", admin)).unwrap();
    write!(
        stream,
        "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

fn stat(page: &str, name: &str) -> u64 {
    let at = page.find(&format!("\"{name}\":")).expect(name) + name.len() + 3;
    page[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect(name)
}

/// A log-uniform size between 1 KiB and 1 MiB from a xorshift state.
fn next_size(state: &mut u64) -> usize {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let unit = (*state >> 11) as f64 / (1u64 << 53) as f64;
    (1024.0 * 1024f64.powf(unit)) as usize
}

#[test]
fn resident_memory_stays_near_the_limit_under_churn() {
    let backend = origin();
    let admin = common::free_port();
    let (mut child, port) = common::http_proxy(
        backend,
        &[
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
            "-m",
            &MEMORY_MB.to_string(),
            "-t",
            "2",
        ],
    );
    // Eight clients with keep-alive push ten times -m of distinct objects through.
    let target = MEMORY_MB << 20;
    let sent = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8u64)
        .map(|i| {
            let sent = sent.clone();
            std::thread::spawn(move || {
                let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(30)))
                    .unwrap();
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                let mut state = 0x9e37_79b9_7f4a_7c15 ^ (i + 1);
                let mut body = vec![0u8; 1 << 20];
                let mut n = 0;
                while sent.load(Ordering::Relaxed) < 10 * target {
                    let size = next_size(&mut state);
                    n += 1;
                    write!(
                        writer,
                        "GET /{size}/c{i}-{n} HTTP/1.1\r\nHost: churn\r\n\r\n"
                    )
                    .unwrap();
                    let (head, length) = read_head(&mut reader).expect("a response");
                    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                    assert_eq!(length, size);
                    reader.read_exact(&mut body[..length]).unwrap();
                    sent.fetch_add(length as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Sample the resident memory while they run.
    let mut max_rss = 0;
    while !clients.iter().all(|c| c.is_finished()) {
        max_rss = max_rss.max(rss_kb(&child));
        std::thread::sleep(Duration::from_millis(20));
    }
    for client in clients {
        client.join().unwrap();
    }
    max_rss = max_rss.max(rss_kb(&child));
    let page = stats(admin);
    let (bytes, limit, evictions) = (
        stat(&page, "bytes"),
        stat(&page, "limit_bytes"),
        stat(&page, "evictions"),
    );
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "{} MB through -m {MEMORY_MB}: peak RSS {} KB (bound {} KB), store {bytes} of {limit} bytes, {evictions} evictions",
        sent.load(Ordering::Relaxed) >> 20,
        max_rss,
        rss_bound_kb()
    );
    assert!(bytes <= limit);
    assert!(evictions > 100, "objects were evicted: {evictions}");
    assert!(
        max_rss <= rss_bound_kb(),
        "peak RSS {max_rss} KB over the bound {} KB",
        rss_bound_kb()
    );
}
