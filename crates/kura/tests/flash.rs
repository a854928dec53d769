//! The flash tier (`--ext-path`, memcached's `-o ext_path`) as an operator
//! meets it: a cache larger than RAM served byte for byte, memcached's
//! extstore figures in `stats`, a device that refuses writes, restarts
//! after SIGKILL and SIGTERM that start clean, a durable server whose log
//! still brings its data back, and the same workload on Debian's memcached
//! with extstore.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use common::{ask, free_port, kura, stat, stat_str, tempdir, Server};

/// The value of key `i`: 1,500 to 2,500 bytes only it has.
fn value(i: usize) -> Vec<u8> {
    kura_testkit::values::distinct(i, 1500..2500)
}

fn key(i: usize) -> String {
    format!("fk:{i:06}")
}

/// Sets keys `0..n` (noreply, in batches, each batch ended by `mn`).
fn set_all(s: &mut TcpStream, n: usize) {
    set_all_then(s, n, |_| {});
}

/// [`set_all`], calling `after` on the connection after each batch.
fn set_all_then(s: &mut TcpStream, n: usize, mut after: impl FnMut(&mut TcpStream)) {
    for batch in (0..n).collect::<Vec<_>>().chunks(200) {
        let mut req = Vec::new();
        for &i in batch {
            let v = value(i);
            req.extend_from_slice(format!("set {} 5 0 {} noreply\r\n", key(i), v.len()).as_bytes());
            req.extend_from_slice(&v);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"mn\r\n");
        ask(s, &req, b"MN\r\n");
        after(s);
    }
}

/// Waits (up to 20 s) until kura's flash writer has at most one full write
/// buffer waiting: a fill paced so that the writer, however starved of CPU
/// by a loaded machine, never falls the four buffers behind that make it
/// drop evicted values.
fn writer_caught_up(s: &mut TcpStream) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while stat(s, "extstore_io_queue") > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Reads one `get` reply of several keys: (key, value) of each hit.
fn read_values(s: &mut TcpStream) -> Vec<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut hits = Vec::new();
    let mut at = 0;
    loop {
        // Enough bytes for a line?
        if let Some(end) = buf[at..].windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&buf[at..at + end]).into_owned();
            if line == "END" {
                return hits;
            }
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts[0], "VALUE", "{line}");
            let len: usize = parts[3].parse().unwrap();
            let start = at + end + 2;
            while buf.len() < start + len + 2 {
                fill(s, &mut buf);
            }
            assert_eq!(&buf[start + len..start + len + 2], b"\r\n");
            assert_eq!(parts[2], "5", "flags of {}", parts[1]);
            hits.push((parts[1].to_string(), buf[start..start + len].to_vec()));
            at = start + len + 2;
        } else {
            fill(s, &mut buf);
        }
    }
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut b = [0u8; 65536];
    let n = s.read(&mut b).unwrap();
    assert!(n > 0, "closed early");
    buf.extend_from_slice(&b[..n]);
}

/// Gets keys `0..n` 100 at a time; every hit must be exactly its value.
/// Returns the hits.
fn check_all(s: &mut TcpStream, n: usize) -> usize {
    let mut hits = 0;
    for batch in (0..n).collect::<Vec<_>>().chunks(100) {
        let keys: Vec<String> = batch.iter().map(|&i| key(i)).collect();
        s.write_all(format!("get {}\r\n", keys.join(" ")).as_bytes())
            .unwrap();
        for (k, v) in read_values(s) {
            let i: usize = k["fk:".len()..].parse().unwrap();
            assert!(v == value(i), "key {k}: wrong bytes ({} long)", v.len());
            hits += 1;
        }
    }
    hits
}

/// A flash file in a directory of the test's own.
fn flash_file(name: &str) -> (PathBuf, String) {
    let dir = tempdir(&format!("flash-{name}"));
    let file = dir.join("extstore");
    let arg = format!("{}:64m", file.display());
    (dir, arg)
}

/// `-m 8` and 64 MB of flash in pages of 8 MB, 2 MB write buffers (memcached
/// takes multiples of 2 MB).
fn flash_args(ext: &str) -> Vec<String> {
    vec![
        "-m".into(),
        "8".into(),
        "--ext-path".into(),
        ext.into(),
        "-o".into(),
        "ext_page_size=8,ext_wbuf_size=2".into(),
    ]
}

fn start(extra: &[String]) -> Server {
    let args: Vec<&str> = extra.iter().map(String::as_str).collect();
    Server::start_in_memory(&args)
}

const N: usize = 20_000; // about 40 MB of values: five times -m 8

#[test]
fn a_cache_five_times_ram_is_served_from_flash_byte_for_byte() {
    let (_dir, ext) = flash_file("serve");
    let server = start(&flash_args(&ext));
    let mut c = server.connect();
    set_all(&mut c, N);
    let in_ram = stat(&mut c, "curr_items") as usize;
    let hits = check_all(&mut c, N);
    assert!(hits >= 3 * in_ram, "{hits} hits, {in_ram} items in RAM");
    assert!(stat(&mut c, "extstore_objects_written") > 0);
    assert!(stat(&mut c, "get_extstore") as usize >= hits - in_ram);
    assert_eq!(stat(&mut c, "extstore_limit_maxbytes"), 64 << 20);
    assert_eq!(stat(&mut c, "badcrc_from_extstore"), 0);
    let settings = String::from_utf8(ask(&mut c, b"stats settings\r\n", b"END\r\n")).unwrap();
    for line in [
        "STAT ext_item_size 512",
        "STAT ext_wbuf_size 2097152",
        "STAT ext_drop_unread no",
    ] {
        assert!(settings.contains(line), "{line} missing:\n{settings}");
    }
}

#[test]
fn a_device_that_refuses_writes_loses_values_and_counts_it_never_serves_wrong_bytes() {
    // /dev/full takes the open and refuses every write (ENOSPC).
    let args = flash_args("/dev/full:64m");
    let server = start(&args);
    let mut c = server.connect();
    set_all(&mut c, N);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while stat(&mut c, "extstore_write_errors") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no write error counted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let in_ram = stat(&mut c, "curr_items") as usize;
    let hits = check_all(&mut c, N);
    // Only RAM, and what the write buffers still hold, can answer.
    assert!(hits < N, "{hits}");
    assert!(hits >= in_ram / 2, "{hits} hits, {in_ram} in RAM");
}

#[test]
fn a_flash_file_that_cannot_be_opened_stops_the_start_with_the_reason() {
    let out = kura()
        .args(["server", "-p", &free_port().to_string()])
        .args(["--ext-path", "/nonexistent-dir/f:64m"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("flash tier (ext_path)") && err.contains("/nonexistent-dir/f"),
        "{err}"
    );
    let out = kura()
        .args([
            "server",
            "-p",
            &free_port().to_string(),
            "-o",
            "ext_low_ttl=60",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ext_low_ttl"), "{err}");
}

#[test]
fn restarts_after_sigkill_and_sigterm_start_with_an_empty_tier() {
    let (_dir, ext) = flash_file("restart");
    let args = flash_args(&ext);
    for stop_with_kill in [true, false] {
        let server = start(&args);
        let mut c = server.connect();
        set_all(&mut c, N);
        assert!(stat(&mut c, "extstore_objects_written") > 0);
        if stop_with_kill {
            server.kill();
        } else {
            server.stop();
        }
        let server = start(&args);
        let mut c = server.connect();
        assert_eq!(stat(&mut c, "extstore_objects_used"), 0);
        assert_eq!(
            check_all(&mut c, N),
            0,
            "a restarted cache serves nothing old"
        );
        assert_eq!(stat(&mut c, "get_extstore"), 0);
    }
}

#[test]
fn a_durable_server_with_a_flash_tier_gets_its_data_back_from_the_log() {
    let (dir, ext) = flash_file("durable");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut args = vec!["--data-dir".to_string(), data.display().to_string()];
    args.extend(["--fsync".into(), "always".into()]);
    args.extend(["--ext-path".into(), ext, "-m".into(), "64".into()]);
    // 2,000 values (4 MB) fit in RAM: the log has them all.
    let server = start(&args);
    let mut c = server.connect();
    set_all(&mut c, 2_000);
    server.kill();
    let server = start(&args);
    let mut c = server.connect();
    assert_eq!(check_all(&mut c, 2_000), 2_000);
    server.stop();
    let server = start(&args);
    let mut c = server.connect();
    assert_eq!(check_all(&mut c, 2_000), 2_000, "after a clean stop too");
}

#[test]
fn kura_holds_at_least_what_memcacheds_extstore_holds_on_the_same_workload() {
    let Some(bin) = kura_testkit::tools::memcached_bin() else {
        return;
    };
    let (_dir, ext) = flash_file("memcached");
    let mc_ext = ext.replace("extstore", "memcached-extstore");
    let mc = kura_testkit::memcached::Memcached::start_default(
        &bin,
        // memcached takes ext_page_size only before ext_path.
        &[
            "-m",
            "8",
            "-o",
            &format!("ext_page_size=8,ext_wbuf_size=2,ext_path={mc_ext}"),
        ],
    );
    let mut m = TcpStream::connect(mc.addr).unwrap();
    set_all(&mut m, N);
    let memcached_hits = check_all(&mut m, N);
    let server = start(&flash_args(&ext));
    let mut c = server.connect();
    // What each keeps, not how fast a writer thread runs on a loaded
    // machine (a starved writer makes kura drop evicted values, as a
    // starved storage thread makes memcached evict them): kura's fill waits
    // for its writer.
    set_all_then(&mut c, N, writer_caught_up);
    let kura_hits = check_all(&mut c, N);
    eprintln!("hits of {N}: kura {kura_hits}, memcached {memcached_hits}");
    assert!(
        kura_hits >= memcached_hits,
        "kura {kura_hits} < memcached {memcached_hits} (extstore_writes_dropped {})",
        stat_str(&mut c, "extstore_writes_dropped")
    );
    assert_eq!(stat(&mut c, "extstore_writes_dropped"), 0);
}
