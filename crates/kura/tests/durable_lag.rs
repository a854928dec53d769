//! The durable mode's bound on what a crash can lose: under `--fsync
//! everysec` and `no`, writers that outrun the log thread (large values)
//! must wait for it, so that SIGKILL loses at most about two seconds of
//! acknowledged writes, whatever the load; and the memory the records
//! waiting for the log hold stays bounded.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{stat, tempdir, Server};

/// Slots each writer cycles through: its key `w{t}-{i % SLOTS}` holds write
/// `i`, so the state after a crash says which prefix of its writes survived.
const SLOTS: u64 = 32;

/// A value of `len` bytes that names its write.
fn value(i: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{i:010}").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// One writer: values of `sizes` bytes, acknowledged one at a time;
/// returns when each write was acknowledged (index i-1 for write i).
fn writer(
    mut s: TcpStream,
    t: usize,
    sizes: std::ops::Range<usize>,
    stop: Arc<AtomicBool>,
) -> Vec<Instant> {
    let mut acked = Vec::new();
    let mut reply = [0u8; 64];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
    while !stop.load(Ordering::Relaxed) && acked.len() < 1_000_000 {
        let i = acked.len() as u64 + 1;
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = sizes.start + (seed % (sizes.end - sizes.start) as u64) as usize;
        let mut req = format!("set w{t}-{} 0 0 {len}\r\n", i % SLOTS).into_bytes();
        req.extend_from_slice(&value(i, len));
        req.extend_from_slice(b"\r\n");
        if s.write_all(&req).is_err() {
            break;
        }
        match s.read(&mut reply) {
            Ok(n) if &reply[..n] == b"STORED\r\n" => acked.push(Instant::now()),
            _ => break,
        }
    }
    acked
}

/// The write each slot of writer `t` holds (0: none).
fn slots(c: &mut TcpStream, t: usize) -> Vec<u64> {
    let keys: Vec<String> = (0..SLOTS).map(|j| format!("w{t}-{j}")).collect();
    c.write_all(format!("get {}\r\n", keys.join(" ")).as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let mut b = vec![0u8; 1 << 16];
    while !got.ends_with(b"END\r\n") {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&b[..n]);
    }
    let mut held = vec![0u64; SLOTS as usize];
    let mut rest = &got[..];
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let line = std::str::from_utf8(&rest[..line_end]).unwrap();
        if line == "END" {
            break;
        }
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts[0], "VALUE", "unexpected line {line:?}");
        let j: usize = parts[1].rsplit('-').next().unwrap().parse().unwrap();
        let len: usize = parts[3].parse().unwrap();
        let data = &rest[line_end + 2..line_end + 2 + len];
        let i: u64 = std::str::from_utf8(&data[..10]).unwrap().parse().unwrap();
        assert_eq!(data, &value(i, len)[..], "slot {j} holds a damaged value");
        held[j] = i;
        rest = &rest[line_end + 2 + len + 2..];
    }
    held
}

/// Loads a server with `writers` writers of values of `sizes` bytes for
/// `secs`, kills it with SIGKILL while they write, starts it again and
/// checks what survived: for each writer a prefix of its writes (never a
/// hole), and every write acknowledged more than two seconds before the
/// kill.
fn sigkill_under_large_writes(
    fsync: &str,
    writers: usize,
    sizes: std::ops::Range<usize>,
    secs: u64,
) {
    let dir = tempdir(&format!("lag-{fsync}-{writers}"));
    let args = ["--fsync", fsync, "-m", "256"];
    let server = Server::start(&dir, &args);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..writers)
        .map(|t| {
            let (s, stop, sizes) = (server.connect(), stop.clone(), sizes.clone());
            std::thread::spawn(move || writer(s, t, sizes, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    let mut c = server.connect();
    let waits = stat(&mut c, "log_write_waits");
    // What follows reads a lost write from a missing slot: none may have
    // been evicted (the slots fit in -m many times over).
    assert_eq!(
        stat(&mut c, "evictions"),
        0,
        "{fsync}: evictions under a load that fits"
    );
    let killed = Instant::now();
    server.kill();
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<Vec<Instant>> = writers.into_iter().map(|w| w.join().unwrap()).collect();

    let server = Server::start(&dir, &args);
    let mut c = server.connect();
    let mut lost = 0;
    let mut oldest_lost = Duration::ZERO;
    for (t, times) in acked.iter().enumerate() {
        let held = slots(&mut c, t);
        let kept = held.iter().copied().max().unwrap_or(0);
        // A prefix: each slot holds the last write to it up to `kept`.
        for (j, &i) in held.iter().enumerate() {
            let last_to_slot = (1..=kept).rev().find(|w| w % SLOTS == j as u64);
            assert_eq!(
                i,
                last_to_slot.unwrap_or(0),
                "{fsync}: writer {t} slot {j} is not the state after write {kept}: a hole"
            );
        }
        let n = times.len() as u64;
        if kept < n {
            lost += n - kept;
            let first_lost = times[kept as usize];
            oldest_lost = oldest_lost.max(killed.saturating_duration_since(first_lost));
        }
    }
    let total: usize = acked.iter().map(Vec::len).sum();
    eprintln!(
        "{fsync}: {total} large writes acknowledged in {secs} s, {waits} waits for the log; SIGKILL lost {lost}, the oldest acknowledged {:.2} s before the kill",
        oldest_lost.as_secs_f64()
    );
    assert!(total > 0, "no write was acknowledged");
    assert!(
        oldest_lost <= Duration::from_secs(2),
        "{fsync}: a write acknowledged {:.2} s before SIGKILL was lost ({lost} in all)",
        oldest_lost.as_secs_f64()
    );
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn everysec_loses_at_most_two_seconds_of_large_writes_to_sigkill() {
    sigkill_under_large_writes("everysec", 4, 50_000..300_000, 5);
}

#[test]
fn fsync_no_loses_at_most_two_seconds_of_large_writes_to_sigkill() {
    sigkill_under_large_writes("no", 4, 50_000..300_000, 5);
}

#[test]
fn everysec_loses_at_most_two_seconds_of_many_writers_to_sigkill() {
    sigkill_under_large_writes("everysec", 16, 10_000..30_000, 4);
}

/// Runs `kura bench` against `server`: eight connections setting 50 KB
/// values for `secs`; returns whether every set was stored.
/// Sets of 50 kB values: a fixed count, not a duration, so that the in-memory and
/// the durable run write the same volume however loaded the machine is (a timed
/// run on a busy machine could leave one of them short of full). 8,000 sets over
/// 5,000 keys write ~400 MB into a 64 MB cache: both fill and evict.
fn large_sets(server: &Server) -> bool {
    let out = common::kura()
        .args(["bench", "-s", &format!("127.0.0.1:{}", server.port)])
        .args(["-c", "8", "--ratio", "0:1", "--value-size", "50000"])
        .args(["--keys", "5000", "-n", "8000"])
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    out.status.success()
}

fn rss_kb(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_durable_cache_fills_and_evicts_in_the_memory_of_one_in_memory() {
    // The same load on the same -m, in memory and with a data dir.
    let mem = Server::start_in_memory(&["-m", "64"]);
    assert!(large_sets(&mem), "in memory: sets failed");
    let mut c = mem.connect();
    let (mem_items, mem_rss) = (stat(&mut c, "curr_items"), rss_kb(&mem));
    mem.stop();

    let dir = tempdir("lag-memory");
    let durable = Server::start(&dir, &["-m", "64"]);
    assert!(
        large_sets(&durable),
        "durable: sets failed (out of memory with a data dir?)"
    );
    let mut c = durable.connect();
    let (items, rss) = (stat(&mut c, "curr_items"), rss_kb(&durable));
    let evictions = stat(&mut c, "evictions");
    eprintln!(
        "in memory: {mem_items} items, RSS {mem_rss} kB; durable: {items} items, RSS {rss} kB, {evictions} evictions"
    );
    assert!(
        items * 100 >= mem_items * 95,
        "the durable cache holds {items} items, the in-memory one {mem_items}"
    );
    assert!(
        rss * 100 <= mem_rss * 110,
        "durable RSS {rss} kB is more than 10% over the in-memory {mem_rss} kB"
    );
    // The full cache is what comes back after a restart, not an empty one.
    durable.stop();
    let durable = Server::start(&dir, &["-m", "64"]);
    let mut c = durable.connect();
    let back = stat(&mut c, "curr_items");
    eprintln!("after a restart: {back} items of {items}");
    // The data dir keeps the seed that placed the keys in shards, so each shard gets back
    // what it held (with a new seed, 4-6% were evicted while loading). Not always every
    // one: -m is one budget over all shards, the log orders records per shard, and eight
    // writers interleave shards differently from the replay, so the replay can evict a
    // few items the live server kept (1,333 of 1,336 seen once in CI). Evictions, not
    // loss: each one is logged as such.
    assert!(
        back * 1000 >= items * 995,
        "{back} items came back of {items}"
    );
    durable.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
