//! Ring changes by reload (issue 43): a backend that re-enters a ring
//! after an absence the journal could not record (a reload removed it and
//! a later one adds it back) must not serve what it held before, and
//! neither may a backend that stayed and gets back keys it lost to another
//! (removed again, they return to it). Every read, over 20 flaps, follows
//! the read-after-acknowledged-write rule (`Latest`).

mod common;

use std::path::Path;

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

#[test]
fn a_backend_removed_and_added_back_by_reloads_never_serves_what_it_held() {
    let a = common::proxy::backend(Kind::Kura);
    let b = common::proxy::backend(Kind::Kura);
    let servers = vec![
        format!("127.0.0.1:{}", a.port),
        format!("127.0.0.1:{}", b.port),
    ];
    let dir = common::tempdir("proxy-reload-flaps");
    let cfg = dir.join("proxy.toml");
    write_config(&cfg, &[&servers[0], &servers[1]]);
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    // On B while both are in the ring, on A while B is out.
    let mut k = Latest::new(&keys_on(&servers, 1, 1, "reload")[0]);
    let serving =
        |c: &mut std::net::TcpStream, s: &String| stat(c, &format!("backend:{s}:serving")) == 1;
    for _ in 0..FLAPS {
        reading_until(&mut c, &k, "both serving", |c| {
            stat(c, "pool:main:backends") == 2 && serving(c, &servers[0]) && serving(c, &servers[1])
        });
        k.set_acked(&mut c);
        write_config(&cfg, &[&servers[0]]);
        signal(&p, libc::SIGHUP);
        reading_until(&mut c, &k, "B removed, A serving", |c| {
            stat(c, "pool:main:backends") == 1 && serving(c, &servers[0])
        });
        k.set_acked(&mut c);
        assert_eq!(k.check(&mut c), Some(k.acked));
        write_config(&cfg, &[&servers[0], &servers[1]]);
        signal(&p, libc::SIGHUP);
        reading_until(&mut c, &k, "B back", |c| {
            stat(c, "pool:main:backends") == 2 && serving(c, &servers[1])
        });
        for _ in 0..5 {
            k.check(&mut c);
        }
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
