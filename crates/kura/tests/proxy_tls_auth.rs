//! kura proxy logging in to backends that require it (issue 43):
//! memcached's ASCII authentication (`-Y FILE`) on Debian's memcached and
//! on kura server, set by `[backend_auth]`. A refused login never leaves
//! a client waiting: its requests get SERVER_ERROR, the backend is marked
//! down, and the log names the backend and what it answered.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::proxy::have;
use common::Server;

use common::proxy::QUICK_HEALTH as HEALTH;

fn ask(s: &mut TcpStream, req: &str) -> String {
    s.write_all(req.as_bytes()).unwrap();
    let until: &[u8] = if req.starts_with("get ") {
        b"END\r\n"
    } else {
        b"\r\n"
    };
    let mut out = Vec::new();
    let mut b = [0u8; 4096];
    let failed = |out: &[u8]| out.starts_with(b"SERVER_ERROR") && out.ends_with(b"\r\n");
    while !(out.ends_with(until) || failed(&out)) {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&b[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A memcached requiring ASCII authentication with `file`.
fn memcached_auth(file: &Path) -> Server {
    common::proxy::memcached(&["-Y".as_ref(), file.as_os_str()])
}

/// A proxy in front of `backend` logging in as `user` with `password`;
/// its log in the directory.
fn proxy_logging_in(backend: &Server, user: &str, password: &str) -> (Server, std::path::PathBuf) {
    let dir = common::tempdir(&format!("proxy-auth-{}", backend.port));
    let text = format!(
        "[pools.main]\nservers = [\"127.0.0.1:{}\"]\n{HEALTH}[backend_auth]\nuser = \"{user}\"\npassword = \"{password}\"\n",
        backend.port
    );
    common::proxy::proxy_logged(&dir, &text)
}

fn auth_file(name: &str) -> std::path::PathBuf {
    let dir = common::tempdir(name);
    let file = dir.join("auth");
    std::fs::write(&file, "proxy:s3cret\n").unwrap();
    file
}

/// The proxy logged in serves; a wrong password gets SERVER_ERROR at once
/// (never silence), the backend marked down, and a log line saying why;
/// the password corrected by a reload, the backend serves.
fn login_works_and_a_wrong_password_is_refused(backend: impl Fn() -> Server) {
    let b = backend();
    let (p, _log) = proxy_logging_in(&b, "proxy", "s3cret");
    let mut c = p.connect();
    assert_eq!(ask(&mut c, "set k 0 0 5\r\nhello\r\n"), "STORED\r\n");
    assert_eq!(ask(&mut c, "get k\r\n"), "VALUE k 0 5\r\nhello\r\nEND\r\n");
    assert_eq!(
        common::ask(&mut c, b"mg k v\r\n", b"hello\r\n"),
        b"VA 5\r\nhello\r\n"
    );

    let b = backend();
    let (p, log) = proxy_logging_in(&b, "proxy", "wrong");
    let mut c = p.connect();
    let addr = format!("127.0.0.1:{}", b.port);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = ask(&mut c, "get k\r\n");
        assert!(r.starts_with("SERVER_ERROR"), "{r}");
        if common::stat(&mut c, &format!("backend:{addr}:down")) == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "never marked down");
    }
    let r = ask(&mut c, "set k 0 0 1\r\nx\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("authentication refused") {
            break text;
        }
        assert!(Instant::now() < deadline, "no log line: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        text.contains(&addr) && text.contains("authentication failure"),
        "{text}"
    );

    // The password corrected by a reload: the backend, kept across it,
    // logs in with the new one (before, it kept the old until restart).
    let cfg = log.with_file_name("proxy.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("\"wrong\"", "\"s3cret\"")).unwrap();
    common::proxy::signal(&p, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(20);
    while ask(&mut c, "set k 0 0 1\r\nx\r\n") != "STORED\r\n" {
        assert!(Instant::now() < deadline, "the new password never used");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ask(&mut c, "get k\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
}

#[test]
fn ascii_auth_to_debian_memcached() {
    if !have("/usr/bin/memcached", "memcached") {
        return;
    }
    let file = auth_file("proxy-auth-memcached");
    login_works_and_a_wrong_password_is_refused(|| memcached_auth(&file));
}

#[test]
fn ascii_auth_to_kura_server() {
    let file = auth_file("proxy-auth-kura");
    let f = file.to_str().unwrap().to_string();
    login_works_and_a_wrong_password_is_refused(|| Server::start_in_memory(&["-Y", &f]));
}
