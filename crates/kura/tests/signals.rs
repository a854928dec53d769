//! `kura server` and the signals an operator's tooling sends: SIGHUP
//! (logrotate's `postrotate`, an init script's `reload`, systemd's
//! `ExecReload`) reads the auth file again and ends nothing; a file that
//! cannot be used keeps the old credentials.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, kura};
use kura_testkit::ChildGuard;

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill() on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                return s;
            }
            Err(e) if Instant::now() > deadline => panic!("server did not come up: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Sends `req`, reads one reply line (or `None` if the connection ended).
fn line(s: &mut TcpStream, req: &[u8]) -> Option<String> {
    s.write_all(req).ok()?;
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(1) => out.push(b[0]),
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// memcached's ASCII authentication on a new connection: whether `user
/// pass` was taken.
fn authenticates(port: u16, user: &str, pass: &str) -> bool {
    let mut s = connect(port);
    let token = format!("{user} {pass}");
    let req = format!("set auth 0 0 {}\r\n{token}\r\n", token.len());
    line(&mut s, req.as_bytes()).as_deref() == Some("STORED\r\n")
}

/// A connection authenticated as `user pass`.
fn authenticated(port: u16, user: &str, pass: &str) -> TcpStream {
    let mut s = connect(port);
    let token = format!("{user} {pass}");
    let req = format!("set auth 0 0 {}\r\n{token}\r\n", token.len());
    assert_eq!(line(&mut s, req.as_bytes()).as_deref(), Some("STORED\r\n"));
    s
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_auth(path: &Path, text: &str) {
    // As an operator's editor or config management does: a new file moved
    // into place, so the server never reads half of one.
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// SIGHUPs sent under load end nothing and fail no request; a changed auth
/// file is in effect for new connections after one, connections already
/// authenticated keep going, and a broken file keeps the credentials in use.
#[test]
fn sighup_reloads_the_auth_file_under_load_and_drops_nothing() {
    let dir = std::env::temp_dir().join(format!("kura-sighup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let auth = dir.join("auth");
    let log = dir.join("stderr");
    write_auth(&auth, "app:one\n");
    let port = free_port();
    let child = kura()
        .args(["server", "-p", &port.to_string(), "-t", "2", "-Y"])
        .arg(&auth)
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .map(ChildGuard)
        .unwrap();
    // Load: two authenticated connections, each a bounded number of
    // pipelined set/get rounds, every reply checked.
    let load: Vec<_> = (0..2)
        .map(|t| {
            let mut s = authenticated(port, "app", "one");
            std::thread::spawn(move || {
                for round in 0..1_500 {
                    let v = format!("{t}-{round}");
                    let req = format!("set k{t} 0 0 {}\r\n{v}\r\nget k{t}\r\n", v.len());
                    let want = format!("STORED\r\nVALUE k{t} 0 {}\r\n{v}\r\nEND\r\n", v.len());
                    s.write_all(req.as_bytes()).expect("write");
                    let mut got = vec![0; want.len()];
                    s.read_exact(&mut got).expect("a reply under SIGHUP");
                    assert_eq!(String::from_utf8_lossy(&got), want, "round {round}");
                }
            })
        })
        .collect();
    for _ in 0..20 {
        signal(&child, libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(5));
    }
    // A new password: in effect once the server has read the file again.
    write_auth(&auth, "app:two\n");
    signal(&child, libc::SIGHUP);
    wait_until("the new password never worked", || {
        authenticates(port, "app", "two")
    });
    assert!(
        !authenticates(port, "app", "one"),
        "the old password still works"
    );
    for t in load {
        t.join().expect("a load connection failed");
    }
    // A broken file: logged, and the credentials read last stay.
    write_auth(&auth, "no separator on this line\n");
    signal(&child, libc::SIGHUP);
    wait_until("no log line for the broken file", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("kept the old auth file"))
    });
    assert!(authenticates(port, "app", "two"));
    let mut child = child;
    assert!(
        matches!(child.try_wait(), Ok(None)),
        "the server ended on SIGHUP"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A SIGHUP to a server without files to read (the common case: no `-Y`,
/// no TLS) changes nothing and ends nothing.
#[test]
fn sighup_without_files_to_read_is_harmless() {
    let dir = std::env::temp_dir().join(format!("kura-sighup-plain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("stderr");
    let port = free_port();
    let mut child = kura()
        .args(["server", "-p", &port.to_string(), "-v"])
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .map(ChildGuard)
        .unwrap();
    let mut s = connect(port);
    assert_eq!(
        line(&mut s, b"set a 0 0 1\r\nx\r\n").as_deref(),
        Some("STORED\r\n")
    );
    // One at a time, each seen (logged) before the next: three reloads.
    for n in 1..=3 {
        signal(&child, libc::SIGHUP);
        wait_until("the server never logged the SIGHUP", || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.matches("SIGHUP").count() >= n)
        });
    }
    assert!(matches!(child.try_wait(), Ok(None)), "SIGHUP ended it");
    assert_eq!(
        line(&mut s, b"get a\r\n").as_deref(),
        Some("VALUE a 0 1\r\n"),
        "the cache or the connection was lost"
    );
    let _ = std::fs::remove_dir_all(dir);
}
