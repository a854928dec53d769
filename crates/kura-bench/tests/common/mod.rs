//! Test support: running `kura bench` from its arguments, starting Debian's
//! memcached or a Redis server on a free port (or skipping when it is not
//! installed), and kura's own server in this process.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use kura_bench::{BenchArgs, Report};
use kura_server::{Server, ServerConfig, ServerHandle};

/// Runs `kura bench` with the arguments in `line` (split at spaces) and
/// returns the report and what it printed.
pub fn bench_output(line: &str) -> (Report, String) {
    let argv = std::iter::once("kura bench").chain(line.split_whitespace());
    let args = BenchArgs::try_parse_from(argv).unwrap_or_else(|e| panic!("bad arguments: {e}"));
    let mut out = Vec::new();
    let report = kura_bench::run(&args, &mut out).unwrap_or_else(|e| panic!("kura bench: {e}"));
    (report, String::from_utf8(out).expect("utf-8 output"))
}

/// Runs `kura bench` with the arguments in `line` and returns its report.
pub fn bench(line: &str) -> Report {
    bench_output(line).0
}

/// A memcached child process, killed when dropped.
pub struct Memcached {
    child: Child,
    pub addr: String,
}

impl Memcached {
    /// A fresh memcached on a free TCP port, or `None` (after saying so)
    /// when memcached is not installed and not required.
    pub fn start() -> Option<Memcached> {
        let bin = memcached_bin()?;
        for _ in 0..5 {
            let port = free_port();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let child = spawn(&bin, &["-p", &port.to_string(), "-l", "127.0.0.1"]);
            if let Some(child) = wait_until(child, || TcpStream::connect(addr).is_ok()) {
                let addr = addr.to_string();
                return Some(Memcached { child, addr });
            }
        }
        panic!("memcached failed to start 5 times");
    }

    /// A fresh memcached listening on the Unix socket `path` only.
    pub fn start_unix(path: &Path) -> Option<Memcached> {
        let bin = memcached_bin()?;
        let _ = std::fs::remove_file(path);
        let child = spawn(&bin, &["-s", &path.display().to_string()]);
        let connects = || std::os::unix::net::UnixStream::connect(path).is_ok();
        let child = wait_until(child, connects).expect("memcached on a Unix socket");
        let addr = path.display().to_string();
        Some(Memcached { child, addr })
    }
}

/// A Redis server child process (no persistence), killed when dropped.
pub struct Redis {
    _proc: kura_testkit::Proc,
    pub addr: String,
}

impl Redis {
    /// A fresh redis-server (`$KURA_REDIS_SERVER` or `/usr/bin/redis-server`) on a free
    /// port, or `None` (after saying so) when it is not installed and not required.
    pub fn start() -> Option<Redis> {
        let proc = kura_testkit::servers::redis_server()?;
        let addr = proc.addr();
        Some(Redis { _proc: proc, addr })
    }
}

/// memcached with the tests' settings and `listen`.
fn spawn(bin: &Path, listen: &[&str]) -> Child {
    let mut args = vec!["-u", "root", "-U", "0", "-m", "64", "-t", "2"];
    args.extend_from_slice(listen);
    spawn_with(bin, &args)
}

fn spawn_with(bin: &Path, args: &[&str]) -> Child {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()))
}

/// Waits until `ready`; `None` if the process exits first (port taken).
fn wait_until(mut child: Child, ready: impl Fn() -> bool) -> Option<Child> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if ready() {
            // What answered may be another test's server on the same port,
            // ours about to exit because the port is taken: give it a
            // moment to fail before trusting the port.
            std::thread::sleep(Duration::from_millis(100));
            if let Ok(Some(_)) = child.try_wait() {
                return None;
            }
            return Some(child);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not start listening");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub use kura_testkit::free_port;
use kura_testkit::tools::memcached_bin;

/// kura's server in this process, on a free port; stopped when dropped.
pub struct Kura {
    pub addr: String,
    handle: Option<ServerHandle>,
}

impl Kura {
    pub fn start() -> Kura {
        let config = ServerConfig {
            port: 0,
            threads: 2,
            ..ServerConfig::default()
        };
        let server = Server::bind(config).expect("bind kura");
        let addr = server.local_addr().expect("tcp address").to_string();
        let handle = server.start().expect("start kura");
        Kura {
            addr,
            handle: Some(handle),
        }
    }
}

impl Drop for Kura {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
            h.join();
        }
    }
}
