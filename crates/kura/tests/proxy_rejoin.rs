//! No stale reads on rejoin (issue 18, mcrouter's #202): set v1, the
//! backend becomes unreachable, delete, set v2, the backend returns still
//! holding v1: a get through the proxy answers v2 or a miss, never v1.
//! With a backend stopped (SIGSTOP, several flaps), killed and restarted
//! on its data dir, the proxy itself restarted in between (the journal is
//! on disk), and the journal's overflow policies.

mod common;

use std::time::{Duration, Instant};

use common::proxy::{
    change_while_away, config, keys_on, never_stale, proxy_on, reply, set_when_up, signal, stat,
    until_down, Kind,
};
use common::Server;

const HEALTH: &str = "request_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200";

/// A durable backend acknowledges a write once it is in its log, so a
/// SIGKILL right after loses nothing.
const ALWAYS: &[&str] = &["--fsync", "always"];

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

/// The config and journal dir of a proxy in front of `servers`, as the
/// proxy's arguments.
fn proxy_args(name: &str, servers: &[String], health: &str) -> Vec<String> {
    let dir = common::tempdir(name);
    let cfg = config(&dir, servers, health);
    let journal = dir.join("journal");
    vec![
        "--config".into(),
        cfg.to_str().unwrap().into(),
        "--journal-dir".into(),
        journal.to_str().unwrap().into(),
    ]
}

fn start(args: &[String]) -> Server {
    start_on(common::free_port(), args)
}

fn start_on(port: u16, args: &[String]) -> Server {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    proxy_on(port, &args)
}

/// The files of a proxy's journal dir (from its arguments).
fn journal_files(args: &[String]) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(&args[3])
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

#[test]
fn a_stopped_backend_never_serves_what_changed_while_it_was_away() {
    let a = common::proxy::backend(Kind::Kura);
    let b = common::proxy::backend(Kind::Kura);
    let servers = vec![addr(&a), addr(&b)];
    let args = proxy_args("proxy-rejoin-stop", &servers, HEALTH);
    let p = start(&args);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 2, "flap");
    for flap in 0..3 {
        let v1 = format!("v1-{flap}");
        set_when_up(&mut c, &keys[0], &v1);
        signal(&b, libc::SIGSTOP);
        until_down(&mut c, &servers[1], &keys[1]);
        // Never sent (the backend is down): journaled instead.
        change_while_away(&mut c, &keys[0]);
        assert!(stat(&mut c, &format!("backend:{}:journal_keys", servers[1])) >= 1);
        signal(&b, libc::SIGCONT);
        never_stale(&mut c, &keys[0], &v1);
        assert_eq!(
            stat(&mut c, &format!("backend:{}:journal_keys", servers[1])),
            0
        );
    }
    assert!(stat(&mut c, &format!("backend:{}:down_transitions", servers[1])) >= 3);
}

#[test]
fn a_killed_backend_restarted_on_its_data_never_serves_the_old_value() {
    let a = common::proxy::backend(Kind::Kura);
    let bdir = common::tempdir("proxy-rejoin-kill-data");
    let b = Server::start(&bdir, ALWAYS);
    let bport = b.port;
    let servers = vec![addr(&a), addr(&b)];
    let args = proxy_args("proxy-rejoin-kill", &servers, HEALTH);
    let p = start(&args);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 3, "kill");
    set_when_up(&mut c, &keys[0], "v1");
    set_when_up(&mut c, &keys[2], "kept");
    b.kill();
    assert!(reply(&mut c, format!("delete {}\r\n", keys[0]).as_bytes()).starts_with("SERVER_ERROR"));
    assert!(reply(
        &mut c,
        format!("set {} 0 0 2\r\nv2\r\n", keys[0]).as_bytes()
    )
    .starts_with("SERVER_ERROR"));
    let _b = Server::start_on_port(&bdir, bport, ALWAYS);
    never_stale(&mut c, &keys[0], "v1");
    // Only the journaled key went: the others are still there.
    assert_eq!(
        reply(&mut c, format!("get {}\r\n", keys[2]).as_bytes()),
        format!("VALUE {} 0 4\r\nkept\r\nEND\r\n", keys[2])
    );
}

#[test]
fn the_journal_survives_a_proxy_restart_between_the_delete_and_the_return() {
    let a = common::proxy::backend(Kind::Kura);
    let bdir = common::tempdir("proxy-rejoin-restart-data");
    let b = Server::start(&bdir, ALWAYS);
    let bport = b.port;
    let servers = vec![addr(&a), addr(&b)];
    let args = proxy_args("proxy-rejoin-restart", &servers, HEALTH);
    let pport = common::free_port();
    let p = start_on(pport, &args);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 1, "restart");
    set_when_up(&mut c, &keys[0], "v1");
    b.kill();
    assert!(reply(&mut c, format!("delete {}\r\n", keys[0]).as_bytes()).starts_with("SERVER_ERROR"));
    drop(c);
    p.kill();
    let b = Server::start_on_port(&bdir, bport, ALWAYS);
    // The backend holds v1 again, as its data dir had it.
    let mut direct = b.connect();
    assert_eq!(
        reply(&mut direct, format!("get {}\r\n", keys[0]).as_bytes()),
        format!("VALUE {} 0 2\r\nv1\r\nEND\r\n", keys[0])
    );
    let p = start_on(pport, &args);
    let mut c = p.connect();
    never_stale(&mut c, &keys[0], "v1");
    assert_eq!(
        reply(&mut direct, format!("get {}\r\n", keys[0]).as_bytes()),
        "END\r\n"
    );
}

#[test]
fn an_overflowed_journal_flushes_the_backend_or_keeps_it_out() {
    for policy in ["flush", "keep-out"] {
        let a = common::proxy::backend(Kind::Kura);
        let bdir = common::tempdir("proxy-overflow-data");
        let b = Server::start(&bdir, ALWAYS);
        let bport = b.port;
        let servers = vec![addr(&a), addr(&b)];
        let health = format!("{HEALTH}\njournal_max_keys = 2\njournal_overflow = \"{policy}\"");
        let args = proxy_args("proxy-overflow", &servers, &health);
        let p = start(&args);
        let mut c = p.connect();
        let keys = keys_on(&servers, 1, 6, "of");
        for k in &keys {
            set_when_up(&mut c, k, "old");
        }
        b.kill();
        for k in &keys[..4] {
            assert!(reply(&mut c, format!("delete {k}\r\n").as_bytes()).starts_with("SERVER_ERROR"));
        }
        assert_eq!(
            stat(
                &mut c,
                &format!("backend:{}:journal_overflowed", servers[1])
            ),
            1
        );
        let _b = Server::start_on_port(&bdir, bport, ALWAYS);
        if policy == "flush" {
            // Flushed: even the keys never journaled are gone.
            for k in &keys {
                never_stale(&mut c, k, "old");
            }
        } else {
            std::thread::sleep(Duration::from_millis(500));
            let r = reply(&mut c, format!("get {}\r\n", keys[5]).as_bytes());
            assert!(r.contains("rejoining"), "{r}");
            // The operator decides: the journal file removed lets it in.
            for f in journal_files(&args) {
                std::fs::remove_file(f).unwrap();
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let r = reply(&mut c, format!("get {}\r\n", keys[5]).as_bytes());
                if r.starts_with("VALUE") {
                    break;
                }
                assert!(Instant::now() < deadline, "{r}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// mcrouter's #202 through a replicated pool: reads go to the first replica
/// and fail over to the second. Set v1 on both, the first stops, delete and
/// set v2 (the second takes them, the first's are journaled), reads fail
/// over and see v2; the first returns still holding v1, and from then on a
/// get answers v2 or a miss, never v1 (the journal's delete reached it
/// before any read did).
#[test]
fn a_replica_that_returns_to_a_replicated_pool_never_serves_the_old_value() {
    let a = common::proxy::backend(Kind::Kura);
    let b = common::proxy::backend(Kind::Kura);
    let dir = common::tempdir("proxy-rejoin-replicated");
    let cfg = dir.join("proxy.toml");
    std::fs::write(
        &cfg,
        format!(
            "default_pool = \"r\"\n[pools.r1]\nservers = [\"{}\"]\n[pools.r2]\nservers = [\"{}\"]\n\
             [pools.r]\nreplicas = [\"r1\", \"r2\"]\n[health]\n{HEALTH}\n",
            addr(&a),
            addr(&b)
        ),
    )
    .unwrap();
    let journal = dir.join("journal");
    let p = common::proxy::proxy(&[
        "--config",
        cfg.to_str().unwrap(),
        "--journal-dir",
        journal.to_str().unwrap(),
    ]);
    let mut c = p.connect();
    let first = addr(&a);
    for flap in 0..2 {
        let v1 = format!("v1-{flap}");
        set_when_up(&mut c, "k", &v1);
        assert_eq!(
            reply(&mut a.connect(), b"get k\r\n"),
            format!("VALUE k 0 4\r\n{v1}\r\nEND\r\n")
        );
        signal(&a, libc::SIGSTOP);
        let deadline = Instant::now() + Duration::from_secs(20);
        while stat(&mut c, &format!("backend:{first}:down")) == 0 {
            // Reads fail over to the second replica meanwhile.
            let r = reply(&mut c, b"get k\r\n");
            assert!(r.starts_with("SERVER_ERROR") || r.contains(&v1), "{r}");
            assert!(Instant::now() < deadline, "never marked down");
        }
        // The first replica is away: its share of the writes is journaled.
        reply(&mut c, b"delete k\r\n");
        reply(&mut c, b"set k 0 0 2\r\nv2\r\n");
        assert_eq!(
            reply(&mut b.connect(), b"get k\r\n"),
            "VALUE k 0 2\r\nv2\r\nEND\r\n"
        );
        assert_eq!(reply(&mut c, b"get k\r\n"), "VALUE k 0 2\r\nv2\r\nEND\r\n");
        assert!(stat(&mut c, &format!("backend:{first}:journal_keys")) >= 1);
        signal(&a, libc::SIGCONT);
        // Back: until the proxy has replayed its journal there and routes
        // reads to it again, and for 50 reads after, never v1.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut back = 0;
        while back < 50 {
            let r = reply(&mut c, b"get k\r\n");
            assert!(
                !r.contains(&v1),
                "stale read after the replica returned: {r}"
            );
            assert!(
                r == "END\r\n"
                    || r == "VALUE k 0 2\r\nv2\r\nEND\r\n"
                    || r.starts_with("SERVER_ERROR"),
                "{r}"
            );
            // Back once it is up and its journal replayed.
            if back > 0
                || (stat(&mut c, &format!("backend:{first}:down")) == 0
                    && stat(&mut c, &format!("backend:{first}:journal_keys")) == 0)
            {
                back += 1;
            }
            assert!(Instant::now() < deadline, "the replica never came back");
        }
        // What the first replica itself holds now: v1 is gone.
        let held = reply(&mut a.connect(), b"get k\r\n");
        assert!(!held.contains(&v1), "{held}");
    }
}
