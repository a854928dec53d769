//! The gutter's stale window (issue 43): a key written to the gutter while
//! its server was away must not be read from the gutter once the server
//! has acknowledged a newer write. Set v1 on the server B; B stops; v2
//! goes to the gutter; B returns; v3 goes to B; B stops again: a get
//! answers v3, a miss or an error, never v2. Every read, over 20 flaps,
//! follows the read-after-acknowledged-write rule (`Latest`).

mod common;

use common::proxy::{keys_on, proxy, reading_until, signal, stat, until_down, Kind, Latest};

const HEALTH: &str = "request_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200";
const FLAPS: usize = 20;

/// Two servers A and B in pool "main" with gutter pool "g" (`gutter_ttl`
/// seconds), and the proxy's configuration file in a fresh directory.
struct Setup {
    _a: common::Server,
    b: common::Server,
    _g: common::Server,
    servers: Vec<String>,
    dir: std::path::PathBuf,
    cfg: std::path::PathBuf,
}

fn setup(name: &str, gutter_ttl: u32) -> Setup {
    let [a, b, g] = [(); 3].map(|()| common::proxy::backend(Kind::Kura));
    let servers = vec![
        format!("127.0.0.1:{}", a.port),
        format!("127.0.0.1:{}", b.port),
    ];
    let dir = common::tempdir(name);
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [\"{}\", \"{}\"]\ngutter = \"g\"\ngutter_ttl = {gutter_ttl}\n\
         [pools.g]\nservers = [\"127.0.0.1:{}\"]\n[health]\n{HEALTH}\n",
        servers[0], servers[1], g.port
    );
    let cfg = dir.join("proxy.toml");
    std::fs::write(&cfg, toml).unwrap();
    Setup {
        _a: a,
        b,
        _g: g,
        servers,
        dir,
        cfg,
    }
}

#[test]
fn the_gutter_never_serves_a_value_older_than_the_home_servers_last_write() {
    // A long gutter TTL: what the gutter holds must not outlive the home
    // server's newer writes by ageing out, but by being deleted.
    // (_a and _g bound: they stop when dropped.)
    let Setup {
        _a,
        b,
        _g,
        servers,
        cfg,
        ..
    } = setup("proxy-gutter-flaps", 600);
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 2, "gutter");
    let mut k = Latest::new(&keys[0]);
    let serving = format!("backend:{}:serving", servers[1]);
    let mut home = b.connect();
    for _ in 0..FLAPS {
        // On B, once it serves.
        reading_until(&mut c, &k, "B serving", |c| stat(c, &serving) == 1);
        k.set_acked(&mut c);
        signal(&b, libc::SIGSTOP);
        until_down(&mut c, &servers[1], &keys[1]);
        // To the gutter: acknowledged.
        assert!(k.set(&mut c), "the gutter did not take the write");
        assert_eq!(k.check(&mut c), Some(k.acked));
        signal(&b, libc::SIGCONT);
        // Back: reads follow the rule until B serves, then v3 goes to B.
        reading_until(&mut c, &k, "B serving again", |c| stat(c, &serving) == 1);
        k.set_acked(&mut c);
        let on_b = common::proxy::reply(&mut home, format!("get {}\r\n", k.key).as_bytes());
        assert!(on_b.contains(&format!("v{}\r\n", k.acked)), "{on_b}");
        // B away again: its keys go to the gutter, which must not answer v2.
        signal(&b, libc::SIGSTOP);
        until_down(&mut c, &servers[1], &keys[1]);
        for _ in 0..5 {
            k.check(&mut c);
        }
        signal(&b, libc::SIGCONT);
    }
}

/// The gutter's copies are listed in memory only: a proxy restarted with
/// its journal while the server was away does not know them, so the server
/// waits until whatever its keys left in the gutter has aged out
/// (`gutter_ttl` + 2 s + the request timeout) before it serves again.
#[test]
fn after_a_proxy_restart_the_server_waits_out_the_gutters_copies() {
    let Setup {
        _a,
        b,
        _g,
        servers,
        dir,
        cfg,
    } = setup("proxy-gutter-restart", 10);
    let journal = dir.join("journal");
    let port = common::free_port();
    let p = common::proxy::proxy_journaled(port, &cfg, &journal);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 2, "restart");
    let mut k = Latest::new(&keys[0]);
    let serving = format!("backend:{}:serving", servers[1]);
    reading_until(&mut c, &k, "B serving", |c| stat(c, &serving) == 1);
    k.set_acked(&mut c);
    signal(&b, libc::SIGSTOP);
    until_down(&mut c, &servers[1], &keys[1]);
    assert!(k.set(&mut c), "the gutter did not take the write");
    drop(c);
    p.kill();
    signal(&b, libc::SIGCONT);
    let p = common::proxy::proxy_journaled(port, &cfg, &journal);
    let mut c = p.connect();
    reading_until(&mut c, &k, "B serving after the restart", |c| {
        stat(c, &serving) == 1
    });
    k.set_acked(&mut c);
    signal(&b, libc::SIGSTOP);
    until_down(&mut c, &servers[1], &keys[1]);
    for _ in 0..5 {
        k.check(&mut c);
    }
    signal(&b, libc::SIGCONT);
}
