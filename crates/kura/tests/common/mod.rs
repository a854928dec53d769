//! Shared by the `kura` binary's tests: free ports, and a `kura server`
//! on a data dir, started, asked and killed.
// Each test crate uses its own part of this module.
#![allow(dead_code)]

pub mod cluster;
pub mod proxy;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use kura_testkit::free_port;

/// One HTTP exchange on a connection of its own: `request_line`, then `fields` (each line
/// ending in CRLF), then the blank line; the whole response as the server sent it until it
/// closed the connection (ask for that with `Connection: close` or HTTP/1.0).
pub fn http_exchange(port: u16, request_line: &str, fields: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(stream, "{request_line}\r\n{fields}\r\n").unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    out
}

/// The binary under test; `KURA_TEST_BIN` runs the tests against another
/// build (an older commit, to see a test fail before its fix).
pub fn kura() -> Command {
    match std::env::var_os("KURA_TEST_BIN") {
        Some(bin) => Command::new(bin),
        None => Command::new(env!("CARGO_BIN_EXE_kura")),
    }
}

pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kura-durable-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The address it is reached at (loopback but for servers the tests
    /// run in network namespaces of their own).
    pub host: String,
}

impl Server {
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--data-dir", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        Server::start_in_memory(&args)
    }

    /// A server with these flags (no data dir unless they give one).
    pub fn start_in_memory(extra: &[&str]) -> Server {
        Server::spawn(free_port(), extra)
    }

    /// A server on `dir` on a given port (one that served before).
    pub fn start_on_port(dir: &Path, port: u16, extra: &[&str]) -> Server {
        let mut args = vec!["--data-dir", dir.to_str().unwrap()];
        args.extend_from_slice(extra);
        Server::spawn(port, &args)
    }

    pub fn spawn(port: u16, extra: &[&str]) -> Server {
        let child = kura()
            .args(["server", "-p", &port.to_string(), "-t", "2"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Server::adopt(child, "127.0.0.1", port)
    }

    /// A server started by the caller, reached at `host:port`, once it
    /// answers.
    pub fn adopt(child: Child, host: &str, port: u16) -> Server {
        let mut s = Server {
            child,
            port,
            host: host.to_string(),
        };
        s.connect();
        // The answer must have come from this server, not from another
        // test's on a port the OS handed out twice.
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            matches!(s.child.try_wait(), Ok(None)),
            "kura exited at startup (port {port} taken?)"
        );
        s
    }

    pub fn connect(&self) -> TcpStream {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match TcpStream::connect((self.host.as_str(), self.port)) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    return s;
                }
                Err(e) if Instant::now() > deadline => panic!("server did not come up: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn stop(self) {
        self.stop_status();
    }

    /// Stops the server with SIGTERM; returns how it exited.
    pub fn stop_status(mut self) -> std::process::ExitStatus {
        // SAFETY: kill() on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        self.child.wait().unwrap()
    }
}

impl Drop for Server {
    /// A test that fails leaves no server behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[allow(unused_imports)] // not every test file runs commands
pub use kura_testkit::netns::{must, run};

/// A `kura server -t 2` inside a test host (network namespace), listening on `addr` (an
/// address of one of its links) on a free port, with `extra` flags; returned once it
/// answers.
pub fn server_in(host: &kura_testkit::netns::Host, addr: &str, extra: &[&str]) -> Server {
    let port = free_port();
    let child = host
        .command(kura().get_program())
        .args(["server", "-t", "2", "-p", &port.to_string(), "-l", addr])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ip netns exec");
    Server::adopt(child, addr, port)
}

pub fn ask(s: &mut TcpStream, req: &[u8], until: &[u8]) -> Vec<u8> {
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 8192];
    while !out.ends_with(until) {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&b[..n]);
    }
    out
}

pub fn stat(s: &mut TcpStream, name: &str) -> u64 {
    stat_str(s, name).parse().unwrap()
}

/// A `stats` figure as the server wrote it.
pub fn stat_str(s: &mut TcpStream, name: &str) -> String {
    let r = String::from_utf8(ask(s, b"stats\r\n", b"END\r\n")).unwrap();
    r.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .unwrap_or_else(|| panic!("no stat {name}"))
        .trim()
        .to_string()
}

/// Starting must fail: returns what the server said.
pub fn start_fails(dir: &Path) -> String {
    let out = kura()
        .args(["server", "-p", &free_port().to_string(), "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the server started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn newest(dir: &Path, ext: &str) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(ext))
        .collect();
    files.sort();
    files
        .pop()
        .unwrap_or_else(|| panic!("no .{ext} file in {}", dir.display()))
}

pub fn fill(server: &Server, prefix: &str, n: usize) {
    let mut c = server.connect();
    let mut req = Vec::new();
    for i in 0..n {
        req.extend_from_slice(format!("set {prefix}{i} 0 0 20 noreply\r\n{i:020}\r\n").as_bytes());
    }
    req.extend_from_slice(b"mn\r\n");
    ask(&mut c, &req, b"MN\r\n");
}

pub fn get(s: &mut TcpStream, key: &str) -> Option<String> {
    let r = ask(s, format!("get {key}\r\n").as_bytes(), b"END\r\n");
    let r = String::from_utf8(r).unwrap();
    let mut lines = r.split("\r\n");
    let head = lines.next()?;
    head.starts_with("VALUE ")
        .then(|| lines.next().unwrap().to_string())
}

/// `kura log repair [--truncate-corrupt] DIR`, which must succeed.
pub fn log_repair(dir: &Path, truncate_corrupt: bool) {
    let mut cmd = kura();
    cmd.args(["log", "repair"]);
    if truncate_corrupt {
        cmd.arg("--truncate-corrupt");
    }
    let out = cmd.arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `kura http` in front of `http://127.0.0.1:BACKEND` on a new port with `extra` flags, once it
/// listens: the process and its port.
/// An HTTP backend on loopback that reads one request head per connection, hands it to
/// `on_request`, answers `answer` (which should say `Connection: close`) and closes.
pub fn http_backend(
    answer: impl Into<Vec<u8>>,
    on_request: impl Fn(&[u8]) + Send + Sync + 'static,
) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let on_request = std::sync::Arc::new(on_request);
    let answer: std::sync::Arc<[u8]> = answer.into().into();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (on_request, answer) = (on_request.clone(), answer.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                on_request(&buf);
                let _ = stream.write_all(&answer);
            });
        }
    });
    port
}

pub fn http_proxy(backend: u16, extra: &[&str]) -> (Child, u16) {
    let port = free_port();
    let child = kura()
        .args(["http", "--backend", &format!("http://127.0.0.1:{backend}")])
        .args(["-l", &format!("127.0.0.1:{port}")])
        .args(extra)
        .stderr(Stdio::null())
        .spawn()
        .expect("run kura http");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "kura http listens");
        std::thread::sleep(Duration::from_millis(25));
    }
    (child, port)
}
