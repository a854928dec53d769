//! Reads spread over a replicated pool's replicas (issue 43, point 7):
//! `read = "round-robin"` takes each replica in turn, `"nearest"` the one
//! that answers soonest, and `miss_failover` sends a miss to the next
//! replica (mcrouter's MissFailoverRoute). A replica back from downtime
//! never serves a value older than the last acknowledged write, over 20
//! flaps, whichever replica the turn falls on.

mod common;

use std::time::Duration;

use common::proxy::{
    backends, proxy_with, quoted, reading_until, reply, signal, stat, until_down, Kind, Latest,
};
use common::Server;

const HEALTH: &str = "[health]\nrequest_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200\n";
const FLAPS: usize = 20;

/// Pools r1, r2... of one server each (`servers`, TOML strings),
/// replicated by the default pool "r" with the lines `settings`.
fn replicated(servers: &[String], settings: &str) -> String {
    let mut t = String::from("default_pool = \"r\"\n");
    for (i, s) in servers.iter().enumerate() {
        t += &format!("[pools.r{}]\nservers = [{s}]\n", i + 1);
    }
    let names: Vec<String> = (1..=servers.len()).map(|i| format!("\"r{i}\"")).collect();
    t + &format!(
        "[pools.r]\nreplicas = [{}]\n{settings}\n{HEALTH}",
        names.join(", ")
    )
}

fn requests(c: &mut std::net::TcpStream, addr: &str) -> u64 {
    stat(c, &format!("backend:{addr}:requests"))
}

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

#[test]
fn round_robin_reads_take_each_replica_in_turn() {
    let s = backends(Kind::Kura, 3);
    let servers: Vec<String> = s.iter().map(quoted).collect();
    let toml = replicated(&servers, "read = \"round-robin\"");
    let (p, _) = proxy_with("proxy-spread-rr", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    let before: Vec<u64> = s.iter().map(|b| requests(&mut c, &addr(b))).collect();
    for _ in 0..30 {
        assert_eq!(reply(&mut c, b"get k\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
    }
    for (b, was) in s.iter().zip(before) {
        assert_eq!(requests(&mut c, &addr(b)) - was, 10, "{}", addr(b));
    }
    // The admin key names every replica a read may take.
    let route = reply(&mut c, b"get __mcrouter__.route(get,k)\r\n");
    assert!(s.iter().all(|b| route.contains(&addr(b))), "{route}");
}

#[test]
fn nearest_reads_go_to_the_replica_that_answers_soonest() {
    let s = backends(Kind::Kura, 2);
    let far = kura_testkit::relay::delay::start(&[addr(&s[0])], Duration::from_millis(40))
        .expect("delay relay");
    let servers = [format!("\"{}\"", far[0]), quoted(&s[1])];
    let toml = replicated(&servers, "read = \"nearest\"");
    let (p, _) = proxy_with("proxy-spread-nearest", &toml);
    let mut c = p.connect();
    // Writes go to both and measure both.
    for i in 0..5 {
        let r = reply(&mut c, format!("set k{i} 0 0 1\r\nx\r\n").as_bytes());
        assert_eq!(r, "STORED\r\n");
    }
    let (far_was, near_was) = (requests(&mut c, &far[0]), requests(&mut c, &addr(&s[1])));
    for i in 0..20 {
        let r = reply(&mut c, format!("get k{}\r\n", i % 5).as_bytes());
        assert!(r.starts_with("VALUE"), "{r}");
    }
    assert_eq!(requests(&mut c, &far[0]), far_was);
    assert_eq!(requests(&mut c, &addr(&s[1])) - near_was, 20);
    let route = reply(&mut c, b"get __mcrouter__.route(get,k0)\r\n");
    assert!(
        route.contains(&addr(&s[1])) && !route.contains(&far[0]),
        "{route}"
    );
}

/// A miss on one replica tries the next; the first hit answers, else the
/// miss (a replica that cannot answer leaves the miss standing).
fn a_miss_tries_the_next_replica(kind: Kind, name: &str) {
    let mut s = backends(kind, 2);
    let servers: Vec<String> = s.iter().map(quoted).collect();
    let toml = replicated(&servers, "miss_failover = true");
    let (p, _) = proxy_with(name, &toml);
    let mut c = p.connect();
    // Written straight to one replica each: as after a replica's restart.
    let mut second = s[1].connect();
    assert_eq!(
        reply(&mut second, b"set only2 0 0 1\r\nb\r\n"),
        "STORED\r\n"
    );
    let mut first = s[0].connect();
    assert_eq!(reply(&mut first, b"set only1 0 0 1\r\na\r\n"), "STORED\r\n");
    assert_eq!(
        reply(&mut c, b"get only2\r\n"),
        "VALUE only2 0 1\r\nb\r\nEND\r\n"
    );
    assert!(reply(&mut c, b"gets only2\r\n").starts_with("VALUE only2 0 1 "));
    let mg = common::proxy::ask(&mut c, b"mg only2 v\r\n", b"\r\nb\r\n");
    assert_eq!(mg, b"VA 1\r\nb\r\n");
    // A multi-get: each key's miss tries the next replica, in its place.
    let multi = common::proxy::ask(&mut c, b"get nowhere only2 only1\r\n", b"END\r\n");
    assert_eq!(
        String::from_utf8_lossy(&multi),
        "VALUE only2 0 1\r\nb\r\nVALUE only1 0 1\r\na\r\nEND\r\n"
    );
    assert_eq!(reply(&mut c, b"get nowhere\r\n"), "END\r\n");
    // A touch is no retrieval: it does not fail over.
    assert_eq!(reply(&mut c, b"touch only2 0\r\n"), "NOT_FOUND\r\n");
    // Failovers: get, gets, mg, the multi-get's two misses, get nowhere.
    assert_eq!(stat(&mut c, "pool:r:miss_failovers"), 6);
    // The second replica gone: the first's miss stands, not an error.
    s.pop();
    drop(second);
    assert_eq!(reply(&mut c, b"get only2\r\n"), "END\r\n");
    assert_eq!(
        reply(&mut c, b"get only1\r\n"),
        "VALUE only1 0 1\r\na\r\nEND\r\n"
    );
}

#[test]
fn a_miss_tries_the_next_kura_replica() {
    a_miss_tries_the_next_replica(Kind::Kura, "proxy-miss-failover-kura");
}

#[test]
fn a_miss_tries_the_next_memcached_replica() {
    if common::proxy::have("/usr/bin/memcached", "memcached") {
        a_miss_tries_the_next_replica(Kind::Memcached, "proxy-miss-failover-memcached");
    }
}

/// Replica B (of three, `write = "majority"`, reads round-robin) stops,
/// is marked down, misses a write the other two acknowledge and comes
/// back holding the older value: no read ever answers it. With
/// `miss_failover` every read answers the newest value (B, emptied of the
/// key by its journal's replay, passes its miss on); without, B's turn
/// may answer a miss.
fn flaps(kind: Kind, name: &str, miss_failover: bool) {
    let s = backends(kind, 3);
    let servers: Vec<String> = s.iter().map(quoted).collect();
    let settings =
        format!("write = \"majority\"\nread = \"round-robin\"\nmiss_failover = {miss_failover}");
    let (p, _) = proxy_with(name, &replicated(&servers, &settings));
    let mut c = p.connect();
    let b = &s[1];
    let serving = format!("backend:{}:serving", addr(b));
    let mut k = Latest::new("flap");
    let newest = |k: &Latest, c: &mut std::net::TcpStream| {
        let got = k.check(c);
        if miss_failover || got.is_some() {
            assert_eq!(
                got,
                Some(k.acked),
                "a read after v{} was acknowledged",
                k.acked
            );
        }
    };
    for _ in 0..FLAPS {
        reading_until(&mut c, &k, "B serving", |c| stat(c, &serving) == 1);
        k.set_acked(&mut c);
        for _ in 0..6 {
            assert_eq!(k.check(&mut c), Some(k.acked));
        }
        signal(b, libc::SIGSTOP);
        // Reads of a key never written take B's turn until it is down.
        until_down(&mut c, &addr(b), "never-written");
        // Acknowledged by the other two; journaled for B, which holds the
        // version before.
        k.set_acked(&mut c);
        signal(b, libc::SIGCONT);
        for _ in 0..6 {
            newest(&k, &mut c);
        }
    }
    reading_until(&mut c, &k, "B serving", |c| stat(c, &serving) == 1);
    for _ in 0..6 {
        newest(&k, &mut c);
    }
}

#[test]
fn a_returning_replica_serves_no_stale_read_under_round_robin() {
    flaps(Kind::Kura, "proxy-spread-flaps", false);
}

#[test]
fn a_returning_replica_passes_its_miss_on_under_round_robin() {
    flaps(Kind::Kura, "proxy-spread-flaps-miss", true);
}

#[test]
fn a_returning_memcached_replica_serves_no_stale_read_under_round_robin() {
    if common::proxy::have("/usr/bin/memcached", "memcached") {
        flaps(Kind::Memcached, "proxy-spread-flaps-memcached", true);
    }
}
