//! A full disk under a durable server: writes are refused with a clear
//! error while reads go on, nothing acknowledged is lost, writes come back
//! when space does, a snapshot that would not fit is skipped, and a server
//! stopped while its log cannot be written says so with its exit status.
//! Runs on a small tmpfs, which needs root (CI runs as root; elsewhere the
//! test says it was skipped).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{get, stat, tempdir, Server};

/// A tmpfs of `mb` megabytes, unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(name: &str, mb: u32) -> Option<SmallDisk> {
        let dir = tempdir(name);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to mount a tmpfs (it runs as root)"
            );
            eprintln!("skipped: cannot mount a tmpfs here (not root?)");
            return None;
        }
        Some(SmallDisk(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn set(c: &mut TcpStream, key: &str, value: &[u8]) -> String {
    try_set(c, key, value).expect("connection closed")
}

/// A set's reply line, or None if the server closed the connection first:
/// what it does when the log fails on a write it applied but cannot log
/// (never acknowledged; conn/task.rs `settled`).
fn try_set(c: &mut TcpStream, key: &str, value: &[u8]) -> Option<String> {
    let mut req = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(value);
    req.extend_from_slice(b"\r\n");
    c.write_all(&req).ok()?;
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        if c.read(&mut b).ok()? != 1 {
            return None;
        }
        line.push(b[0]);
    }
    Some(String::from_utf8(line).unwrap())
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("{i:08}").into_bytes();
    v.resize(20_000, b'0' + (i % 10) as u8);
    v
}

#[test]
fn a_full_disk_refuses_writes_serves_reads_and_recovers_when_space_returns() {
    let Some(disk) = SmallDisk::mount("disk-full", 8) else {
        return;
    };
    let data = disk.path().join("data");
    // Room an operator can free later.
    let filler = disk.path().join("filler");
    std::fs::write(&filler, vec![1u8; 3 << 20]).unwrap();
    let args = [
        "--fsync",
        "everysec",
        "--log-file-size",
        "1m",
        "--snapshot-log-size",
        "0",
        "--snapshot-interval",
        "1",
    ];
    let server = Server::start(&data, &args);
    let mut c = server.connect();
    let mut stored = 0;
    // The write during which the log fails either hears the refusal or, if
    // its own record is the one that could not be written, sees its
    // connection closed unacknowledged; the next write hears the refusal.
    let mut closed = 0;
    let refusal = loop {
        assert!(stored < 2_000, "8 MB never filled up");
        match try_set(&mut c, &format!("k{stored}"), &value(stored)) {
            Some(r) if r == "STORED\r\n" => stored += 1,
            Some(r) => break r,
            None => {
                closed += 1;
                assert_eq!(closed, 1, "closed again after a reconnect");
                c = server.connect();
            }
        }
    };
    assert!(
        refusal.starts_with("SERVER_ERROR the update log cannot be written")
            && refusal.contains("No space left on device"),
        "{refusal:?}"
    );
    assert!(stored > 10, "only {stored} writes fit");
    // Refused, on every protocol, while reads go on.
    let mut c = server.connect();
    assert_eq!(stat(&mut c, "log_refusing_writes"), 1);
    assert!(set(&mut c, "another", b"x").starts_with("SERVER_ERROR the update log"));
    c.write_all(b"ms meta 1 q\r\nx\r\nmn\r\n").unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 512];
    while !got.ends_with(b"MN\r\n") {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
    }
    assert!(
        got.starts_with(b"SERVER_ERROR the update log"),
        "meta's q still hears errors"
    );
    // The binary protocol's answer: memcached's "temporary failure".
    let mut bin = server.connect();
    let (key, val) = (b"binkey", b"v");
    let mut req = vec![0x80, 0x01, 0, key.len() as u8, 8, 0, 0, 0];
    req.extend_from_slice(&((8 + key.len() + val.len()) as u32).to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.extend_from_slice(&[0; 8]);
    req.extend_from_slice(key);
    req.extend_from_slice(val);
    bin.write_all(&req).unwrap();
    let mut head = [0u8; 24];
    bin.read_exact(&mut head).unwrap();
    assert_eq!(u16::from_be_bytes([head[6], head[7]]), 0x86, "{head:?}");
    for i in [0, stored / 2, stored - 1] {
        let v = get(&mut c, &format!("k{i}")).expect("an acknowledged write is readable");
        assert_eq!(v.as_bytes(), &value(i)[..]);
    }
    // A snapshot would not fit: skipped, no half-written file left.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "log_snapshots_skipped") == 0 {
        assert!(
            Instant::now() < deadline,
            "no snapshot was tried and skipped"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for f in std::fs::read_dir(&data).unwrap() {
        let name = f.unwrap().file_name().into_string().unwrap();
        assert!(!name.ends_with(".tmp"), "a half-written {name} was left");
    }
    // Space comes back: so do writes, within the retry period.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = set(&mut c, "after", b"back");
        if r == "STORED\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "writes never came back: {r}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(stat(&mut c, "log_refusing_writes"), 0);
    server.stop();
    // Every acknowledged write survives a restart.
    let server = Server::start(&data, &args);
    let mut c = server.connect();
    for i in 0..stored {
        assert!(get(&mut c, &format!("k{i}")).is_some(), "k{i} lost");
    }
    assert_eq!(get(&mut c, "after"), Some("back".into()));
    server.stop();
}

#[test]
fn a_server_stopped_while_its_log_cannot_be_written_exits_with_an_error() {
    let Some(disk) = SmallDisk::mount("disk-full-stop", 4) else {
        return;
    };
    let data = disk.path().join("data");
    let server = Server::start(&data, &["--snapshot-log-size", "0"]);
    let mut c = server.connect();
    for i in 0..1_000 {
        // A refusal, or the connection closed on a write the log failed on.
        if try_set(&mut c, &format!("k{i}"), &value(i)).is_none_or(|r| r != "STORED\r\n") {
            c = server.connect();
            break;
        }
    }
    assert_eq!(
        stat(&mut c, "log_refusing_writes"),
        1,
        "the disk never filled"
    );
    let status = server.stop_status();
    assert!(
        !status.success(),
        "exit status {status:?} after a log failure"
    );
}
