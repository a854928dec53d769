//! Shared by the proxy's tests: backends (kura or Debian's memcached), a
//! `kura proxy` in front of them, and a client that reads exactly one
//! reply of a known shape.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, kura, Server};

/// Which server software the backends run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Kura,
    Memcached,
}

/// `[health]` that marks a backend down after two failures of at most a
/// second each and probes it every 50-200 ms.
pub const QUICK_HEALTH: &str = "[health]\nrequest_timeout_ms = 1000\nconnect_timeout_ms = 1000\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200\n";

/// One backend of `kind` on a free port.
pub fn backend(kind: Kind) -> Server {
    match kind {
        Kind::Kura => Server::start_in_memory(&[]),
        Kind::Memcached => memcached(&[]),
    }
}

/// Debian's memcached (`-t 1`, TCP on 127.0.0.1 only) on a free port,
/// with `extra` arguments added.
pub fn memcached(extra: &[&std::ffi::OsStr]) -> Server {
    let port = free_port();
    let child = Command::new("/usr/bin/memcached")
        .args(["-p", &port.to_string(), "-U", "0", "-l", "127.0.0.1"])
        .args(["-t", "1", "-u", "root"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("memcached");
    Server::adopt(child, "127.0.0.1", port)
}

/// `n` backends of `kind`.
pub fn backends(kind: Kind, n: usize) -> Vec<Server> {
    (0..n).map(|_| backend(kind)).collect()
}

/// "host:port,host:port" of `servers`.
pub fn pool_of(servers: &[Server]) -> String {
    servers
        .iter()
        .map(|s| format!("{}:{}", s.host, s.port))
        .collect::<Vec<_>>()
        .join(",")
}

/// A `kura proxy` with these arguments (its listen address is added).
pub fn proxy(args: &[&str]) -> Server {
    proxy_on(free_port(), args)
}

/// A `kura proxy` on `port` (a restarted proxy takes its old port).
pub fn proxy_on(port: u16, args: &[&str]) -> Server {
    let child = kura()
        .args(["proxy", "-l", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server::adopt(child, "127.0.0.1", port)
}

/// A `kura proxy` on the configuration file `cfg` with its journal in
/// `journal`, on `port` (a restarted proxy takes its old port).
pub fn proxy_journaled(port: u16, cfg: &Path, journal: &Path) -> Server {
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "--journal-dir",
        journal.to_str().unwrap(),
    ];
    proxy_on(port, &args)
}

/// `kura proxy --config cfg` (the listen address from the file), output
/// discarded; the caller waits for it to listen.
pub fn spawn_with_config(cfg: &Path) -> std::process::Child {
    kura()
        .args(["proxy", "--config"])
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A `kura proxy` on the configuration `toml`, written to a fresh
/// directory named `name`; the proxy and the file's path.
pub fn proxy_with(name: &str, toml: &str) -> (Server, std::path::PathBuf) {
    let dir = super::tempdir(name);
    let path = dir.join("proxy.toml");
    std::fs::write(&path, toml).unwrap();
    (proxy(&["--config", path.to_str().unwrap()]), path)
}

/// A `kura proxy` on the configuration `toml`, written to `dir`, logging
/// at info level to a file there; the proxy and its log's path.
pub fn proxy_logged(dir: &Path, toml: &str) -> (Server, std::path::PathBuf) {
    let cfg = dir.join("proxy.toml");
    std::fs::write(&cfg, toml).unwrap();
    let log = dir.join("proxy.log");
    let port = free_port();
    let child = kura()
        .args(["proxy", "-l", &format!("127.0.0.1:{port}"), "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (Server::adopt(child, "127.0.0.1", port), log)
}

/// A server's address as a TOML string: `"127.0.0.1:PORT"`.
pub fn quoted(s: &Server) -> String {
    format!("\"127.0.0.1:{}\"", s.port)
}

/// `get key` straight to a server.
pub fn get_on(s: &Server, key: &str) -> String {
    let mut c = s.connect();
    reply(&mut c, format!("get {key}\r\n").as_bytes())
}

/// Whether a server holds `key` with `value` (flags 0).
pub fn has(s: &Server, key: &str, value: &str) -> bool {
    get_on(s, key) == format!("VALUE {key} 0 {}\r\n{value}\r\nEND\r\n", value.len())
}

/// A proxy in front of `servers` with the quick-start flags.
pub fn proxy_for(servers: &[Server], extra: &[&str]) -> Server {
    let pool = pool_of(servers);
    let mut args = vec!["--pool", pool.as_str()];
    args.extend_from_slice(extra);
    proxy(&args)
}

/// Writes `req` and reads until the bytes end with `until`.
pub fn ask(s: &mut TcpStream, req: &[u8], until: &[u8]) -> Vec<u8> {
    super::ask(s, req, until)
}

/// Writes `req` and reads exactly `n` bytes.
pub fn ask_n(s: &mut TcpStream, req: &[u8], n: usize) -> Vec<u8> {
    s.write_all(req).unwrap();
    let mut out = vec![0u8; n];
    s.read_exact(&mut out).unwrap();
    out
}

/// Whether nothing more arrives within a short while (no stray reply).
pub fn silent(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut b = [0u8; 64];
    let quiet = match s.read(&mut b) {
        Ok(0) => false,
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    quiet
}

/// A binary request.
pub fn bin(op: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let mut v = vec![0x80, op];
    v.extend_from_slice(&(key.len() as u16).to_be_bytes());
    v.push(extras.len() as u8);
    v.extend_from_slice(&[0, 0, 0]);
    v.extend_from_slice(&((key.len() + extras.len() + value.len()) as u32).to_be_bytes());
    v.extend_from_slice(&opaque.to_be_bytes());
    v.extend_from_slice(&cas.to_be_bytes());
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

/// One binary response: (opcode, status, opaque, cas, extras, key, value).
pub struct BinResponse {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub extras: Vec<u8>,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

pub fn read_bin(s: &mut TcpStream) -> BinResponse {
    let mut h = [0u8; 24];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h[0], 0x81, "response magic");
    let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let ext = h[4] as usize;
    let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let mut b = vec![0u8; body];
    s.read_exact(&mut b).unwrap();
    BinResponse {
        opcode: h[1],
        status: u16::from_be_bytes([h[6], h[7]]),
        opaque: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
        cas: u64::from_be_bytes(h[16..24].try_into().unwrap()),
        extras: b[..ext].to_vec(),
        key: b[ext..ext + key_len].to_vec(),
        value: b[ext + key_len..].to_vec(),
    }
}

/// A TOML file of one pool over `servers` (libmemcached's ring) with these
/// `[health]` lines, in `dir`.
pub fn config(dir: &Path, servers: &[String], health: &str) -> std::path::PathBuf {
    let list = servers
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!("[pools.main]\nservers = [{list}]\n\n[health]\n{health}\n");
    let path = dir.join("proxy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `n` keys that the libmemcached ring over `servers` puts on `servers[at]`.
pub fn keys_on(servers: &[String], at: usize, n: usize, prefix: &str) -> Vec<String> {
    let ring = kura_ring::Ring::new(
        kura_ring::Kind::Libmemcached,
        servers.iter().map(|s| s.parse().unwrap()).collect(),
    )
    .unwrap();
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| ring.index_for(k.as_bytes()) == at)
        .take(n)
        .collect()
}

/// One line (or a VALUE block ended by END) of the text protocol.
pub fn reply(s: &mut TcpStream, req: &[u8]) -> String {
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    loop {
        s.read_exact(&mut b).unwrap();
        out.push(b[0]);
        if out.ends_with(b"\r\n") {
            let done = !out.starts_with(b"VALUE") || out.ends_with(b"END\r\n");
            if done {
                return String::from_utf8_lossy(&out).into_owned();
            }
        }
    }
}

/// A proxy stat.
pub fn stat(s: &mut TcpStream, name: &str) -> u64 {
    super::stat(s, name)
}

/// Sends a signal to a child.
pub fn signal(server: &Server, sig: i32) {
    // SAFETY: kill() on our own child's pid.
    unsafe {
        libc::kill(server.child.id() as i32, sig);
    }
}

/// Whether `tool` is installed; when not, says the test is skipped, or
/// fails under `KURA_REQUIRE_MEMCACHED=1` (CI, where every tool is there).
pub fn have(tool: &str, package: &str) -> bool {
    if Path::new(tool).exists() {
        return true;
    }
    assert!(
        std::env::var("KURA_REQUIRE_MEMCACHED").as_deref() != Ok("1"),
        "{tool} is missing and KURA_REQUIRE_MEMCACHED=1 (apt-get install {package})"
    );
    eprintln!("skipped: {tool} is not installed (apt-get install {package})");
    false
}

/// Reads `key` through the proxy until it misses (the backend is back and
/// its journal replayed), failing if v1 is ever served.
pub fn never_stale(c: &mut std::net::TcpStream, key: &str, stale: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = reply(c, format!("get {key}\r\n").as_bytes());
        assert!(!r.contains(stale), "stale read after rejoin: {r}");
        if r == "END\r\n" {
            return;
        }
        assert!(r.starts_with("SERVER_ERROR"), "{r}");
        assert!(
            Instant::now() < deadline,
            "the backend never came back: {r}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sets `key` until the backend takes it (it may still be rejoining).
pub fn set_when_up(c: &mut std::net::TcpStream, key: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = reply(
            c,
            format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).as_bytes(),
        );
        if r == "STORED\r\n" {
            return;
        }
        assert!(Instant::now() < deadline, "{r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the backend's other keys until the proxy has marked it down.
pub fn until_down(c: &mut std::net::TcpStream, backend: &str, other_key: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(c, &format!("backend:{backend}:down")) == 0 {
        let r = reply(c, format!("get {other_key}\r\n").as_bytes());
        assert!(r.starts_with("SERVER_ERROR") || r == "END\r\n", "{r}");
        assert!(Instant::now() < deadline, "never marked down");
    }
}

/// Deletes `key`, then sets it to `v2`, through the proxy while its backend
/// is away: both fail (and are journaled).
pub fn change_while_away(c: &mut TcpStream, key: &str) {
    let r = reply(c, format!("delete {key}\r\n").as_bytes());
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
    let r = reply(c, format!("set {key} 0 0 2\r\nv2\r\n").as_bytes());
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
}

/// The read-after-acknowledged-write rule for one key: every read answers
/// a miss, an error, or a value at least as new as the last write the
/// proxy acknowledged, never an older one. Values are `v<N>`, N growing.
pub struct Latest {
    pub key: String,
    /// The newest acknowledged version.
    pub acked: u64,
    next: u64,
}

impl Latest {
    pub fn new(key: &str) -> Latest {
        Latest {
            key: key.to_string(),
            acked: 0,
            next: 1,
        }
    }

    /// Sets the next version; true when the proxy acknowledged it.
    pub fn set(&mut self, c: &mut TcpStream) -> bool {
        let v = format!("v{}", self.next);
        let req = format!("set {} 0 0 {}\r\n{v}\r\n", self.key, v.len());
        let r = reply(c, req.as_bytes());
        let stored = r == "STORED\r\n";
        assert!(stored || r.starts_with("SERVER_ERROR"), "{r}");
        if stored {
            self.acked = self.next;
        }
        self.next += 1;
        stored
    }

    /// Sets the next version until the proxy acknowledges one.
    pub fn set_acked(&mut self, c: &mut TcpStream) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.set(c) {
            assert!(Instant::now() < deadline, "no write was acknowledged");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reads the key and checks the rule; the version read, if any.
    pub fn check(&self, c: &mut TcpStream) -> Option<u64> {
        let r = reply(c, format!("get {}\r\n", self.key).as_bytes());
        if r == "END\r\n" || r.starts_with("SERVER_ERROR") {
            return None;
        }
        let v: u64 = r
            .lines()
            .nth(1)
            .and_then(|l| l.strip_prefix('v'))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a versioned value: {r}"));
        assert!(
            v >= self.acked,
            "stale read of {}: v{v} after v{} was acknowledged",
            self.key,
            self.acked
        );
        Some(v)
    }
}

/// Checks reads of `l` until `ok` holds (at most 20 s).
pub fn reading_until(
    c: &mut TcpStream,
    l: &Latest,
    what: &str,
    mut ok: impl FnMut(&mut TcpStream) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        l.check(c);
        if ok(c) {
            return;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(10));
    }
}
