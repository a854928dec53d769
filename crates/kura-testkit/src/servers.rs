//! Servers for the tests, each a child process on a free loopback port, killed when
//! dropped: `kura server` of this workspace (the binary built with cargo on first use, or
//! `$KURA_BIN`), Debian's memcached and a private redis-server without persistence.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::free_port;
use crate::process::{await_listen, Proc};
use crate::tools::{memcached_bin, redis_server_bin};

/// How long a server may take to listen (a debug build on a loaded machine).
const LISTEN_LIMIT: Duration = Duration::from_secs(30);

/// The `kura` binary: `$KURA_BIN`, or this workspace's, built by cargo into the target
/// directory the test runs from. Under `cargo test --workspace`, `cargo build -p kura`
/// resolves other features than the workspace's and rebuilds part of the server's
/// dependencies once; CI sets `KURA_BIN=target/debug/kura` (which the workspace's test build
/// made) to skip that.
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
        // Without what `cargo test` put in this process's environment (package variables,
        // the library path): build scripts that watch such variables would otherwise see a
        // change and rebuild the server's dependencies at every run.
        for (name, _) in std::env::vars_os() {
            let name_str = name.to_string_lossy();
            // Cargo's own settings stay (a profile set by environment, as CI's
            // CARGO_PROFILE_DEV_DEBUG, must build what the tests were built with).
            let keep = ["CARGO_HOME", "CARGO_INCREMENTAL"];
            let setting = [
                "CARGO_PROFILE_",
                "CARGO_BUILD_",
                "CARGO_TARGET_",
                "CARGO_TERM_",
            ]
            .iter()
            .any(|p| name_str.starts_with(p));
            if (name_str.starts_with("CARGO_") && !setting && !keep.contains(&name_str.as_ref()))
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

/// Spawns `cmd` (its output dropped) and waits until it listens on loopback `port`.
fn listening(mut cmd: Command, port: u16, what: &str) -> Option<Proc> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    await_listen(child, addr, what, LISTEN_LIMIT).map(|child| Proc { child, port })
}

/// `kura server` on `port`, in memory, two workers, 256 MB; `None` when it exited (the port
/// was taken).
pub fn kura_on(port: u16) -> Option<Proc> {
    let mut cmd = Command::new(kura_bin());
    cmd.args(["server", "-p", &port.to_string(), "-t", "2", "-m", "256"]);
    listening(cmd, port, "kura")
}

/// `kura server` on a free port (see [`kura_on`]).
pub fn kura() -> Proc {
    (0..5)
        .find_map(|_| kura_on(free_port()))
        .expect("kura server failed to start 5 times")
}

/// Debian's memcached on a free port, or `None` when it is not installed.
pub fn memcached() -> Option<Proc> {
    memcached_bin()?;
    for _ in 0..5 {
        if let Some(p) = memcached_on(free_port()) {
            return Some(p);
        }
    }
    panic!("memcached failed to start 5 times");
}

/// Debian's memcached on `port` (a restart on the port a killed one had), 256 MB, two
/// workers, no UDP; `None` when it is not installed or did not start.
pub fn memcached_on(port: u16) -> Option<Proc> {
    let bin = memcached_bin()?;
    let mut cmd = Command::new(&bin);
    cmd.args([
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
    .args(["-p", &port.to_string()]);
    listening(cmd, port, "memcached")
}

/// `kura server` on a free port as [`kura_on`] starts it, with `extra`
/// flags (`-Z -o ssl_...`, `-Y FILE`).
pub fn kura_with(extra: &[&str]) -> Proc {
    (0..5)
        .find_map(|_| {
            let port = free_port();
            let mut cmd = Command::new(kura_bin());
            cmd.args(["server", "-p", &port.to_string(), "-t", "2", "-m", "256"])
                .args(extra);
            listening(cmd, port, "kura")
        })
        .expect("kura server failed to start 5 times")
}

/// Debian's memcached on a free port as [`memcached_on`] starts it, with
/// `extra` flags (`-Z`, `-Y FILE`, `-S`) and environment `env`; `None`
/// when it is not installed.
pub fn memcached_with(extra: &[&str], env: &[(&str, &str)]) -> Option<Proc> {
    let bin = memcached_bin()?;
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.args([
            "-u",
            "root",
            "-U",
            "0",
            "-m",
            "64",
            "-t",
            "2",
            "-l",
            "127.0.0.1",
        ])
        .args(["-p", &port.to_string()])
        .args(extra)
        .envs(env.iter().copied());
        if let Some(p) = listening(cmd, port, "memcached") {
            return Some(p);
        }
    }
    panic!("memcached failed to start 5 times");
}

/// `n` servers of one kind: kura, or memcached (`None`: not installed).
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

/// A `redis-server` on a free port without persistence, or `None` after printing why the
/// test is skipped (a failure under CI).
pub fn redis_server() -> Option<Proc> {
    let bin = redis_server_bin()?;
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"]);
        // The port answered: make sure it is this redis-server (another process may have
        // held the port a moment) before handing it out.
        if let Some(p) = listening(cmd, port, "redis-server").filter(|_| answers_ping(port)) {
            return Some(p);
        }
    }
    panic!("redis-server failed to start 5 times");
}

/// Whether a Redis server answers PING on `port`.
fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}
