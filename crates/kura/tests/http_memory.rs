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
            // Head and body are two writes: without this, Nagle holds the body's last
            // segment until the cache's delayed ACK (some 40 ms a response).
            let _ = stream.set_nodelay(true);
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

/// The highest resident memory of `child` while `clients` run (sampled every 20 ms), after
/// joining them.
fn peak_rss_kb(child: &Child, clients: Vec<std::thread::JoinHandle<()>>) -> u64 {
    let mut max_rss = 0;
    while !clients.iter().all(|c| c.is_finished()) {
        max_rss = max_rss.max(rss_kb(child));
        std::thread::sleep(Duration::from_millis(20));
    }
    for client in clients {
        client.join().unwrap();
    }
    max_rss.max(rss_kb(child))
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
/// `kura http -t 2` with `-m memory_mb` in front of `backend`: the child, its port and its
/// admin port.
fn start_cache(backend: u16, memory_mb: u64) -> (Child, u16, u16) {
    let admin = common::free_port();
    let (child, port) = common::http_proxy(
        backend,
        &[
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
            "-m",
            &memory_mb.to_string(),
            "-t",
            "2",
        ],
    );
    (child, port, admin)
}

/// A keep-alive client connection to `port`: its writing half and its buffered reading half.
fn keep_alive(port: u16) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // `write!` sends a request in several writes: without this, Nagle holds all but the
    // first until the cache's delayed ACK (some 40 ms a request).
    stream.set_nodelay(true).unwrap();
    let writer = stream.try_clone().unwrap();
    (writer, BufReader::new(stream))
}

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
    let (mut child, port, admin) = start_cache(backend, MEMORY_MB);
    // Eight clients with keep-alive push ten times -m of distinct objects through.
    let target = MEMORY_MB << 20;
    let sent = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8u64)
        .map(|i| {
            let sent = sent.clone();
            std::thread::spawn(move || {
                let (mut writer, mut reader) = keep_alive(port);
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
    let max_rss = peak_rss_kb(&child, clients);
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

/// Realistic pages: HTML-like text (gzip takes it to about a third), 4 KiB to 256 KiB.
fn html(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 24] = [
        "the", "cache", "blog", "entry", "comment", "tokyo", "memory", "request", "server",
        "deploy", "hatena", "diary", "photo", "travel", "ramen", "train", "morning", "project",
        "release", "guide", "review", "recipe", "music", "season",
    ];
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(len + 128);
    while out.len() < len {
        let (id, href) = (next(), next() % 100_000);
        out.extend_from_slice(
            format!("<div class=\"entry\" id=\"e{id:x}\"><a href=\"/entry/{href}\">").as_bytes(),
        );
        for _ in 0..(6 + next() % 10) {
            out.extend_from_slice(WORDS[(next() % WORDS.len() as u64) as usize].as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(b"</a></div>\n");
    }
    out.truncate(len);
    out
}

/// An origin of text/html pages: `GET /SIZE/anything` answers SIZE bytes of [`html`] (cut
/// from a pool of 4 MiB, at an offset from the path, so that pages differ), plain.
fn html_origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pool = Arc::new(html(4 << 20, 0x5eed));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            // Head and body are two writes: without this, Nagle holds the body's last
            // segment until the cache's delayed ACK (some 40 ms a response).
            let _ = stream.set_nodelay(true);
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                while let Some((head, _)) = read_head(&mut reader) {
                    let path = head.split(' ').nth(1).unwrap_or("/");
                    let size: usize = path
                        .split('/')
                        .nth(1)
                        .and_then(|size| size.parse().ok())
                        .unwrap_or(1024)
                        .min(1 << 20);
                    let offset = path.len() * 7919 % (pool.len() - size);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Type: text/html\r\nContent-Length: {size}\r\n\r\n"
                    );
                    if writer.write_all(answer.as_bytes()).is_err()
                        || writer.write_all(&pool[offset..offset + size]).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Reads a chunked body into `out` (its length).
fn read_chunked(reader: &mut impl BufRead, out: &mut Vec<u8>) -> usize {
    out.clear();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let size = usize::from_str_radix(line.trim(), 16).expect("a chunk size");
        if size == 0 {
            // No trailer fields: the empty line ends the body.
            let mut end = String::new();
            reader.read_line(&mut end).unwrap();
            assert_eq!(end, "\r\n");
            return out.len();
        }
        let start = out.len();
        out.resize(start + size + 2, 0);
        reader.read_exact(&mut out[start..]).unwrap();
        out.truncate(start + size);
    }
}

/// docs/http.md's sizing rule for pages: 1.2 x -m (the store's arenas, measured at 1.15 x:
/// scattered free space between compressed pages) plus a fixed 32 MiB (binary, runtime,
/// buffers, bodies in flight of eight clients).
fn page_rss_bound_kb(memory_mb: u64) -> u64 {
    memory_mb * 1024 * 6 / 5 + 32 * 1024
}

#[test]
fn resident_memory_of_gzip_stored_pages_stays_within_a_tenth_over() {
    const PAGE_MEMORY_MB: u64 = 48;
    let backend = html_origin();
    let (mut child, port, admin) = start_cache(backend, PAGE_MEMORY_MB);
    // Eight gzip clients push twice -m of distinct compressed pages through: the store is
    // full half-way, and evicting from then on.
    let target = PAGE_MEMORY_MB << 20;
    let sent = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8u64)
        .map(|i| {
            let sent = sent.clone();
            std::thread::spawn(move || {
                let (mut writer, mut reader) = keep_alive(port);
                let mut state = 0x2545_f491_4f6c_dd1d ^ (i + 1);
                let mut body = Vec::with_capacity(1 << 20);
                let mut n = 0;
                while sent.load(Ordering::Relaxed) < 2 * target {
                    // 4 KiB to 256 KiB, log-uniform.
                    let size = (next_size(&mut state) / 4).max(4096);
                    n += 1;
                    write!(
                        writer,
                        "GET /{size}/p{i}-{n} HTTP/1.1\r\nHost: pages\r\nAccept-Encoding: gzip\r\n\r\n"
                    )
                    .unwrap();
                    let (head, length) = read_head(&mut reader).expect("a response");
                    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                    assert!(head.contains("content-encoding: gzip"), "{head}");
                    let got = if head.contains("transfer-encoding: chunked") {
                        read_chunked(&mut reader, &mut body)
                    } else {
                        body.resize(length, 0);
                        reader.read_exact(&mut body).unwrap();
                        length
                    };
                    if n % 64 == 0 {
                        let mut plain = Vec::new();
                        flate2::read::GzDecoder::new(&body[..])
                            .read_to_end(&mut plain)
                            .unwrap();
                        assert_eq!(plain.len(), size);
                    }
                    sent.fetch_add(got as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let max_rss = peak_rss_kb(&child, clients);
    let page = stats(admin);
    let (bytes, limit, evictions, objects) = (
        stat(&page, "bytes"),
        stat(&page, "limit_bytes"),
        stat(&page, "evictions"),
        stat(&page, "objects"),
    );
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "{} MB of gzip through -m {PAGE_MEMORY_MB}: peak RSS {max_rss} KB (bound {} KB), store {bytes} of {limit} bytes, {objects} objects, {evictions} evictions",
        sent.load(Ordering::Relaxed) >> 20,
        page_rss_bound_kb(PAGE_MEMORY_MB)
    );
    assert!(bytes <= limit);
    assert!(evictions > 100, "objects were evicted: {evictions}");
    assert!(
        max_rss <= page_rss_bound_kb(PAGE_MEMORY_MB),
        "peak RSS {max_rss} KB over the bound {} KB",
        page_rss_bound_kb(PAGE_MEMORY_MB)
    );
}
