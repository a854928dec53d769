//! The inspection commands (docs/compatibility.md): `lru_crawler`'s key
//! dumps and settings, `stats cachedump`, `stats items`/`slabs` by size
//! class as Debian's `memcached-tool` reads them, `watch` (with a watcher
//! that does not read, which must never hold a worker up) and `stats
//! topkeys`. Replies memcached 1.6.18 gives deterministically are compared
//! with its own (skipped when it is not installed, unless
//! `KURA_REQUIRE_MEMCACHED=1`).

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{Client, Memcached, TestServer};

/// The reply to `req` up to its last line, `end`.
fn ask(addr: SocketAddr, req: &[u8], end: &[u8]) -> String {
    let mut c = Client::connect(addr);
    c.send(req);
    String::from_utf8_lossy(&c.read_until(end)).into_owned()
}

fn kura() -> TestServer {
    TestServer::with(|c| c.threads = 2)
}

/// Requests answered with one line, in order on one connection, as
/// memcached answers them (with its crawler on, as by default).
#[test]
fn crawler_and_dump_replies_match_memcached() {
    let Some(bin) = common::memcached_bin() else {
        return;
    };
    let memcached = crawling_memcached(&bin);
    let kura = kura();
    let lines: &[&str] = &[
        "lru_crawler metadump all",
        "lru_crawler metadump hash",
        "lru_crawler metadump 1,2",
        "lru_crawler metadump 0",
        "lru_crawler metadump 64",
        "lru_crawler metadump x",
        "lru_crawler metadump",
        "lru_crawler metadump all extra",
        // One crawl only: memcached is busy with it for a while.
        "lru_crawler crawl 99",
        "lru_crawler crawl 5",
        "lru_crawler tocrawl 5",
        "lru_crawler tocrawl x",
        "lru_crawler sleep 1000001",
        "lru_crawler sleep 10",
        "lru_crawler sleep -1",
        "lru_crawler foo",
        "lru_crawler",
        "lru_crawler enable",
        "lru_crawler disable",
        "lru_crawler disable",
        "lru_crawler metadump all",
        "lru_crawler crawl all",
        "lru_crawler enable",
        "stats cachedump",
        "stats cachedump 1",
        "stats cachedump 1 0",
        "stats cachedump 64 0",
        "stats cachedump 63 0",
        "stats cachedump x 0",
        "stats cachedump -1 0",
        "watch foo",
    ];
    let mut sides = [memcached.addr, kura.addr].map(Client::connect);
    for line in lines {
        let [m, k] = sides.each_mut().map(|c| {
            let mut tries = 0;
            loop {
                c.send(format!("{line}\r\n").as_bytes());
                let reply = String::from_utf8_lossy(&c.read_until(b"\r\n")).into_owned();
                tries += 1;
                let transient =
                    reply.starts_with("BUSY") || reply == "ERROR an unknown error happened\r\n";
                if !transient || tries == 100 {
                    break reply;
                }
                // memcached's crawler ends (or stops, after `disable`) a
                // moment after its reply.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        assert_eq!(k, m, "{line}");
    }
}

/// memcached with its crawler on but no LRU maintainer, which would start
/// crawls of its own (and make ours answer `BUSY`).
fn crawling_memcached(bin: &Path) -> Memcached {
    Memcached::start_default(bin, &["-o", "no_lru_maintainer"])
}

/// What memcached and kura each dump of the same items, one line's fields
/// a map.
fn metadump_fields(addr: SocketAddr) -> Vec<Vec<(String, String)>> {
    let mut c = Client::connect(addr);
    c.send(b"set plain 3 0 5\r\nhello\r\nset a%20b 0 1000 2\r\nhi\r\nset fetched 0 0 1\r\nx\r\n");
    c.read_until(b"STORED\r\nSTORED\r\nSTORED\r\n");
    c.send(b"get fetched\r\n");
    c.read_until(b"END\r\n");
    // By hash: memcached's walk of its LRUs may miss a key just read.
    let dump = ask(addr, b"lru_crawler metadump hash\r\n", b"END\r\n");
    let mut lines: Vec<Vec<(String, String)>> = dump
        .strip_suffix("END\r\n")
        .unwrap_or_else(|| panic!("{dump:?}"))
        .split_terminator('\n')
        .map(|l| {
            l.split(' ')
                .map(|f| {
                    let (k, v) = f.split_once('=').unwrap_or_else(|| panic!("{l:?}"));
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn metadump_lines_have_memcacheds_fields() {
    let kura = kura();
    let now = kura.handle().shared().store.now() as i64;
    let ours = metadump_fields(kura.addr);
    assert_eq!(ours.len(), 3, "{ours:?}");
    for line in &ours {
        let names: Vec<&str> = line.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["key", "exp", "la", "cas", "fetch", "cls", "size"]);
        let get = |n: &str| line.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        let la: i64 = get("la").and_then(|v| v.parse().ok()).unwrap_or(0);
        assert!((now - 2..=now + 2).contains(&la), "{line:?}");
        match get("key") {
            Some("a%2520b") => {
                let exp: i64 = get("exp").and_then(|v| v.parse().ok()).unwrap_or(0);
                assert!((now + 998..=now + 1002).contains(&exp), "{line:?}");
            }
            Some("fetched") => assert_eq!(get("fetch"), Some("yes")),
            Some("plain") => assert_eq!((get("exp"), get("fetch")), (Some("-1"), Some("no"))),
            other => panic!("{other:?}"),
        }
    }
    let Some(bin) = common::memcached_bin() else {
        return;
    };
    let memcached = crawling_memcached(&bin);
    // The same keys, field names, fetch marks and "never" expiries; the
    // times, CAS, classes and sizes are each server's own.
    let strip = |lines: &[Vec<(String, String)>]| -> Vec<Vec<(String, String)>> {
        lines
            .iter()
            .map(|l| {
                l.iter()
                    .map(|(k, v)| {
                        let keep = matches!(k.as_str(), "key" | "fetch") || v == "-1";
                        (k.clone(), if keep { v.clone() } else { String::new() })
                    })
                    .collect()
            })
            .collect()
    };
    assert_eq!(strip(&ours), strip(&metadump_fields(memcached.addr)));
}

#[test]
fn dumps_stream_and_the_connection_goes_on() {
    let kura = kura();
    let mut c = kura.connect();
    for i in 0..5_000 {
        c.send(format!("set k{i} 0 0 1\r\nv\r\n").as_bytes());
    }
    c.send(b"mn\r\n");
    c.read_until(b"MN\r\n");
    // Unlike memcached, kura answers what was sent behind a dump.
    c.send(b"lru_crawler metadump all\r\nmn\r\n");
    let dump = c.read_until(b"END\r\nMN\r\n");
    assert_eq!(dump.iter().filter(|&&b| b == b'\n').count(), 5_000 + 2);
    c.send(b"lru_crawler mgdump hash\r\n");
    let mg = String::from_utf8_lossy(&c.read_until(b"EN\r\n")).into_owned();
    assert!(mg.starts_with("OK\r\nmg k"));
    let keys: BTreeSet<&str> = mg.lines().filter_map(|l| l.strip_prefix("mg ")).collect();
    assert_eq!(keys.len(), 5_000);
    c.send(b"ms AAE= 1 b\r\nx\r\n");
    c.read_until(b"HD\r\n");
    c.send(b"stats cachedump 1 3\r\n");
    let cd = String::from_utf8_lossy(&c.read_until(b"END\r\n")).into_owned();
    assert_eq!(cd.matches("ITEM k").count(), 3, "{cd}");
    assert!(cd.contains(" [1 b; 0 s]\r\n"), "{cd}");
    c.send(b"lru_crawler mgdump all\r\n");
    let mg = String::from_utf8_lossy(&c.read_until(b"EN\r\n")).into_owned();
    // A binary key (the bytes 0 and 1) is dumped in base64 with `b`.
    assert!(mg.contains("mg AAE= b\r\n"), "binary key missing");
    c.roundtrip(b"mn\r\n", b"MN\r\n");
}

#[test]
fn dumping_and_watching_can_be_turned_off() {
    let kura = TestServer::with(|c| {
        c.disable_dumping = true;
        c.disable_watch = true;
    });
    let mut c = kura.connect();
    c.roundtrip(
        b"lru_crawler metadump all\r\n",
        b"ERROR metadump not allowed\r\n",
    );
    c.roundtrip(
        b"lru_crawler mgdump all\r\n",
        b"ERROR key dump not allowed\r\n",
    );
    c.roundtrip(
        b"stats cachedump 1 1\r\n",
        b"CLIENT_ERROR stats cachedump not allowed\r\n",
    );
    c.roundtrip(b"watch\r\n", b"CLIENT_ERROR watch commands not allowed\r\n");
}

/// The path of Debian's memcached-tool, or `None` (skipped) when absent.
fn memcached_tool() -> Option<&'static Path> {
    let path = Path::new("/usr/share/memcached/scripts/memcached-tool");
    if path.exists() && Command::new("perl").arg("-v").output().is_ok() {
        return Some(path);
    }
    if std::env::var("KURA_REQUIRE_MEMCACHED").as_deref() == Ok("1") {
        panic!("memcached-tool (Debian's memcached package) or perl not found");
    }
    println!("skipped: memcached-tool not installed");
    None
}

fn tool(path: &Path, addr: SocketAddr, mode: &str) -> String {
    let out = Command::new("perl")
        .arg(path)
        .arg(addr.to_string())
        .arg(mode)
        .output()
        .expect("run memcached-tool");
    assert!(out.status.success(), "memcached-tool {mode}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Items of several sizes (and so classes), the same on every server.
fn fill(addr: SocketAddr) {
    let mut c = Client::connect(addr);
    for (i, len) in [10usize, 100, 1_000, 10_000, 100_000].iter().enumerate() {
        for j in 0..20 {
            let v = vec![b'a' + (j % 26) as u8; *len];
            c.send(format!("set k{i}_{j} {j} 0 {len}\r\n").as_bytes());
            c.send(&v);
            c.send(b"\r\n");
        }
    }
    c.send(b"mn\r\n");
    c.read_until(b"MN\r\n");
}

#[test]
fn memcached_tool_reads_kura_as_memcached() {
    let Some(path) = memcached_tool() else {
        return;
    };
    let kura = kura();
    fill(kura.addr);
    let display = tool(path, kura.addr, "display");
    let rows: Vec<&str> = display.lines().skip(1).collect();
    assert!(display.starts_with("  #  Item_Size  Max_age"), "{display}");
    // One row per class holding items: 100 items in all.
    assert!(rows.len() >= 3, "{display}");
    let count: u64 = rows
        .iter()
        .filter_map(|r| r.split_whitespace().nth(4)?.parse::<u64>().ok())
        .sum();
    assert_eq!(count, 100, "{display}");
    for mode in ["stats", "settings"] {
        let out = tool(path, kura.addr, mode);
        assert!(out.lines().count() > 20, "{mode}: {out}");
    }
    let dump = tool(path, kura.addr, "dump");
    assert_eq!(dump.matches("add k").count(), 100);
    let Some(bin) = common::memcached_bin() else {
        return;
    };
    let memcached = crawling_memcached(&bin);
    fill(memcached.addr);
    // The same `add` commands, in whatever order each dumps its keys.
    let sorted = |d: &str| -> BTreeSet<String> { d.split("add ").map(str::to_string).collect() };
    assert_eq!(sorted(&dump), sorted(&tool(path, memcached.addr, "dump")));
    let theirs = tool(path, memcached.addr, "display");
    assert_eq!(display.lines().next(), theirs.lines().next());
}

/// A watcher's lines until one that contains `last`, without their
/// timestamps and numbers.
fn watched(w: &mut Client, last: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut buf = Vec::new();
    while !lines.iter().any(|l: &String| l.contains(last)) {
        let mut b = [0u8; 4096];
        let n = w.stream.read(&mut b).expect("watcher read");
        assert!(n > 0, "watcher closed");
        buf.extend_from_slice(&b[..n]);
        while let Some(end) = buf.iter().position(|&x| x == b'\n') {
            let line = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..=end);
            let (ts, rest) = line.split_once(' ').unwrap_or_default();
            assert!(ts.starts_with("ts=") && ts.contains('.'), "{line}");
            let (gid, rest) = rest.split_once(' ').unwrap_or_default();
            assert!(gid.starts_with("gid="), "{line}");
            lines.push(rest.to_string());
        }
    }
    lines
}

#[test]
fn watchers_see_memcacheds_lines() {
    let kura = kura();
    let mut w = kura.connect();
    w.send(b"watch fetchers mutations connevents\r\n");
    assert_eq!(w.read_exact(4), b"OK\r\n");
    let mut c = kura.connect();
    let port = c.stream.local_addr().map(|a| a.port()).unwrap_or(0);
    c.send(b"set foo 5 100 3\r\nbar\r\nget foo nope\r\nmg foo v\r\nadd foo 0 0 1\r\nx\r\n");
    c.read_until(b"NOT_STORED\r\n");
    drop(c);
    let lines = watched(&mut w, "type=conn_close");
    let cfd = |l: &str| {
        l.split(" cfd=")
            .nth(1)
            .map(|s| s.split(' ').next().unwrap_or("").to_string())
    };
    let fd = cfd(&lines[0]).unwrap_or_default();
    let want = [
        format!("type=conn_new rip=127.0.0.1 rport={port} transport=tcp cfd={fd}"),
        format!("type=item_store key=foo status=stored cmd=set ttl=100 clsid=1 cfd={fd} size=3"),
        format!("type=item_get key=foo status=found clsid=1 cfd={fd} size=3"),
        format!("type=item_get key=nope status=not_found clsid=0 cfd={fd} size=0"),
        format!("type=item_get key=foo status=found clsid=1 cfd={fd} size=3"),
        format!("type=item_store key=foo status=not_stored cmd=add ttl=0 clsid=1 cfd={fd} size=1"),
        format!("type=conn_close rip=127.0.0.1 rport={port} transport=tcp reason=normal cfd={fd}"),
    ];
    assert_eq!(lines, want);
}

#[test]
fn eviction_watchers_hear_evictions() {
    let kura = TestServer::with(|c| {
        c.memory_limit = 8;
        c.threads = 2;
    });
    let mut w = kura.connect();
    w.send(b"watch evictions\r\n");
    assert_eq!(w.read_exact(4), b"OK\r\n");
    let mut c = kura.connect();
    let v = vec![b'v'; 1000];
    for i in 0..20_000 {
        c.send(format!("set k{i} 0 0 1000 noreply\r\n").as_bytes());
        c.send(&v);
        c.send(b"\r\n");
    }
    let lines = watched(&mut w, "type=eviction");
    let l = &lines[0];
    assert!(l.starts_with("type=eviction key=k"), "{l}");
    assert!(l.contains(" fetch=no ttl=-1 la="), "{l}");
    assert!(l.ends_with(" size=1000"), "{l}");
}

/// A watcher that does not read holds nobody up: its queue fills, lines
/// are dropped and counted, and it hears how many when it reads again.
#[test]
fn a_slow_watcher_never_makes_a_worker_wait() {
    let kura = kura();
    let mut w = kura.connect();
    w.send(b"watch fetchers\r\n");
    assert_eq!(w.read_exact(4), b"OK\r\n");
    // Some 400,000 lines (about 40 MB): more than the watcher's socket
    // buffers and queue hold together, while it reads nothing.
    let mut c = kura.connect();
    let keys: String = (0..100).map(|i| format!(" key{i}")).collect();
    for _ in 0..4_000 {
        c.send(format!("get{keys}\r\n").as_bytes());
        assert_eq!(c.read_exact(5), b"END\r\n");
    }
    let stats = ask(kura.addr, b"stats\r\n", b"END\r\n");
    let skipped: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT log_watcher_skipped "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(skipped > 0, "{stats}");
    assert!(stats.contains("STAT log_watchers 1\r\n"));
    // Reading again, the watcher hears how many lines it lost: once its
    // queue has room again, a read's line gets through, after the count.
    w.stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .ok();
    let mut seen = Vec::new();
    let mut b = vec![0u8; 1 << 16];
    for round in 0.. {
        assert!(round < 2_000, "no line got through");
        c.send(format!("get more{round}\r\n").as_bytes());
        c.read_until(b"END\r\n");
        while let Ok(n) = w.stream.read(&mut b) {
            assert!(n > 0, "watcher closed");
            seen.extend_from_slice(&b[..n]);
        }
        if String::from_utf8_lossy(&seen).contains("key=more") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&seen);
    let said: u64 = text
        .lines()
        .filter_map(|l| l.strip_prefix("skipped="))
        .filter_map(|v| v.parse::<u64>().ok())
        .sum();
    let stats = ask(kura.addr, b"stats\r\n", b"END\r\n");
    let now_skipped: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT log_watcher_skipped "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(said >= skipped, "{said} < {skipped}");
    assert_eq!(said, now_skipped, "every line dropped is announced");
}

#[test]
fn topkeys_lists_the_most_requested_keys() {
    let kura = kura();
    let mut c = kura.connect();
    c.roundtrip(b"stats topkeys\r\n", b"STAT topkeys_window 0\r\nEND\r\n");
    c.roundtrip(
        b"stats topkeys on 0\r\n",
        b"CLIENT_ERROR usage: stats topkeys [on [seconds]|off]\r\n",
    );
    c.roundtrip(b"stats topkeys on 1\r\n", b"OK\r\n");
    // Whichever windows the requests fall in, `hot` leads them.
    for round in 0..50 {
        c.send(b"get hot hot hot hot hot warm warm\r\n");
        c.send(format!("get cold{round} x{round}\r\n").as_bytes());
        c.read_until(b"END\r\nEND\r\n");
    }
    let mut tries = 0;
    loop {
        let list = ask(kura.addr, b"stats topkeys\r\n", b"END\r\n");
        let first = list
            .lines()
            .find(|l| l.starts_with("STAT topkey_now:1 ") || l.starts_with("STAT topkey_last:1 "));
        if let Some(first) = first {
            assert!(first.contains(" key=hot count="), "{list}");
            break;
        }
        tries += 1;
        assert!(tries < 100, "{list}");
        std::thread::sleep(Duration::from_millis(100));
    }
    c.roundtrip(b"stats topkeys off\r\n", b"OK\r\n");
    c.roundtrip(b"stats topkeys\r\n", b"STAT topkeys_window 0\r\nEND\r\n");
}

#[test]
fn stats_slabs_and_items_count_by_class() {
    let kura = kura();
    fill(kura.addr);
    let slabs = ask(kura.addr, b"stats slabs\r\n", b"END\r\n");
    let items = ask(kura.addr, b"stats items\r\n", b"END\r\n");
    let sum = |text: &str, suffix: &str| -> u64 {
        text.lines()
            .filter_map(|l| {
                let (name, v) = l.strip_prefix("STAT ")?.split_once(' ')?;
                name.ends_with(suffix).then(|| v.parse::<u64>().ok())?
            })
            .sum()
    };
    assert_eq!(sum(&items, ":number"), 100);
    assert_eq!(sum(&slabs, ":used_chunks"), 100);
    let classes = sum(&slabs, "active_slabs");
    assert!(classes >= 4, "{slabs}");
    assert!(sum(&slabs, ":total_pages") >= 2, "{slabs}");
    let mut w = TcpStream::connect(kura.addr).expect("connect");
    w.write_all(b"quit\r\n").ok();
}
