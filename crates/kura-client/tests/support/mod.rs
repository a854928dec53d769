//! The servers the client tests talk to, all on loopback and all stopped
//! when dropped: `kura server` processes of this workspace (the binary is
//! built with cargo on first use, or taken from `$KURA_BIN`), Debian's
//! memcached (skipped with a message when absent, a failure under CI), and
//! fake servers: one that accepts and never answers, one that answers
//! with bytes of the test's choosing.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use kura_testkit::free_port;

/// Whether a missing memcached fails the test rather than skipping it.
fn required() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
        || std::env::var("KURA_REQUIRE_MEMCACHED").as_deref() == Ok("1")
}

/// The `kura` binary: `$KURA_BIN`, or this workspace's, built by cargo
/// into the target directory these tests run from. Under `cargo test
/// --workspace`, `cargo build -p kura` resolves other features than the
/// workspace's and rebuilds part of the server's dependencies once; CI sets
/// `KURA_BIN=target/debug/kura` (which the workspace's test build made) to
/// skip that.
pub fn kura_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(b) = std::env::var_os("KURA_BIN") {
            return PathBuf::from(b);
        }
        // target/<profile>/deps/<test binary>
        let exe = std::env::current_exe().expect("test binary path");
        let profile_dir = exe
            .parent()
            .and_then(|d| d.parent())
            .expect("target/<profile>");
        let target = profile_dir.parent().expect("target dir");
        let mut cmd = Command::new(env!("CARGO"));
        // Without what `cargo test` put in this process's environment
        // (package variables, the library path): build scripts that watch
        // such variables would otherwise see a change and rebuild the
        // server's dependencies at every run.
        for (name, _) in std::env::vars_os() {
            let name_str = name.to_string_lossy();
            let keep = ["CARGO_HOME", "CARGO_TARGET_DIR", "CARGO_INCREMENTAL"];
            if (name_str.starts_with("CARGO_") && !keep.contains(&name_str.as_ref()))
                || name_str == "LD_LIBRARY_PATH"
                || name_str == "OUT_DIR"
            {
                cmd.env_remove(&name);
            }
        }
        cmd.args(["build", "-q", "-p", "kura", "--bin", "kura", "--target-dir"])
            .arg(target)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo build for the kura binary");
        assert!(status.success(), "cargo build -p kura failed");
        profile_dir.join("kura")
    })
    .clone()
}

/// A child process on a port, killed when dropped.
pub struct Proc {
    child: Child,
    pub port: u16,
}

impl Proc {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn await_listen(mut child: Child, port: u16, what: &str) -> Option<Proc> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(Proc { child, port });
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `kura server` on a free port (or `port`), in memory.
pub fn kura_on(port: u16) -> Option<Proc> {
    let child = Command::new(kura_bin())
        .args(["server", "-p", &port.to_string(), "-t", "2", "-m", "256"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kura server");
    await_listen(child, port, "kura")
}

pub fn kura() -> Proc {
    (0..5)
        .find_map(|_| kura_on(free_port()))
        .expect("kura server failed to start 5 times")
}

/// Debian's memcached (`$KURA_MEMCACHED` or /usr/bin/memcached), or None
/// after printing why the test is skipped.
pub fn memcached_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("KURA_MEMCACHED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/memcached"));
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        !required(),
        "memcached is not installed at {} and CI requires it (.ci/run installs Debian's)",
        bin.display()
    );
    println!("skipped: memcached is not installed (apt-get install memcached)");
    None
}

pub fn memcached() -> Option<Proc> {
    memcached_bin()?;
    for _ in 0..5 {
        if let Some(p) = memcached_on(free_port()) {
            return Some(p);
        }
    }
    panic!("memcached failed to start 5 times");
}

/// Debian's memcached on `port` (a restart on the port a killed one had),
/// or None when it is not installed or did not start.
pub fn memcached_on(port: u16) -> Option<Proc> {
    let bin = memcached_bin()?;
    let child = Command::new(&bin)
        .args([
            "-u",
            "root",
            "-U",
            "0",
            "-m",
            "256",
            "-t",
            "2",
            "-l",
            "127.0.0.1",
        ])
        .args(["-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn memcached");
    await_listen(child, port, "memcached")
}

/// n servers of one kind: kura, or memcached (None: not installed).
pub fn servers(memcached_kind: bool, n: usize) -> Option<Vec<Proc>> {
    (0..n)
        .map(|_| {
            if memcached_kind {
                memcached()
            } else {
                Some(kura())
            }
        })
        .collect()
}

pub fn addrs(procs: &[Proc]) -> Vec<String> {
    procs.iter().map(Proc::addr).collect()
}

/// A server that accepts connections and reads them, and never answers.
pub fn silent_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut b = [0u8; 65536];
                while matches!(c.read(&mut b), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// A server that, for each connection, reads until it has seen `until`
/// bytes (or `\n` when 0) and then sends `reply` (None: closes the
/// connection instead).
pub fn scripted_server(until: usize, reply: Option<Vec<u8>>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut b = [0u8; 65536];
                loop {
                    let enough = if until == 0 {
                        seen.contains(&b'\n')
                    } else {
                        seen.len() >= until
                    };
                    if enough {
                        break;
                    }
                    match c.read(&mut b) {
                        Ok(n) if n > 0 => seen.extend_from_slice(&b[..n]),
                        _ => return,
                    }
                }
                if let Some(r) = reply {
                    let _ = c.write_all(&r);
                    // keep reading so the client sees no EOF
                    while matches!(c.read(&mut b), Ok(n) if n > 0) {}
                }
            });
        }
    });
    addr
}

/// Raw text request to a server, for checking what the client stored.
pub fn raw_get(addr: &str, key: &str) -> Option<Vec<u8>> {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    c.write_all(format!("get {key}\r\n").as_bytes())
        .expect("send");
    let mut out = Vec::new();
    let mut b = [0u8; 65536];
    while !out.ends_with(b"END\r\n") {
        let n = c.read(&mut b).expect("read");
        assert!(n > 0, "closed");
        out.extend_from_slice(&b[..n]);
    }
    let head_end = out.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&out[..head_end]).ok()?;
    let len: usize = head
        .strip_prefix("VALUE ")?
        .split(' ')
        .nth(2)?
        .parse()
        .ok()?;
    Some(out[head_end + 2..head_end + 2 + len].to_vec())
}

/// A `redis-server` on a free port without persistence, or None after
/// printing why the test is skipped (a failure under CI).
/// Whether a Redis server answers PING on `port`.
fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

pub fn redis_server() -> Option<Proc> {
    let bin = std::env::var_os("KURA_REDIS_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/redis-server"));
    if !bin.exists() {
        assert!(
            !required(),
            "redis-server is not installed at {} and CI requires it (.ci/run installs Debian's)",
            bin.display()
        );
        println!("skipped: redis-server is not installed (apt-get install redis-server)");
        return None;
    }
    for _ in 0..5 {
        let port = free_port();
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        if let Some(p) = await_listen(child, port, "redis-server") {
            // The port answered: make sure it is this redis-server (another
            // process may have held the port a moment) before handing it out.
            if answers_ping(port) {
                return Some(p);
            }
        }
    }
    panic!("redis-server failed to start 5 times");
}

/// A relay to a server at `to` that forwards the first `budget` bytes its
/// clients send (all connections together), then holds the rest back until
/// [`Gate::release`]; replies flow freely, and a connection whose server
/// goes away is closed on the client's side too. A test uses it to stop a
/// batch at a known point, whatever the machine's speed.
pub fn gated_relay(to: String, budget: usize) -> (SocketAddr, Gate) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let gate = Gate(std::sync::Arc::new((
        std::sync::Mutex::new(GateState {
            left: budget,
            stalled: false,
            open: false,
        }),
        std::sync::Condvar::new(),
    )));
    let g = gate.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(client) = c else { return };
            let Ok(server) = TcpStream::connect(&to) else {
                continue;
            };
            let (mut from_server, mut to_client) = match (server.try_clone(), client.try_clone()) {
                (Ok(s), Ok(c)) => (s, c),
                _ => continue,
            };
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_server, &mut to_client);
                let _ = to_client.shutdown(std::net::Shutdown::Both);
            });
            let g = g.clone();
            std::thread::spawn(move || g.forward(client, server));
        }
    });
    (addr, gate)
}

#[derive(Clone)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<GateState>, std::sync::Condvar)>);

struct GateState {
    left: usize,
    stalled: bool,
    open: bool,
}

impl Gate {
    /// Copies `client`'s bytes to `server` within the budget, then waits
    /// for the gate to open before sending the rest.
    fn forward(&self, mut client: TcpStream, mut server: TcpStream) {
        let (lock, cv) = &*self.0;
        let mut b = vec![0u8; 65536];
        loop {
            let n = match client.read(&mut b) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            let now = {
                let mut s = lock.lock().expect("gate");
                let now = if s.open { n } else { n.min(s.left) };
                s.left -= now.min(s.left);
                now
            };
            if server.write_all(&b[..now]).is_err() {
                break;
            }
            if now < n {
                let mut s = lock.lock().expect("gate");
                s.stalled = true;
                cv.notify_all();
                while !s.open {
                    s = cv.wait(s).expect("gate");
                }
                drop(s);
                if server.write_all(&b[now..n]).is_err() {
                    break;
                }
            }
        }
        let _ = server.shutdown(std::net::Shutdown::Write);
        let _ = client.shutdown(std::net::Shutdown::Both);
    }

    /// Waits until the budget is spent and bytes are held back; false if
    /// that has not happened within `limit`.
    pub fn wait_stalled(&self, limit: Duration) -> bool {
        let (lock, cv) = &*self.0;
        let s = lock.lock().expect("gate");
        let (s, _) = cv
            .wait_timeout_while(s, limit, |s| !s.stalled)
            .expect("gate");
        s.stalled
    }

    /// Lets everything through from now on.
    pub fn release(&self) {
        let (lock, cv) = &*self.0;
        lock.lock().expect("gate").open = true;
        cv.notify_all();
    }
}
