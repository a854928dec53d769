//! Ring changes by reload (issue 43): a backend that re-enters a ring
//! after an absence the journal could not record (a reload removed it and
//! a later one adds it back) must not serve what it held before, and
//! neither may a backend that stayed and gets back keys it lost to another
//! (removed again, they return to it). Every read, over 20 flaps, follows
//! the read-after-acknowledged-write rule (`Latest`).

mod common;

use std::path::{Path, PathBuf};

use common::proxy::{keys_on, proxy, reading_until, signal, stat, Kind, Latest};

const HEALTH: &str = "request_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200";
const FLAPS: usize = 20;

/// Rewrites the proxy's configuration: one pool over `servers`.
fn write_config(path: &Path, servers: &[&String]) {
    let list = servers
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let text =
        format!("default_pool = \"main\"\n[pools.main]\nservers = [{list}]\n[health]\n{HEALTH}\n");
    std::fs::write(path, text).unwrap();
}

/// Whether the proxy's backend `s` serves.
fn serving(c: &mut std::net::TcpStream, s: &String) -> bool {
    stat(c, &format!("backend:{s}:serving")) == 1
}

/// Backends A and B, their addresses, and a fresh directory (named `name`)
/// with the proxy's configuration of both.
fn two_backends(name: &str) -> ([common::Server; 2], Vec<String>, PathBuf, PathBuf) {
    let both = [(); 2].map(|()| common::proxy::backend(Kind::Kura));
    let servers: Vec<String> = both
        .iter()
        .map(|s| format!("127.0.0.1:{}", s.port))
        .collect();
    let dir = common::tempdir(name);
    let cfg = dir.join("proxy.toml");
    write_config(&cfg, &[&servers[0], &servers[1]]);
    (both, servers, dir, cfg)
}

/// B removed by a reload once both serve: `k` set (on B) before, and again
/// (on A) after.
fn remove_b(
    p: &common::Server,
    c: &mut std::net::TcpStream,
    k: &mut Latest,
    servers: &[String],
    cfg: &Path,
) {
    reading_until(c, k, "both serving", |c| {
        stat(c, "pool:main:backends") == 2 && serving(c, &servers[0]) && serving(c, &servers[1])
    });
    k.set_acked(c);
    write_config(cfg, &[&servers[0]]);
    signal(p, libc::SIGHUP);
    reading_until(c, k, "B removed, A serving", |c| {
        stat(c, "pool:main:backends") == 1 && serving(c, &servers[0])
    });
    k.set_acked(c);
}

/// B (removed, `k` last set on A) put back by a reload: every read of
/// `k`, until B serves and five after, follows the rule.
fn add_b_back(
    p: &common::Server,
    c: &mut std::net::TcpStream,
    k: &Latest,
    servers: &[String],
    cfg: &Path,
) {
    assert_eq!(k.check(c), Some(k.acked));
    write_config(cfg, &[&servers[0], &servers[1]]);
    signal(p, libc::SIGHUP);
    reading_until(c, k, "B back", |c| {
        stat(c, "pool:main:backends") == 2 && serving(c, &servers[1])
    });
    for _ in 0..5 {
        k.check(c);
    }
}

#[test]
fn a_backend_removed_and_added_back_by_reloads_never_serves_what_it_held() {
    let (_both, servers, _dir, cfg) = two_backends("proxy-reload-flaps");
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    // On B while both are in the ring, on A while B is out.
    let mut k = Latest::new(&keys_on(&servers, 1, 1, "reload")[0]);
    for _ in 0..FLAPS {
        remove_b(&p, &mut c, &mut k, &servers, &cfg);
        add_b_back(&p, &mut c, &k, &servers, &cfg);
    }
}

/// A backend replaced by another at its place in the list, and put back
/// later: each of the two re-enters the ring in turn, and neither serves
/// what it held when it left.
#[test]
fn backends_replaced_and_put_back_by_reloads_never_serve_what_they_held() {
    let a = common::proxy::backend(Kind::Kura);
    let b = common::proxy::backend(Kind::Kura);
    let r = common::proxy::backend(Kind::Kura);
    let addr = |s: &common::Server| format!("127.0.0.1:{}", s.port);
    let (a, b, r) = (addr(&a), addr(&b), addr(&r));
    let dir = common::tempdir("proxy-replace-flaps");
    let cfg = dir.join("proxy.toml");
    write_config(&cfg, &[&a, &b]);
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    // A key on the second server of either list.
    let on_r = keys_on(&[a.clone(), r.clone()], 1, 200, "replace");
    let key = keys_on(&[a.clone(), b.clone()], 1, 200, "replace")
        .into_iter()
        .find(|k| on_r.contains(k))
        .expect("a key on both");
    let mut k = Latest::new(&key);
    // In the ring in use and serving (a backend not in it has no stats).
    let serving = |c: &mut std::net::TcpStream, s: &String| {
        let all = common::ask(c, b"stats\r\n", b"END\r\n");
        let line = format!("STAT backend:{s}:serving 1\r\n");
        String::from_utf8_lossy(&all).contains(&line)
    };
    for flap in 0..FLAPS {
        let (now, next) = if flap % 2 == 0 { (&b, &r) } else { (&r, &b) };
        reading_until(&mut c, &k, "the second serving", |c| serving(c, now));
        k.set_acked(&mut c);
        write_config(&cfg, &[&a, next]);
        signal(&p, libc::SIGHUP);
        reading_until(&mut c, &k, "replaced", |c| serving(c, next));
        for _ in 0..5 {
            k.check(&mut c);
        }
    }
}

/// With a journal directory, which backends left a pool's ring survives a
/// proxy restart: B removed by a reload, the proxy restarted, B put back
/// by a reload of the restarted proxy: B is flushed before it serves
/// (before, the restarted proxy took B for new to the pool and served the
/// value B held from before its removal).
#[test]
fn a_backend_removed_before_a_restart_and_added_back_after_never_serves_what_it_held() {
    let (_both, servers, dir, cfg) = two_backends("proxy-reload-restart");
    let journal = dir.join("journal");
    let port = common::free_port();
    let p = common::proxy::proxy_journaled(port, &cfg, &journal);
    let mut c = p.connect();
    let mut k = Latest::new(&keys_on(&servers, 1, 1, "restart")[0]);
    remove_b(&p, &mut c, &mut k, &servers, &cfg);
    drop(c);
    p.kill();
    let p = common::proxy::proxy_journaled(port, &cfg, &journal);
    let mut c = p.connect();
    add_b_back(&p, &mut c, &k, &servers, &cfg);
}
