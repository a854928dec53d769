//! `lru_crawler metadump all` over 1,000,000 items streams them in bounded
//! memory: the dump (some 80 MB of lines) never adds more than a small,
//! fixed amount to the process's resident memory, however many items
//! there are. A file of its own: nothing else runs in the process while
//! its memory is measured.

mod common;

use std::io::Read;

use common::TestServer;
use kura_store::Expiry;

const ITEMS: usize = 1_000_000;
/// What the dump may add to the resident set: the connection's output
/// (written out at 64 KiB), one step's lines, the test's read buffer and
/// the allocator's slack. A dump built whole would add some 80 MiB.
const GROWTH_MAX: u64 = 24 << 20;

/// The process's resident set, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn metadump_of_a_million_items_stays_in_bounded_memory() {
    if !std::path::Path::new("/proc/self/status").exists() {
        println!("skipped: no /proc");
        return;
    }
    let kura = TestServer::with(|c| {
        c.memory_limit = 512;
        c.threads = 2;
    });
    let store = &kura.handle().shared().store;
    let value = [b'v'; 32];
    for i in 0..ITEMS {
        store.insert(format!("key:{i:08}").as_bytes(), &value, Expiry::Never);
    }
    assert_eq!(store.len(), ITEMS);
    let mut c = kura.connect();
    // A first dump, so that buffers the server keeps are in the baseline.
    c.send(b"lru_crawler metadump all\r\n");
    let first = read_dump(&mut c, &mut || {});
    assert_eq!(first.0, ITEMS);
    let before = rss();
    let mut peak = before;
    c.send(b"lru_crawler metadump all\r\n");
    let (lines, bytes) = read_dump(&mut c, &mut || peak = peak.max(rss()));
    assert_eq!(lines, ITEMS);
    assert!(bytes > 60 << 20, "{bytes} bytes of lines");
    let growth = peak.saturating_sub(before);
    println!("resident before the dump {before} B, peak {peak} B, growth {growth} B over {bytes} B dumped");
    assert!(
        growth < GROWTH_MAX,
        "the dump added {growth} bytes to the resident set"
    );
}

/// Reads a dump to its `END`, calling `sample` every 64 reads; the lines
/// and bytes read.
fn read_dump(c: &mut common::Client, sample: &mut dyn FnMut()) -> (usize, usize) {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut lines, mut bytes, mut reads) = (0, 0, 0usize);
    let mut tail = Vec::new();
    loop {
        let n = c.stream.read(&mut buf).expect("read dump");
        assert!(n > 0, "closed during the dump");
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count();
        bytes += n;
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 16 {
            tail.drain(..tail.len() - 16);
        }
        reads += 1;
        if reads % 64 == 0 {
            sample();
        }
        if tail.ends_with(b"END\r\n") {
            // The `END` line is not an item's.
            return (lines - 1, bytes);
        }
    }
}
