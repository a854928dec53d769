//! kura proxy's listener and backend connections (issue 43): a Unix
//! socket (`listen = "unix:/path"`, its mode memcached's `-a`) and
//! `preconnect` (every worker's backend connections opened at start and
//! after a reload, not on the first request).

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::proxy::signal;
use common::{kura, stat, Server};

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ask<S: Read + Write>(s: &mut S, req: &str, until: &str) -> String {
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 4096];
    while !out.ends_with(until.as_bytes()) {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&b[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn the_proxy_listens_on_a_unix_socket_with_its_mode() {
    let b = Server::start_in_memory(&[]);
    let dir = common::tempdir("proxy-unix");
    let sock = dir.join("proxy.sock");
    // A socket file left by an earlier run is replaced.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let cfg = dir.join("proxy.toml");
    let text = format!(
        "listen = \"unix:{}\"\nunix_mode = \"0660\"\n[pools.main]\nservers = [\"127.0.0.1:{}\"]\n",
        sock.display(),
        b.port
    );
    std::fs::write(&cfg, text).unwrap();
    let mut child = common::proxy::spawn_with_config(&cfg);
    let mut c = None;
    wait_for("the socket", || {
        c = UnixStream::connect(&sock).ok();
        c.is_some()
    });
    let mut c = c.unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let meta = std::fs::symlink_metadata(&sock).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(ask(&mut c, "set k 0 0 2\r\nhi\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(
        ask(&mut c, "get k\r\n", "END\r\n"),
        "VALUE k 0 2\r\nhi\r\nEND\r\n"
    );
    // Stopped, it removes its socket.
    // SAFETY: kill() on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    child.wait().unwrap();
    assert!(!sock.exists());

    // A path taken by a file that is not a socket is left alone, and the
    // proxy says so.
    std::fs::write(&sock, "data").unwrap();
    let out = kura()
        .args(["proxy", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(std::fs::read(&sock).unwrap(), b"data");
}

/// `curr_connections` of a kura server, minus the one asking.
fn connections(b: &Server) -> u64 {
    let mut c = b.connect();
    stat(&mut c, "curr_connections") - 1
}

#[test]
fn preconnect_opens_the_backend_connections_at_start_and_after_reload() {
    let a = Server::start_in_memory(&[]);
    let b = Server::start_in_memory(&[]);
    let dir = common::tempdir("proxy-preconnect");
    let cfg = dir.join("proxy.toml");
    let write = |servers: &[&Server]| {
        let list: Vec<String> = servers
            .iter()
            .map(|s| format!("\"127.0.0.1:{}\"", s.port))
            .collect();
        let text = format!(
            "threads = 2\npreconnect = true\n[health]\nconnections_per_backend = 2\n[pools.main]\nservers = [{}]\n",
            list.join(", ")
        );
        std::fs::write(&cfg, text).unwrap();
    };
    write(&[&a]);
    // Nothing else is connected to them (the start-up checks are gone).
    wait_for("idle backends", || {
        connections(&a) == 0 && connections(&b) == 0
    });
    let (base_a, base_b) = (0, 0);
    let p = common::proxy::proxy(&["--config", cfg.to_str().unwrap()]);
    // 2 workers x 2 connections, before any request.
    wait_for("4 connections to a", || connections(&a) == base_a + 4);
    assert_eq!(connections(&b), base_b);
    write(&[&a, &b]);
    signal(&p, libc::SIGHUP);
    wait_for("4 connections to b after the reload", || {
        connections(&b) == base_b + 4
    });
    assert_eq!(connections(&a), base_a + 4);
    // And they serve.
    let mut c = p.connect();
    assert_eq!(ask(&mut c, "set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(connections(&a) + connections(&b), base_a + base_b + 8);
}
