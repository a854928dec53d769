//! `kura http` with `[purge]` and `[bans]` from a config file, as an operator runs it: PURGE,
//! a ban through the admin listener with its token, a refused request-dependent ban, the
//! lurker emptying the list.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TOKEN: &str = "binary-test-token-0123456789";

/// A backend answering every request with a cacheable body, counting them.
fn backend() -> (u16, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    let port = common::http_backend(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        },
    );
    (port, count)
}

/// Sends one request (`head` without the final blank line) and `body`; returns the response.
fn request(port: u16, head: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "{head}\r\nHost: example\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

fn ban(admin: u16, expr: &str) -> String {
    let head = format!("POST /ban HTTP/1.1\r\nAuthorization: Bearer {TOKEN}");
    request(admin, &head, expr)
}

#[test]
fn purge_and_bans_from_the_config_file() {
    let (backend, count) = backend();
    let admin = common::free_port();
    let dir = std::env::temp_dir().join(format!("kura-http-bans-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kura-http.toml");
    std::fs::write(
        &file,
        format!(
            "admin_listen = \"127.0.0.1:{admin}\"\n[purge]\nallow = [\"127.0.0.1\"]\n\
             [bans]\ntoken = \"{TOKEN}\"\nlurker_interval_ms = 10\n"
        ),
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let (mut child, port) =
        common::http_proxy(backend, &["-m", "16", "-t", "1", "--config", config]);
    let get = |path: &str| request(port, &format!("GET {path} HTTP/1.1"), "");
    assert!(get("/a").contains("x-cache: miss"));
    assert!(get("/a").contains("x-cache: hit"));
    let purged = request(port, "PURGE /a HTTP/1.1", "");
    assert!(purged.starts_with("HTTP/1.1 200"), "{purged}");
    assert!(request(port, "PURGE /a HTTP/1.1", "").starts_with("HTTP/1.1 404"));
    assert!(get("/a").contains("x-cache: miss"));
    assert!(get("/b").contains("x-cache: miss"));
    assert_eq!(count.load(Ordering::SeqCst), 3);

    let refused = ban(admin, "req.url ~ ^/a");
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(refused.contains("lurker"), "{refused}");
    let unauthorised = request(admin, "POST /ban HTTP/1.1", "obj.url ~ ^/a");
    assert!(unauthorised.starts_with("HTTP/1.1 401"), "{unauthorised}");
    let added = ban(admin, "obj.url ~ ^/a");
    assert!(added.starts_with("HTTP/1.1 200"), "{added}");
    assert!(added.contains("\"seq\":1"), "{added}");
    // The lurker removes /a and completes the ban without any request.
    let mut stats = String::new();
    for _ in 0..500 {
        stats = request(admin, "GET /stats HTTP/1.1", "");
        if stats.contains("\"bans\":0") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(stats.contains("\"bans\":0"), "{stats}");
    assert!(
        stats.contains("\"bans_objects_banned_lurker\":1"),
        "{stats}"
    );
    assert!(get("/a").contains("x-cache: miss"));
    assert!(get("/b").contains("x-cache: hit"));
    let metrics = request(admin, "GET /metrics HTTP/1.1", "");
    assert!(
        metrics.contains("kura_http_bans_completed_lurker_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains("kura_http_purges_total 1"), "{metrics}");
    assert!(
        metrics.contains("kura_http_bans_completed_lookup_total "),
        "{metrics}"
    );

    // SAFETY: kill(2) on the child's pid, which we own and have not waited for.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
