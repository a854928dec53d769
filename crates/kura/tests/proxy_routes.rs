//! The proxy's routes: key prefixes to pools, reads and writes to
//! different pools, replicated pools (all-sync answers the worst reply,
//! majority 2 of 3 stores, all-async answers the first replica's reply;
//! reads fail over), a shadow pool, a warm-up route, and a SIGHUP reload
//! that changes the routes under a connection that stays open.

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::proxy::{backends, get_on, has, proxy_with, quoted, reply, signal, Kind};
use common::Server;

const HEALTH: &str =
    "[health]\nrequest_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\n";

#[test]
fn prefixes_and_operations_choose_the_pool() {
    let s = backends(Kind::Kura, 3);
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [{}]\n[pools.users]\nservers = [{}]\n[pools.archive]\nservers = [{}]\n\
         [[routes]]\nprefix = \"u:\"\npool = \"users\"\n[[routes]]\nprefix = \"u:old:\"\npool = \"users\"\nread_pool = \"archive\"\n",
        quoted(&s[0]),
        quoted(&s[1]),
        quoted(&s[2])
    );
    let (p, _) = proxy_with("proxy-routes-prefix", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set u:1 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(reply(&mut c, b"set other 0 0 1\r\ny\r\n"), "STORED\r\n");
    assert!(has(&s[1], "u:1", "x") && !has(&s[0], "u:1", "x"));
    assert!(has(&s[0], "other", "y") && !has(&s[1], "other", "y"));
    // The longer prefix wins: writes to users, reads from archive.
    assert_eq!(reply(&mut c, b"set u:old:1 0 0 1\r\nw\r\n"), "STORED\r\n");
    assert!(has(&s[1], "u:old:1", "w"));
    assert_eq!(reply(&mut c, b"get u:old:1\r\n"), "END\r\n");
    let mut arch = s[2].connect();
    assert_eq!(
        reply(&mut arch, b"set u:old:1 0 0 1\r\nr\r\n"),
        "STORED\r\n"
    );
    assert_eq!(
        reply(&mut c, b"get u:old:1\r\n"),
        "VALUE u:old:1 0 1\r\nr\r\nEND\r\n"
    );
}

/// Three single-server replica pools behind pool "r" with `write`.
fn replicated(name: &str, write: &str, s: &[Server], dead: &str) -> Server {
    let toml = format!(
        "default_pool = \"r\"\n[pools.r1]\nservers = [{}]\n[pools.r2]\nservers = [{}]\n[pools.r3]\nservers = [\"{dead}\"]\n\
         [pools.r]\nreplicas = [\"r1\", \"r2\", \"r3\"]\nwrite = \"{write}\"\n{HEALTH}",
        quoted(&s[0]),
        quoted(&s[1]),
    );
    proxy_with(name, &toml).0
}

#[test]
fn all_sync_with_a_replica_down_answers_the_error() {
    let s = backends(Kind::Kura, 2);
    let dead = format!("127.0.0.1:{}", common::free_port());
    let p = replicated("proxy-allsync", "all-sync", &s, &dead);
    let mut c = p.connect();
    let r = reply(&mut c, b"set k 0 0 1\r\nx\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
    // The live replicas took it; reads go to the first.
    assert!(has(&s[0], "k", "x") && has(&s[1], "k", "x"));
    assert_eq!(reply(&mut c, b"get k\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
    // The worst of NOT_STORED and STORED is NOT_STORED.
    let mut d = s[1].connect();
    assert_eq!(reply(&mut d, b"delete k\r\n"), "DELETED\r\n");
    let r = reply(&mut c, b"replace k 0 0 1\r\ny\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
}

#[test]
fn all_sync_answers_the_worst_of_live_replicas() {
    let s = backends(Kind::Kura, 3);
    let toml = format!(
        "default_pool = \"r\"\n[pools.r1]\nservers = [{}]\n[pools.r2]\nservers = [{}]\n[pools.r3]\nservers = [{}]\n\
         [pools.r]\nreplicas = [\"r1\", \"r2\", \"r3\"]\n",
        quoted(&s[0]),
        quoted(&s[1]),
        quoted(&s[2])
    );
    let (p, _) = proxy_with("proxy-allsync-live", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert!(s.iter().all(|b| has(b, "k", "x")));
    let mut d = s[2].connect();
    assert_eq!(reply(&mut d, b"delete k\r\n"), "DELETED\r\n");
    // STORED, STORED, NOT_STORED: NOT_STORED.
    assert_eq!(reply(&mut c, b"replace k 0 0 1\r\ny\r\n"), "NOT_STORED\r\n");
    // DELETED, DELETED, NOT_FOUND: NOT_FOUND.
    assert_eq!(reply(&mut c, b"delete k\r\n"), "NOT_FOUND\r\n");
}

#[test]
fn majority_with_two_of_three_stored_answers_stored() {
    let s = backends(Kind::Kura, 2);
    let dead = format!("127.0.0.1:{}", common::free_port());
    let p = replicated("proxy-majority", "majority", &s, &dead);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert!(has(&s[0], "k", "x") && has(&s[1], "k", "x"));
    // One of three: the worst.
    let mut d = s[1].connect();
    assert_eq!(reply(&mut d, b"delete k\r\n"), "DELETED\r\n");
    let r = reply(&mut c, b"replace k 0 0 1\r\ny\r\n");
    assert!(r.starts_with("SERVER_ERROR"), "{r}");
}

#[test]
fn all_async_answers_the_first_replica_and_reads_fail_over() {
    let s = backends(Kind::Kura, 2);
    let dead = format!("127.0.0.1:{}", common::free_port());
    let p = replicated("proxy-allasync", "all-async", &s, &dead);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has(&s[1], "k", "x") {
        assert!(Instant::now() < deadline, "the second replica never got it");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first replica stops: reads go to the second.
    signal(&s[0], libc::SIGSTOP);
    let r = reply(&mut c, b"get k\r\n");
    signal(&s[0], libc::SIGCONT);
    assert_eq!(r, "VALUE k 0 1\r\nx\r\nEND\r\n");
    let r = reply(&mut c, b"mg k v\r\n");
    assert_eq!(r, "VA 1\r\n");
}

#[test]
fn a_shadow_gets_its_share_and_a_warm_up_route_fills_the_cold_pool() {
    let s = backends(Kind::Kura, 3);
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [{}]\n[pools.shadow]\nservers = [{}]\n[pools.warm]\nservers = [{}]\n\
         [[routes]]\nprefix = \"s:\"\npool = \"main\"\nshadow = \"shadow\"\nshadow_rate = 1.0\n\
         [[routes]]\nprefix = \"w:\"\npool = \"main\"\nwarm = \"warm\"\n",
        quoted(&s[0]),
        quoted(&s[1]),
        quoted(&s[2])
    );
    let (p, _) = proxy_with("proxy-shadow", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set s:1 0 0 1\r\nx\r\n"), "STORED\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has(&s[1], "s:1", "x") {
        assert!(Instant::now() < deadline, "the shadow never got the write");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(has(&s[0], "s:1", "x"));
    let mut w = s[2].connect();
    assert_eq!(reply(&mut w, b"set w:1 3 100 4\r\nwarm\r\n"), "STORED\r\n");
    assert_eq!(
        reply(&mut c, b"get w:1 w:2\r\n"),
        "VALUE w:1 3 4\r\nwarm\r\nEND\r\n"
    );
    while !get_on(&s[0], "w:1").contains("warm") {
        assert!(Instant::now() < deadline, "the cold pool was never filled");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(get_on(&s[0], "w:1"), "VALUE w:1 3 4\r\nwarm\r\nEND\r\n");
}

#[test]
fn sighup_reloads_routes_under_an_open_connection() {
    let s = backends(Kind::Kura, 2);
    let one = format!("[pools.main]\nservers = [{}]\n", quoted(&s[0]));
    let (p, path) = proxy_with("proxy-sighup", &one);
    let mut c: TcpStream = p.connect();
    assert_eq!(reply(&mut c, b"set x:1 0 0 1\r\na\r\n"), "STORED\r\n");
    assert!(has(&s[0], "x:1", "a"));
    let two = format!(
        "default_pool = \"main\"\n{one}[pools.x]\nservers = [{}]\n[[routes]]\nprefix = \"x:\"\npool = \"x\"\n",
        quoted(&s[1])
    );
    std::fs::write(&path, two).unwrap();
    signal(&p, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(reply(&mut c, b"set x:2 0 0 1\r\nb\r\n"), "STORED\r\n");
        if has(&s[1], "x:2", "b") {
            break;
        }
        assert!(Instant::now() < deadline, "the reload never took effect");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A broken file leaves the configuration in use.
    std::fs::write(&path, "[pools.main]\nservers = []\n").unwrap();
    signal(&p, libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(reply(&mut c, b"set x:3 0 0 1\r\nc\r\n"), "STORED\r\n");
    assert!(has(&s[1], "x:3", "c"));
}

/// `curr_connections` of a kura server, asked on `c`.
fn curr_connections(c: &mut TcpStream) -> u64 {
    common::proxy::stat(c, "curr_connections")
}

#[test]
fn a_reload_that_drops_a_backend_closes_the_connections_to_it() {
    let s = backends(Kind::Kura, 2);
    let both = format!(
        "[pools.main]\nservers = [{}, {}]\n",
        quoted(&s[0]),
        quoted(&s[1])
    );
    let (p, path) = proxy_with("proxy-drop-backend", &both);
    let mut watch = s[1].connect();
    let before = curr_connections(&mut watch);
    // Keys on both backends: the workers connect to each.
    let mut c = p.connect();
    for i in 0..50 {
        assert_eq!(
            reply(&mut c, format!("set k{i} 0 0 1\r\nv\r\n").as_bytes()),
            "STORED\r\n"
        );
    }
    let during = curr_connections(&mut watch);
    assert!(
        during > before,
        "the proxy never connected to the second backend"
    );
    std::fs::write(
        &path,
        format!("[pools.main]\nservers = [{}]\n", quoted(&s[0])),
    )
    .unwrap();
    signal(&p, libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        // Requests keep going, all to the backend that stays.
        assert_eq!(reply(&mut c, b"set after 0 0 1\r\nv\r\n"), "STORED\r\n");
        if curr_connections(&mut watch) == before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the proxy still holds {} connections to the dropped backend",
            curr_connections(&mut watch) - before
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(has(&s[0], "after", "v"));
}

/// The metrics listener's admin pages: live, ready, and `POST /reload`,
/// which does what SIGHUP does (a broken file keeps the configuration in
/// use and says why).
#[test]
fn health_readiness_and_reload_over_http() {
    let s = backends(Kind::Kura, 2);
    let metrics = common::free_port();
    let one = format!(
        "metrics_listen = \"127.0.0.1:{metrics}\"\n[pools.main]\nservers = [{}]\n",
        quoted(&s[0])
    );
    let (p, path) = proxy_with("proxy-admin", &one);
    let call = |method: &str, page: &str| {
        let raw = common::http_exchange(
            metrics,
            &format!("{method} {page} HTTP/1.1"),
            "Host: x\r\nContent-Length: 0\r\nConnection: close\r\n",
        );
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text.lines().next().unwrap_or_default().to_string();
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    };
    assert_eq!(call("GET", "/healthz").1, "ok\n");
    assert_eq!(
        call("GET", "/readyz"),
        ("HTTP/1.1 200 OK".into(), "ready\n".into())
    );
    let mut c: TcpStream = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\na\r\n"), "STORED\r\n");
    // A broken file: 422 with the reason, the configuration in use stays.
    std::fs::write(&path, "[pools.main]\nservers = []\n").unwrap();
    let (status, body) = call("POST", "/reload");
    assert!(status.contains("422"), "{status} {body}");
    assert!(!body.trim().is_empty());
    assert_eq!(reply(&mut c, b"set k2 0 0 1\r\nb\r\n"), "STORED\r\n");
    assert!(has(&s[0], "k2", "b"));
    // A good one: in effect when the reply comes.
    let two = one.replace(&quoted(&s[0]), &quoted(&s[1]));
    std::fs::write(&path, two).unwrap();
    assert_eq!(
        call("POST", "/reload"),
        ("HTTP/1.1 200 OK".into(), "reloaded\n".into())
    );
    assert_eq!(reply(&mut c, b"set k3 0 0 1\r\nc\r\n"), "STORED\r\n");
    assert!(has(&s[1], "k3", "c") && !has(&s[0], "k3", "c"));
    assert!(call("GET", "/reload").0.contains("405"));
}

/// SIGHUPs under load: every request of two busy clients is answered right
/// (none fails while the router is replaced), and the new route is in effect.
#[test]
fn sighups_under_load_fail_no_request() {
    let s = backends(Kind::Kura, 2);
    let one = format!("[pools.main]\nservers = [{}]\n", quoted(&s[0]));
    let (p, path) = proxy_with("proxy-sighup-load", &one);
    let port = p.port;
    let load: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                for i in 0..1_500 {
                    let v = format!("{t}-{i}");
                    let set = format!("set load:{t} 0 0 {}\r\n{v}\r\n", v.len());
                    assert_eq!(reply(&mut c, set.as_bytes()), "STORED\r\n", "round {i}");
                    let got = reply(&mut c, format!("get load:{t}\r\n").as_bytes());
                    assert_eq!(
                        got,
                        format!("VALUE load:{t} 0 {}\r\n{v}\r\nEND\r\n", v.len())
                    );
                }
            })
        })
        .collect();
    for _ in 0..10 {
        signal(&p, libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(10));
    }
    let two = format!(
        "default_pool = \"main\"\n{one}[pools.x]\nservers = [{}]\n[[routes]]\nprefix = \"x:\"\npool = \"x\"\n",
        quoted(&s[1])
    );
    std::fs::write(&path, two).unwrap();
    signal(&p, libc::SIGHUP);
    for t in load {
        t.join().expect("a request failed under SIGHUP");
    }
    let mut c: TcpStream = p.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert_eq!(reply(&mut c, b"set x:1 0 0 1\r\na\r\n"), "STORED\r\n");
        if has(&s[1], "x:1", "a") {
            break;
        }
        assert!(Instant::now() < deadline, "the reload never took effect");
        std::thread::sleep(Duration::from_millis(50));
    }
}
