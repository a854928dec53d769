//! The durable mode as an operator meets it: the `kura` binary with
//! `--data-dir`, killed with SIGKILL mid-load and started again on the same
//! directory; damaged logs and snapshots; `kura log check/repair`.

mod common;

use common::{
    ask, fill, free_port, get, kura, log_repair, newest, start_fails, stat, tempdir, Server,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writers that set distinct keys `w{t}-{i}` in order, each remembering
/// the last one acknowledged, until told to stop.
fn load(server: &Server, writers: usize, stop: &Arc<AtomicBool>, round: usize) -> Writers {
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..writers).map(|_| AtomicU64::new(0)).collect());
    let handles = (0..writers)
        .map(|t| {
            let mut s = server.connect();
            let (stop, progress) = (stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut acked = 0u64;
                let mut b = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    let i = acked + 1;
                    let req = format!("set r{round}w{t}-{i} 0 0 8\r\n{i:08}\r\n");
                    if s.write_all(req.as_bytes()).is_err() {
                        break;
                    }
                    match s.read(&mut b) {
                        Ok(n) if &b[..n] == b"STORED\r\n" => acked = i,
                        _ => break,
                    }
                    progress[t].store(acked, Ordering::Relaxed);
                }
                acked
            })
        })
        .collect();
    Writers { handles, acked }
}

/// The writers of [`load`], and how far each has got.
struct Writers {
    handles: Vec<std::thread::JoinHandle<u64>>,
    acked: Arc<Vec<AtomicU64>>,
}

impl Writers {
    /// Waits until every writer has had `n` writes acknowledged (a minute
    /// at most: a busy disk's fsyncs may take their time).
    fn wait_each(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.acked.iter().any(|a| a.load(Ordering::Relaxed) < n) {
            assert!(Instant::now() < deadline, "writers stuck below {n} writes");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last write each writer had acknowledged.
    fn join(self) -> Vec<u64> {
        self.handles
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect()
    }
}

#[test]
fn fsync_always_keeps_every_acknowledged_write_across_kills() {
    let dir = tempdir("always");
    let mut history: Vec<(usize, Vec<u64>)> = Vec::new();
    for round in 0..3 {
        let server = Server::start(&dir, &["--fsync", "always"]);
        // Everything acknowledged in earlier rounds is still there.
        let mut c = server.connect();
        for (r, acked) in &history {
            for (t, &n) in acked.iter().enumerate() {
                for i in [1, n / 2, n].into_iter().filter(|&i| i > 0) {
                    assert_eq!(
                        get(&mut c, &format!("r{r}w{t}-{i}")),
                        Some(format!("{i:08}")),
                        "round {r} writer {t} record {i} of {n} lost after round {round}'s restart"
                    );
                }
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers = load(&server, 4, &stop, round);
        writers.wait_each(200);
        // SIGKILL while the writers are still writing.
        server.kill();
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<u64> = writers.join();
        assert!(
            acked.iter().all(|&n| n > 0),
            "no write was acknowledged: {acked:?}"
        );
        history.push((round, acked));
    }
    // Every single acknowledged write, checked in one pipeline per writer.
    let server = Server::start(&dir, &["--fsync", "always"]);
    let mut c = server.connect();
    for (r, acked) in &history {
        for (t, &n) in acked.iter().enumerate() {
            let keys: Vec<String> = (1..=n).map(|i| format!("r{r}w{t}-{i}")).collect();
            for chunk in keys.chunks(100) {
                let req = format!("get {}\r\n", chunk.join(" "));
                let got = String::from_utf8(ask(&mut c, req.as_bytes(), b"END\r\n")).unwrap();
                let found = got.matches("VALUE ").count();
                assert_eq!(
                    found,
                    chunk.len(),
                    "round {r} writer {t}: acknowledged writes lost"
                );
            }
        }
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn everysec_loses_at_most_the_unsynced_tail_and_never_leaves_holes() {
    let dir = tempdir("everysec");
    let server = Server::start(&dir, &["--fsync", "everysec"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = load(&server, 2, &stop, 0);
    writers.wait_each(200);
    stop.store(true, Ordering::Relaxed);
    let first: Vec<u64> = writers.join();
    // The background sync reaches everything logged so far.
    let mut c = server.connect();
    let logged = stat(&mut c, "log_written_seq");
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "log_synced_seq") < logged {
        assert!(Instant::now() < deadline, "everysec never synced");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers = load(&server, 2, &stop, 1);
    writers.wait_each(200);
    server.kill();
    stop.store(true, Ordering::Relaxed);
    let second: Vec<u64> = writers.join();

    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    for (t, &n) in first.iter().enumerate() {
        assert_eq!(get(&mut c, &format!("r0w{t}-{n}")), Some(format!("{n:08}")));
    }
    let mut lost = 0;
    for (t, &n) in second.iter().enumerate() {
        // What survived is a prefix of each writer's writes: the log is
        // written in order, so a crash loses a tail, never a hole.
        let present: Vec<bool> = (1..=n)
            .map(|i| get(&mut c, &format!("r1w{t}-{i}")).is_some())
            .collect();
        let kept = present.iter().take_while(|&&p| p).count();
        assert!(
            present[kept..].iter().all(|&p| !p),
            "writer {t}: a hole in what survived"
        );
        lost += n as usize - kept;
    }
    eprintln!(
        "everysec: lost {lost} of {} acknowledged writes made in the last 0.5 s before SIGKILL",
        second.iter().sum::<u64>()
    );
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The observable state of each key: size, flags, CAS, TTL and stale mark
/// from meta get (without bumping it), then its value.
fn state(c: &mut TcpStream, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            let r = ask(c, format!("mg {k} s f c t k u\r\n").as_bytes(), b"\r\n");
            let line = String::from_utf8(r).unwrap();
            format!("{} {:?}", line.trim_end(), get(c, k))
        })
        .collect()
}

#[test]
fn every_command_survives_a_restart_with_the_same_state() {
    let dir = tempdir("roundtrip");
    let server = Server::start(&dir, &["--fsync", "always"]);
    let mut c = server.connect();
    let script: &[(&[u8], &[u8])] = &[
        (b"set plain 5 0 3\r\nabc\r\n", b"STORED\r\n"),
        (b"set ttl 6 1000 3\r\nttl\r\n", b"STORED\r\n"),
        (b"add added 1 0 1\r\na\r\n", b"STORED\r\n"),
        (b"set repl 0 0 1\r\nx\r\n", b"STORED\r\n"),
        (b"replace repl 2 0 1\r\ny\r\n", b"STORED\r\n"),
        (b"set app 0 0 1\r\nb\r\n", b"STORED\r\n"),
        (b"append app 0 0 1\r\nc\r\n", b"STORED\r\n"),
        (b"prepend app 0 0 1\r\na\r\n", b"STORED\r\n"),
        (b"set num 0 0 2\r\n10\r\n", b"STORED\r\n"),
        (b"incr num 5\r\n", b"15\r\n"),
        (b"decr num 3\r\n", b"12\r\n"),
        (b"set touched 0 0 1\r\nt\r\n", b"STORED\r\n"),
        (b"touch touched 5000\r\n", b"TOUCHED\r\n"),
        (b"set gone 0 0 1\r\ng\r\n", b"STORED\r\n"),
        (b"delete gone\r\n", b"DELETED\r\n"),
        (b"set expired 0 0 1\r\ne\r\n", b"STORED\r\n"),
        (b"touch expired -1\r\n", b"TOUCHED\r\n"),
        (b"ms meta 2 F9 T2000\r\nhi\r\n", b"HD\r\n"),
        (b"ms bWV0YWI= 1 b\r\nz\r\n", b"HD\r\n"),
        (b"ma mnum N0 J7\r\n", b"HD\r\n"),
        (b"ma mnum D4\r\n", b"HD\r\n"),
        (b"set stale 0 0 1\r\ns\r\n", b"STORED\r\n"),
        (b"md stale I T30\r\n", b"HD\r\n"),
        (b"mg viv N100\r\n", b"HD W\r\n"),
        (b"rotate fp 3 0 8 12\r\naaaabbbb\r\n", b"STORED\r\n"),
        (b"rotate fp 0 0 8 12\r\nccccdddd\r\n", b"STORED\r\n"),
        (b"ms mfp 4 MW w6 F2\r\nabcd\r\n", b"HD\r\n"),
        (b"ms mfp 4 MW w6\r\nefgh\r\n", b"HD\r\n"),
        (b"set noreply 0 0 1 noreply\r\nn\r\n", b""),
        (b"mn\r\n", b"MN\r\n"),
    ];
    for (req, want) in script {
        if want.is_empty() {
            c.write_all(req).unwrap();
            continue;
        }
        let got = ask(&mut c, req, want);
        assert!(
            got.ends_with(want),
            "{:?} -> {:?}",
            String::from_utf8_lossy(req),
            String::from_utf8_lossy(&got)
        );
    }
    // The binary protocol (its own connection): a SET with flags and
    // exptime, and a DELETE.
    let text = c;
    let mut c = server.connect();
    let bin_set = bin(0x01, b"binkey", b"binval", &[0, 0, 0, 7, 0, 0, 0x0b, 0xb8]);
    c.write_all(&bin_set).unwrap();
    let mut head = [0u8; 24];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head[6..8], &[0, 0], "binary set failed");
    c.write_all(&bin(0x04, b"plain2", b"", &[])).unwrap();
    c.read_exact(&mut head).unwrap();
    let mut c = text;
    let keys = [
        "plain", "ttl", "added", "repl", "app", "num", "touched", "gone", "expired", "meta",
        "mnum", "stale", "viv", "noreply", "binkey", "bWV0YWI=", "fp", "mfp",
    ];
    let before = state(&mut c, &keys);
    let flush_probe = ask(
        &mut c,
        b"set flushed 0 0 1\r\nf\r\nflush_all 3000\r\n",
        b"OK\r\n",
    );
    assert!(flush_probe.ends_with(b"OK\r\n"));
    server.kill();
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    let after = state(&mut c, &keys);
    for ((k, b), a) in keys.iter().zip(&before).zip(&after) {
        // The remaining TTL may have ticked by a second across the restart.
        assert_eq!(strip_ttl(b), strip_ttl(a), "{k}");
        assert!(ttl(b).abs_diff(ttl(a)) <= 2, "{k}: {b} then {a}");
    }
    // The delayed flush is still pending: it empties the store at its time.
    assert!(get(&mut c, "flushed").is_some());
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The state without the TTL, and without the recache token mark (`Z`):
/// the token is not kept across a restart, since the client that won it
/// may be gone with the old process; the next reader wins it again.
fn strip_ttl(s: &str) -> String {
    s.split(' ')
        .filter(|w| !w.starts_with('t') && *w != "Z")
        .collect::<Vec<_>>()
        .join(" ")
}

fn ttl(s: &str) -> i64 {
    s.split([' ', '\r'])
        .find_map(|w| w.strip_prefix('t'))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

/// A binary request: opcode, key, value, extras.
fn bin(opcode: u8, key: &[u8], value: &[u8], extras: &[u8]) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut v = vec![0x80, opcode];
    v.extend_from_slice(&(key.len() as u16).to_be_bytes());
    v.push(extras.len() as u8);
    v.extend_from_slice(&[0, 0, 0]);
    v.extend_from_slice(&(body as u32).to_be_bytes());
    v.extend_from_slice(&[0; 12]);
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

#[test]
fn a_torn_tail_is_cut_and_a_flipped_bit_stops_the_start() {
    let dir = tempdir("damage");
    let server = Server::start(&dir, &["--fsync", "always"]);
    fill(&server, "k", 200);
    server.kill();
    // A torn tail: half a record at the end of the newest segment.
    let seg = newest(&dir, "klog");
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&[60, 0, 0, 0, 1, 2, 3]).unwrap();
    drop(f);
    let check = kura().args(["log", "check"]).arg(&dir).output().unwrap();
    assert_eq!(
        check.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    assert_eq!(get(&mut c, "k199"), Some(format!("{:020}", 199)));
    server.stop();
    // A flipped bit in the middle: the start stops and names the place.
    let bytes = std::fs::read(&seg).unwrap();
    let mut damaged = bytes.clone();
    let at = bytes.len() / 2;
    damaged[at] ^= 0x10;
    std::fs::write(&seg, &damaged).unwrap();
    let err = start_fails(&dir);
    assert!(err.contains("corrupt update log"), "{err}");
    assert!(err.contains(&seg.display().to_string()), "{err}");
    assert!(err.contains("offset"), "{err}");
    let check = kura().args(["log", "check"]).arg(&dir).output().unwrap();
    assert_eq!(check.status.code(), Some(2));
    // Repair drops the records from the damage on; the start then works
    // and what came before the damage is there.
    log_repair(&dir, true);
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    assert_eq!(get(&mut c, "k0"), Some(format!("{:020}", 0)));
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn snapshots_prune_the_log_and_a_damaged_one_falls_back_to_the_one_before() {
    let dir = tempdir("snapshot");
    let opts = [
        "--fsync",
        "everysec",
        "--snapshot-log-size",
        "16k",
        "--log-file-size",
        "8k",
    ];
    let server = Server::start(&dir, &opts);
    // Several snapshots' worth of log, with overwrites and deletes.
    for round in 0..4 {
        fill(&server, &format!("r{round}-"), 300);
        let mut c = server.connect();
        ask(&mut c, format!("delete r{round}-7\r\n").as_bytes(), b"\r\n");
        std::thread::sleep(Duration::from_millis(700));
    }
    let mut c = server.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "log_snapshots") < 2 {
        assert!(Instant::now() < deadline, "no snapshots were taken");
        fill(&server, "more-", 200);
        std::thread::sleep(Duration::from_millis(300));
    }
    server.stop();
    let snaps = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "ksnap")
        })
        .count();
    assert_eq!(snaps, 2, "two snapshots are kept");
    // The log before the older snapshot is gone: the first segment (the
    // first 8 KiB of records, before either snapshot) was pruned.
    assert!(
        !dir.join("00000000000000000001.klog").exists(),
        "the log was not pruned"
    );
    // Cut the newest snapshot short: recovery uses the one before it and a
    // longer stretch of log, and nothing is missing.
    let snap = newest(&dir, "ksnap");
    let len = std::fs::metadata(&snap).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&snap)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let check = kura().args(["log", "check"]).arg(&dir).output().unwrap();
    assert_eq!(check.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&check.stdout).contains("DAMAGED snapshot"));
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    for round in 0..4 {
        for i in [0, 6, 8, 299] {
            assert_eq!(
                get(&mut c, &format!("r{round}-{i}")),
                Some(format!("{i:020}")),
                "r{round}-{i}"
            );
        }
        assert_eq!(get(&mut c, &format!("r{round}-7")), None);
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn evictions_are_logged_so_a_restart_does_not_resurrect_them() {
    let dir = tempdir("evict");
    let server = Server::start(&dir, &["--fsync", "always", "-m", "2"]);
    let mut c = server.connect();
    let value = vec![b'v'; 1000];
    // In batches: each waits for one fsync (group commit), not 100. 5,000 values of 1 KB
    // through -m 2: thousands are evicted whatever the policy charges an entry (3,000 left
    // 992 once S3-FIFO's charge went from 19 to 11 bytes).
    for batch in 0..50 {
        let mut req = Vec::new();
        for i in batch * 100..(batch + 1) * 100 {
            req.extend_from_slice(format!("set e{i} 0 0 1000 noreply\r\n").as_bytes());
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"mn\r\n");
        ask(&mut c, &req, b"MN\r\n");
    }
    let present: Vec<bool> = (0..5000)
        .map(|i| get(&mut c, &format!("e{i}")).is_some())
        .collect();
    let evicted = present.iter().filter(|&&p| !p).count();
    assert!(evicted > 2000, "only {evicted} evictions");
    server.kill();
    let server = Server::start(&dir, &["-m", "2"]);
    let mut c = server.connect();
    for (i, &was) in present.iter().enumerate() {
        if !was {
            assert_eq!(get(&mut c, &format!("e{i}")), None, "e{i} came back");
        }
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn eviction_none_is_a_store_not_a_cache() {
    let dir = tempdir("noevict");
    let server = Server::start(&dir, &["--eviction", "none", "-m", "2"]);
    let mut c = server.connect();
    let value = vec![b'v'; 10_000];
    let mut refused = None;
    for i in 0..1000 {
        let mut req = format!("set n{i} 0 0 10000\r\n").into_bytes();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        let r = ask(&mut c, &req, b"\r\n");
        if r != b"STORED\r\n" {
            assert_eq!(r, b"SERVER_ERROR out of memory storing object\r\n");
            refused = Some(i);
            break;
        }
    }
    let refused = refused.expect("a full store never refused a write");
    // Nothing stored before was lost to make room.
    for i in 0..refused {
        assert!(get(&mut c, &format!("n{i}")).is_some(), "n{i} was evicted");
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_data_dir_in_use_is_refused() {
    let dir = tempdir("inuse");
    let server = Server::start(&dir, &[]);
    let err = start_fails(&dir);
    assert!(err.contains("in use"), "{err}");
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_log_that_cannot_be_written_refuses_writes_without_losing_acknowledged_writes() {
    use std::os::unix::process::CommandExt;
    let dir = tempdir("efbig");
    let port = free_port();
    let mut cmd = kura();
    cmd.args([
        "server",
        "-p",
        &port.to_string(),
        "--fsync",
        "always",
        "--data-dir",
    ])
    .arg(&dir)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    // SAFETY: setrlimit and signal are async-signal-safe and touch only the
    // child being started: files may not grow past 64 KiB, and going past
    // is an EFBIG error instead of SIGXFSZ.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64 * 1024,
                rlim_max: 64 * 1024,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    let server = Server {
        child,
        port,
        host: "127.0.0.1".into(),
    };
    let mut c = server.connect();
    let mut acked = 0;
    let mut refusal = String::new();
    for i in 0..2000 {
        let req = format!("set big{i} 0 0 100\r\n{:0100}\r\n", i);
        c.write_all(req.as_bytes()).unwrap();
        let mut b = [0u8; 256];
        let n = c.read(&mut b).unwrap();
        if &b[..n] == b"STORED\r\n" {
            acked = i + 1;
            continue;
        }
        if n == 0 {
            // Under `always` the write that met the error is not
            // acknowledged: its connection closes. The next is refused.
            c = server.connect();
            c.write_all(req.as_bytes()).unwrap();
            let n = c.read(&mut b).unwrap();
            refusal = String::from_utf8_lossy(&b[..n]).into_owned();
        } else {
            refusal = String::from_utf8_lossy(&b[..n]).into_owned();
        }
        break;
    }
    assert!(acked > 0 && acked < 2000, "{acked} writes acknowledged");
    // The file size limit (EFBIG) refuses writes; reads go on.
    assert!(
        refusal.starts_with("SERVER_ERROR the update log cannot be written"),
        "{refusal:?}"
    );
    let mut c = server.connect();
    assert_eq!(get(&mut c, "big0"), Some(format!("{:0100}", 0)));
    assert_eq!(stat(&mut c, "log_refusing_writes"), 1);
    // Stopped in that state, it exits with an error and says why.
    let mut server = server;
    // SAFETY: kill() on our own child's pid.
    unsafe {
        libc::kill(server.child.id() as i32, libc::SIGTERM);
    }
    let status = server.child.wait().unwrap();
    assert!(!status.success(), "exit status {status}");
    let mut err = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("cannot write the update log"),
        "{status}: {err}"
    );
    drop(server);
    // Without the limit, every acknowledged write is there.
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    for i in 0..acked {
        assert!(get(&mut c, &format!("big{i}")).is_some(), "big{i} lost");
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recovery_says_what_it_loaded() {
    use std::io::BufRead;
    let dir = tempdir("progress");
    let server = Server::start(&dir, &[]);
    fill(&server, "p", 500);
    server.stop();
    let port = free_port();
    let mut child = kura()
        .args(["server", "-p", &port.to_string(), "--data-dir"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server {
        child,
        port,
        host: "127.0.0.1".into(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            panic!("no recovery report; the server said {seen:?}");
        };
        if line.contains("recovered 500 items") {
            break;
        }
        seen.push(line);
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn snapshots_taken_while_writers_write_lose_nothing_acknowledged() {
    let dir = tempdir("busy-snapshots");
    let opts = [
        "--fsync",
        "always",
        "--snapshot-log-size",
        "64k",
        "--log-file-size",
        "16k",
    ];
    let server = Server::start(&dir, &opts);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = load(&server, 4, &stop, 0);
    // Let several snapshots happen under the load.
    let mut c = server.connect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while stat(&mut c, "log_snapshots") < 3 {
        assert!(Instant::now() < deadline, "no snapshots under load");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.kill();
    stop.store(true, Ordering::Relaxed);
    let acked: Vec<u64> = writers.join();
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    for (t, &n) in acked.iter().enumerate() {
        let keys: Vec<String> = (1..=n).map(|i| format!("r0w{t}-{i}")).collect();
        for chunk in keys.chunks(100) {
            let req = format!("get {}\r\n", chunk.join(" "));
            let got = String::from_utf8(ask(&mut c, req.as_bytes(), b"END\r\n")).unwrap();
            assert_eq!(
                got.matches("VALUE ").count(),
                chunk.len(),
                "writer {t}: acknowledged writes lost"
            );
        }
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The wall clock, in seconds since the Unix epoch.
fn wall() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Sleeps until the wall clock's second is `phase` (0..1) through.
fn sleep_to_phase(phase: f64) {
    let now = wall();
    let wait = (phase - now.fract()).rem_euclid(1.0);
    std::thread::sleep(Duration::from_secs_f64(wait));
}

#[test]
fn ttls_keep_to_the_wall_clock_across_restarts_at_any_phase() {
    // An item is never served after its deadline, and never dropped more
    // than memcached's second early, when the server that set it and the
    // one that serves it after a restart started at different phases of
    // the wall clock's second. Every check compares a read with the wall
    // clock read just before and after it, so none depends on how long
    // anything took.
    const TTL: f64 = 2.0;
    let dir = tempdir("ttl-phase");
    let mut server = Server::start(&dir, &["--fsync", "always"]);
    for (round, phase) in [0.1, 0.35, 0.6, 0.85].into_iter().enumerate() {
        sleep_to_phase(phase);
        let mut c = server.connect();
        let (rel, abs) = (format!("rel{round}"), format!("abs{round}"));
        let sent = wall();
        // The absolute deadline: the next second but one, as a Unix time.
        let deadline = sent.floor() + TTL;
        let req = format!(
            "set {rel} 0 {TTL} 1\r\nr\r\nset {abs} 0 {deadline} 1\r\na\r\n",
            TTL = TTL as u32,
            deadline = deadline as u64
        );
        let got = ask(&mut c, req.as_bytes(), b"STORED\r\nSTORED\r\n");
        assert_eq!(got, b"STORED\r\nSTORED\r\n");
        let acked = wall();
        // A restart at about `phase`: the new server's clock starts there.
        server.kill();
        server = Server::start(&dir, &["--fsync", "always"]);
        let mut c = server.connect();
        let (mut rel_live, mut abs_live) = (true, true);
        while rel_live || abs_live {
            let before = wall();
            assert!(
                before < acked + TTL + 3.0,
                "round {round}: still served 3 s after the deadline"
            );
            let r = get(&mut c, &rel).is_some();
            let a = get(&mut c, &abs).is_some();
            let after = wall();
            if r {
                assert!(rel_live, "round {round}: {rel} came back");
                assert!(
                    before < acked + TTL,
                    "round {round}: {rel} served at {before:.3}, after its expiry {:.3}",
                    acked + TTL
                );
            } else {
                assert!(
                    after > sent + TTL - 1.0,
                    "round {round}: {rel} gone at {after:.3}, more than a second before its expiry {:.3}",
                    sent + TTL
                );
            }
            if a {
                assert!(abs_live, "round {round}: {abs} came back");
                assert!(
                    before < deadline,
                    "round {round}: {abs} served at {before:.3}, after its deadline {deadline}"
                );
            } else {
                assert!(
                    after >= deadline,
                    "round {round}: {abs} gone at {after:.3}, before its deadline {deadline}"
                );
            }
            (rel_live, abs_live) = (r, a);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flush_and_what_follows_it_come_back_as_they_were() {
    // Snapshots every 16 KiB of log: one is taken after the flush, most
    // likely before the reaper has reclaimed what the flush dropped (a
    // snapshot must not hold those). Recovery then starts from it, or from
    // one before the flush and replays the flush: the same either way.
    let dir = tempdir("flush");
    let opts = [
        "--fsync",
        "always",
        "--snapshot-log-size",
        "16k",
        "--log-file-size",
        "8k",
    ];
    let server = Server::start(&dir, &opts);
    fill(&server, "old-", 2000);
    let mut c = server.connect();
    let before = stat(&mut c, "log_snapshots");
    assert_eq!(ask(&mut c, b"flush_all\r\n", b"OK\r\n"), b"OK\r\n");
    fill(&server, "new-", 600);
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "log_snapshots") <= before {
        assert!(Instant::now() < deadline, "no snapshot after the flush");
        fill(&server, "new-", 600);
    }
    let check = |server: &Server, when: &str| {
        let mut c = server.connect();
        for i in 0..2000 {
            assert_eq!(get(&mut c, &format!("old-{i}")), None, "{when}: old-{i}");
        }
        for i in 0..600 {
            assert_eq!(
                get(&mut c, &format!("new-{i}")),
                Some(format!("{i:020}")),
                "{when}: new-{i}"
            );
        }
        // The flushed items are reclaimed in the background.
        let deadline = Instant::now() + Duration::from_secs(30);
        while stat(&mut c, "curr_items") != 600 {
            assert!(
                Instant::now() < deadline,
                "{when}: flushed items never reclaimed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    check(&server, "before the restart");
    server.kill();
    let server = Server::start(&dir, &opts);
    check(&server, "after the restart");
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
