//! What the differential tests share: Debian's memcached on free loopback
//! ports, the third-party tools (found, or a clear failure under CI), the
//! test keys, and asking every server which keys it holds.

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kura_ring::{Ring, Server};

/// Whether a missing tool fails the test (CI) rather than skipping it.
pub fn tools_required() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
        || std::env::var("KURA_REQUIRE_MEMCACHED").as_deref() == Ok("1")
}

/// Runs `probe`; when it fails, panics under CI and otherwise prints
/// "skipped" and returns false.
pub fn have(what: &str, probe: &mut Command) -> bool {
    let ok = probe
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !tools_required(),
            "{what} is not installed, and CI=true requires it (.ci/run installs it); probe: {probe:?}"
        );
        println!("skipped: {what} is not installed");
    }
    ok
}

/// Debian's memcached: `$KURA_MEMCACHED` or /usr/bin/memcached.
pub fn memcached_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("KURA_MEMCACHED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/memcached"));
    have("memcached", Command::new(&bin).arg("-V")).then_some(bin)
}

/// Python with pylibmc: `$PYTHON` or python3.
pub fn python() -> Option<String> {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    have("pylibmc", Command::new(&py).args(["-c", "import pylibmc"])).then_some(py)
}

/// Ruby with Dalli.
pub fn ruby() -> Option<String> {
    have(
        "ruby-dalli",
        Command::new("ruby").args(["-e", "require 'dalli'"]),
    )
    .then(|| "ruby".to_string())
}

/// twemproxy's nutcracker: `$KURA_NUTCRACKER`, /usr/sbin/nutcracker, or on
/// the PATH.
pub fn nutcracker() -> Option<PathBuf> {
    let bin = std::env::var_os("KURA_NUTCRACKER")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/sbin/nutcracker")).filter(|p| p.exists()))
        .unwrap_or_else(|| PathBuf::from("nutcracker"));
    have("nutcracker", Command::new(&bin).arg("-V")).then_some(bin)
}

/// A scratch directory of this test, emptied first.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kura-ring")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// A client script of tests/clients/.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

/// `n` distinct keys: a quarter short ASCII, a quarter short UTF-8, a
/// quarter long ASCII and a quarter long UTF-8, the long ones 150 to 250
/// bytes (every 7th exactly 250). None has a space or a control byte.
pub fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let len = if i % 7 == 0 {
                250
            } else {
                150 + (i * 37) % 101
            };
            match i % 4 {
                0 => format!("user:{i}:profile"),
                1 => format!("ключ-{i}-日本語-ü"),
                2 => pad(format!("long-{i}-"), "abcdefghij", len),
                _ => pad(format!("長い鍵-{i}-"), "é鍵", len),
            }
        })
        .collect()
}

/// `head` followed by repeats of `fill`, cut to at most `len` bytes on a
/// character boundary, then ASCII to exactly `len`.
fn pad(mut key: String, fill: &str, len: usize) -> String {
    'outer: while key.len() < len {
        for c in fill.chars() {
            if key.len() + c.len_utf8() > len {
                break 'outer;
            }
            key.push(c);
        }
    }
    while key.len() < len {
        key.push('z');
    }
    key
}

/// Writes the keys one per line.
pub fn write_keys(dir: &Path, keys: &[String]) -> PathBuf {
    let path = dir.join("keys.txt");
    let mut text = keys.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write the keys");
    path
}

pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = l.local_addr().expect("local addr").port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A child process killed when dropped.
pub struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `addr` accepts connections; None if `child` exits first.
fn await_listen(child: &mut Child, addr: SocketAddr, what: &str) -> Option<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if TcpStream::connect(addr).is_ok() {
            return Some(());
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {addr}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts memcached on `addr`; None if it exits (the port is taken).
pub fn start_memcached_at(bin: &Path, addr: SocketAddr) -> Option<Process> {
    let mut child = Command::new(bin)
        .args(["-u", "root", "-U", "0", "-m", "64", "-t", "1"])
        .args(["-l", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    await_listen(&mut child, addr, "memcached")?;
    Some(Process(child))
}

/// Starts memcached on a free port of 127.0.0.1 (retrying when the port is
/// taken meanwhile).
pub fn start_memcached(bin: &Path) -> (Process, SocketAddr) {
    for _ in 0..5 {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        if let Some(p) = start_memcached_at(bin, addr) {
            return (p, addr);
        }
    }
    panic!("memcached failed to start 5 times");
}

/// Memcached servers on loopback.
pub struct Cluster {
    _procs: Vec<Process>,
    pub addrs: Vec<SocketAddr>,
}

impl Cluster {
    pub fn start(bin: &Path, n: usize) -> Cluster {
        let (procs, addrs) = (0..n).map(|_| start_memcached(bin)).unzip();
        Cluster {
            _procs: procs,
            addrs,
        }
    }

    /// `n` servers on port 11211 of loopback addresses 127.61.x.y (any
    /// address of 127/8 is the loopback interface on Linux); None when
    /// something holds port 11211 on every address tried (a memcached
    /// listening on all interfaces).
    pub fn start_on_default_port(bin: &Path, n: usize) -> Option<Cluster> {
        let (mut procs, mut addrs) = (Vec::new(), Vec::new());
        let base = std::process::id() % 200;
        for attempt in 0..(n as u32 + 10) {
            if addrs.len() == n {
                break;
            }
            let host = [
                127,
                61,
                (base + attempt / 50) as u8,
                (2 + attempt % 50) as u8,
            ];
            let addr = SocketAddr::from((host, 11211));
            // Bind first: memcached failing to bind could go unnoticed if
            // another server already answers on the address.
            if TcpListener::bind(addr).is_err() {
                continue;
            }
            if let Some(p) = start_memcached_at(bin, addr) {
                procs.push(p);
                addrs.push(addr);
            }
        }
        (addrs.len() == n).then_some(Cluster {
            _procs: procs,
            addrs,
        })
    }

    /// The ring's servers: these addresses with `weights`.
    pub fn servers(&self, weights: &[u32]) -> Vec<Server> {
        self.addrs
            .iter()
            .zip(weights)
            .map(|(a, &w)| Server::new(a.ip().to_string(), a.port()).with_weight(w))
            .collect()
    }

    /// Empties every server.
    pub fn flush(&self) {
        for addr in &self.addrs {
            let mut c = connect(*addr);
            c.write_all(b"flush_all\r\n").expect("send flush_all");
            let mut line = String::new();
            BufReader::new(c)
                .read_line(&mut line)
                .expect("flush_all reply");
            assert_eq!(line, "OK\r\n", "flush_all on {addr}");
        }
    }

    /// For each key, the index of the one server holding it (None if none
    /// does); panics if two servers hold it.
    pub fn holders(&self, keys: &[String]) -> Vec<Option<usize>> {
        let mut at = vec![None; keys.len()];
        let index: std::collections::HashMap<&[u8], usize> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_bytes(), i))
            .collect();
        for (server, addr) in self.addrs.iter().enumerate() {
            for held in held_keys(*addr, keys) {
                let Some(&i) = index.get(held.as_slice()) else {
                    panic!(
                        "{addr} returned a key never asked for: {:?}",
                        String::from_utf8_lossy(&held)
                    );
                };
                if let Some(other) = at[i].replace(server) {
                    panic!("key {:?} is on servers {other} and {server}", keys[i]);
                }
            }
        }
        at
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    c.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("set a read timeout");
    c
}

/// The keys among `keys` that the server at `addr` holds: quiet meta gets
/// (`mg <key> k q`, a hit answers `HD k<key>`, a miss nothing) in batches
/// ended by `mn`.
fn held_keys(addr: SocketAddr, keys: &[String]) -> Vec<Vec<u8>> {
    let c = connect(addr);
    let mut w = c.try_clone().expect("clone the connection");
    let mut r = BufReader::new(c);
    let mut held = Vec::new();
    for batch in keys.chunks(200) {
        let mut req = Vec::new();
        for k in batch {
            req.extend_from_slice(b"mg ");
            req.extend_from_slice(k.as_bytes());
            req.extend_from_slice(b" k q\r\n");
        }
        req.extend_from_slice(b"mn\r\n");
        w.write_all(&req).expect("send meta gets");
        for _ in 0..=batch.len() {
            let mut line = Vec::new();
            r.read_until(b'\n', &mut line).expect("read a meta reply");
            if line == b"MN\r\n" {
                break;
            }
            let key = line
                .strip_prefix(b"HD k")
                .and_then(|l| l.strip_suffix(b"\r\n"))
                .unwrap_or_else(|| {
                    panic!(
                        "{addr}: unexpected reply {:?}",
                        String::from_utf8_lossy(&line)
                    )
                });
            held.push(key.to_vec());
        }
    }
    held
}

/// Asserts that each key sits on the server `ring` names for it, listing
/// the first disagreements otherwise.
pub fn assert_placed(ring: &Ring, keys: &[String], holders: &[Option<usize>], what: &str) {
    let mut wrong = Vec::new();
    let mut missing = 0;
    for (key, held) in keys.iter().zip(holders) {
        let want = ring.index_for(key.as_bytes());
        match held {
            None => missing += 1,
            Some(h) if *h != want => wrong.push((key, *h, want)),
            Some(_) => {}
        }
    }
    assert_eq!(missing, 0, "{what}: {missing} keys are on no server");
    let shown: Vec<String> = wrong
        .iter()
        .take(5)
        .map(|(k, h, w)| format!("{k:?} on {h}, kura-ring says {w}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: {} of {} keys placed differently: {shown:#?}",
        wrong.len(),
        keys.len()
    );
    let mut per_server = vec![0; ring.servers().len()];
    for h in holders.iter().flatten() {
        per_server[*h] += 1;
    }
    println!(
        "{what}: all {} keys match ({per_server:?} per server)",
        keys.len()
    );
}

/// Runs a client script to completion, failing the test on an error exit.
pub fn run_client(cmd: &mut Command, what: &str) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
}

/// nutcracker started on a config, killed when dropped.
pub struct Nutcracker {
    _proc: Process,
    pub addr: SocketAddr,
}

impl Nutcracker {
    /// Starts `bin` with one pool listening on a free port, distribution
    /// ketama, `hash`, over `servers` (twemproxy's `host:port:weight
    /// [name]` lines).
    pub fn start(bin: &Path, dir: &Path, hash: &str, servers: &[String]) -> Nutcracker {
        for attempt in 0..5 {
            let port = free_port();
            let stats = free_port();
            let conf = dir.join(format!("nutcracker-{attempt}.yml"));
            let mut yml = format!(
                "pool:\n  listen: 127.0.0.1:{port}\n  hash: {hash}\n  distribution: ketama\n  \
                 timeout: 5000\n  auto_eject_hosts: false\n  servers:\n"
            );
            for s in servers {
                yml.push_str(&format!("   - {s}\n"));
            }
            std::fs::write(&conf, yml).expect("write nutcracker's config");
            let mut child = Command::new(bin)
                .arg("-c")
                .arg(&conf)
                .arg("-o")
                .arg(dir.join("nutcracker.log"))
                .args(["-s", &stats.to_string(), "-a", "127.0.0.1"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            if await_listen(&mut child, addr, "nutcracker").is_some() {
                return Nutcracker {
                    _proc: Process(child),
                    addr,
                };
            }
        }
        let log = std::fs::read_to_string(dir.join("nutcracker.log")).unwrap_or_default();
        panic!("nutcracker failed to start 5 times; its log:\n{log}");
    }

    /// Sets every key to "1" through the proxy (pipelined text sets).
    pub fn set_all(&self, keys: &[String]) {
        let c = connect(self.addr);
        let mut w = c.try_clone().expect("clone the connection");
        let mut r = BufReader::new(c);
        for batch in keys.chunks(100) {
            let mut req = Vec::new();
            for k in batch {
                req.extend_from_slice(b"set ");
                req.extend_from_slice(k.as_bytes());
                req.extend_from_slice(b" 0 0 1\r\n1\r\n");
            }
            w.write_all(&req).expect("send sets");
            for k in batch {
                let mut line = Vec::new();
                r.read_until(b'\n', &mut line).expect("read a set reply");
                assert_eq!(
                    line,
                    b"STORED\r\n",
                    "nutcracker: set {k:?}: {:?}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
        let mut rest = Vec::new();
        let _ = w.shutdown(std::net::Shutdown::Write);
        let _ = r.read_to_end(&mut rest);
    }
}
