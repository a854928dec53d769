//! `rejoin = "caught-up"` (issue 18): a pool of kura replicas gets the
//! writes it missed from its primary, not from the proxy, so the proxy's
//! journal has nothing for it; instead the proxy reads from a replica only
//! while its `stats` say it is caught up with its primary. Reads go to the
//! replica first and fail over to the primary; writes go to the primary.
//! Set v1, the replica loses its primary (cut off, or killed and restarted
//! on its data dir while the primary is away from it), delete and set v2:
//! a get through the proxy answers v2, never v1, and the replica serves
//! again once it has caught up. With the journal alone, the same
//! sequence reads v1 (the case this mode exists for).

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::cluster::{caught_up, replica_of, replicaof, wait_for};
use common::proxy::{proxy, reply, stat};
use common::Server;

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

/// A proxy whose reads go to `replica` then `primary`, and writes to
/// `primary`; the replica's pool rejoins by `rejoin`.
fn proxy_over(name: &str, primary: &str, replica: &str, rejoin: &str) -> Server {
    let dir = common::tempdir(name);
    let text = format!(
        "default_pool = \"primary\"\n\
         [pools.primary]\nservers = [\"{primary}\"]\n\
         [pools.replica]\nservers = [\"{replica}\"]\nrejoin = \"{rejoin}\"\n\
         [pools.reads]\nreplicas = [\"replica\", \"primary\"]\n\
         [[routes]]\nprefix = \"\"\npool = \"primary\"\nread_pool = \"reads\"\n\
         [health]\nrequest_timeout_ms = 2000\nconnect_timeout_ms = 2000\nfailure_limit = 2\n\
         probe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200\ncatch_up_check_ms = 100\n"
    );
    let cfg = dir.join("proxy.toml");
    std::fs::write(&cfg, text).unwrap();
    proxy(&["--config", cfg.to_str().unwrap()])
}

/// An in-memory primary, its replica and a proxy over both.
fn replicated(name: &str, rejoin: &str) -> (Server, Server, Server) {
    let primary = Server::start_in_memory(&[]);
    let replica = replica_of(&primary);
    let p = proxy_over(name, &addr(&primary), &addr(&replica), rejoin);
    (primary, replica, p)
}

fn get(c: &mut TcpStream, key: &str) -> String {
    reply(c, format!("get {key}\r\n").as_bytes())
}

fn value(key: &str, v: &str) -> String {
    format!("VALUE {key} 0 {}\r\n{v}\r\nEND\r\n", v.len())
}

/// Reads `key` through the proxy for `for_ms`: every answer is v2.
fn only_new(c: &mut TcpStream, key: &str, for_ms: u64) {
    let until = Instant::now() + Duration::from_millis(for_ms);
    while Instant::now() < until {
        assert_eq!(get(c, key), value(key, "v2"), "a read through the proxy");
    }
}

/// Whether the proxy serves reads from `backend` (not behind, not down).
fn serving(c: &mut TcpStream, backend: &str) -> bool {
    stat(c, &format!("backend:{backend}:serving")) == 1
}

/// v1 everywhere, read through the proxy from the replica.
fn start_with_v1(c: &mut TcpStream, primary: &Server, replica: &Server, key: &str) {
    wait_for("the replica serving through the proxy", 20, || {
        serving(c, &addr(replica))
    });
    assert_eq!(
        reply(c, format!("set {key} 0 0 2\r\nv1\r\n").as_bytes()),
        "STORED\r\n"
    );
    caught_up(primary, replica);
    let before = stat(c, &format!("backend:{}:requests", addr(replica)));
    assert_eq!(get(c, key), value(key, "v1"));
    assert!(
        stat(c, &format!("backend:{}:requests", addr(replica))) > before,
        "read from the replica"
    );
}

/// Delete and set v2 through the proxy (to the primary).
fn change(c: &mut TcpStream, key: &str) {
    assert_eq!(
        reply(c, format!("delete {key}\r\n").as_bytes()),
        "DELETED\r\n"
    );
    assert_eq!(
        reply(c, format!("set {key} 0 0 2\r\nv2\r\n").as_bytes()),
        "STORED\r\n"
    );
}

#[test]
fn a_replica_cut_off_from_its_primary_is_not_read_until_it_caught_up() {
    let (primary, replica, p) = replicated("proxy-catch-up-cut", "caught-up");
    let mut c = p.connect();
    let r = addr(&replica);
    for flap in 0..3 {
        let key = format!("cut{flap}");
        start_with_v1(&mut c, &primary, &replica, &key);
        // The replica loses its primary (it still answers the proxy).
        let nobody = common::free_port();
        replicaof(&replica, &format!("127.0.0.1:{nobody}"));
        wait_for("the proxy seeing the replica behind", 10, || {
            stat(&mut c, &format!("backend:{r}:behind")) == 1
        });
        change(&mut c, &key);
        only_new(&mut c, &key, 300);
        // Back to its primary: it catches up, then serves again.
        replicaof(&replica, &addr(&primary));
        wait_for("the replica serving again", 20, || serving(&mut c, &r));
        let before = stat(&mut c, &format!("backend:{r}:requests"));
        only_new(&mut c, &key, 200);
        assert!(
            stat(&mut c, &format!("backend:{r}:requests")) > before,
            "read from the replica again"
        );
    }
}

#[test]
fn a_replica_restarted_on_its_data_away_from_its_primary_never_serves_the_old_value() {
    let primary = Server::start_in_memory(&[]);
    let dir = common::tempdir("proxy-catch-up-restart-data");
    let of = format!("127.0.0.1:{}", primary.port);
    let replica = Server::start(&dir, &["--replica-of", &of, "--fsync", "always"]);
    let (r, rport) = (addr(&replica), replica.port);
    let p = proxy_over("proxy-catch-up-restart", &addr(&primary), &r, "caught-up");
    let mut c = p.connect();
    start_with_v1(&mut c, &primary, &replica, "k");
    let mut rc = replica.connect();
    wait_for("v1 on the replica's disk", 10, || {
        stat(&mut rc, "log_synced_seq") >= stat(&mut rc, "repl_applied_seq")
    });
    replica.kill();
    change(&mut c, "k");
    only_new(&mut c, "k", 300);
    // It comes back holding v1, its primary out of reach for now.
    let nobody = format!("127.0.0.1:{}", common::free_port());
    let replica = Server::start_on_port(&dir, rport, &["--replica-of", &nobody]);
    assert_eq!(
        get(&mut replica.connect(), "k"),
        value("k", "v1"),
        "the replica recovered v1"
    );
    only_new(&mut c, "k", 1000);
    assert_eq!(stat(&mut c, &format!("backend:{r}:behind")), 1);
    replicaof(&replica, &of);
    wait_for("the replica serving again", 20, || serving(&mut c, &r));
    assert_eq!(get(&mut replica.connect(), "k"), value("k", "v2"));
    only_new(&mut c, "k", 200);
}

/// The same cut with the journal alone: nothing was journaled for the
/// replica (no write went to it), so it serves v1. This is why the mode
/// exists, and shows the test above can fail.
#[test]
fn with_the_journal_alone_a_cut_off_replica_serves_the_old_value() {
    let (primary, replica, p) = replicated("proxy-catch-up-journal", "journal");
    let mut c = p.connect();
    start_with_v1(&mut c, &primary, &replica, "k");
    replicaof(&replica, &format!("127.0.0.1:{}", common::free_port()));
    change(&mut c, "k");
    assert_eq!(get(&mut c, "k"), value("k", "v1"));
    assert_eq!(
        stat(&mut c, &format!("backend:{}:behind", addr(&replica))),
        0
    );
}
