//! No stale reads on rejoin (issue 18, mcrouter's #202): set v1, the
//! backend becomes unreachable, delete, set v2, the backend returns still
//! holding v1: a get through the proxy answers v2 or a miss, never v1.
//! With a backend stopped (SIGSTOP, several flaps), killed and restarted
//! on its data dir, the proxy itself restarted in between (the journal is
//! on disk), and the journal's overflow policies.

mod common;

use std::time::{Duration, Instant};

use common::proxy::{config, keys_on, proxy_on, reply, signal, stat, Kind};
use common::Server;

const HEALTH: &str = "request_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200";

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

/// Reads `key` through the proxy until it misses (the backend is back and
/// its journal replayed), failing if v1 is ever served.
fn never_stale(c: &mut std::net::TcpStream, key: &str, stale: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = reply(c, format!("get {key}\r\n").as_bytes());
        assert!(!r.contains(stale), "stale read after rejoin: {r}");
        if r == "END\r\n" {
            return;
        }
        assert!(r.starts_with("SERVER_ERROR"), "{r}");
        assert!(
            Instant::now() < deadline,
            "the backend never came back: {r}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sets `key` until the backend takes it (it may still be rejoining).
fn set_when_up(c: &mut std::net::TcpStream, key: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = reply(
            c,
            format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).as_bytes(),
        );
        if r == "STORED\r\n" {
            return;
        }
        assert!(Instant::now() < deadline, "{r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the backend's other keys until the proxy has marked it down.
fn until_down(c: &mut std::net::TcpStream, backend: &str, other_key: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(c, &format!("backend:{backend}:down")) == 0 {
        let r = reply(c, format!("get {other_key}\r\n").as_bytes());
        assert!(r.starts_with("SERVER_ERROR") || r == "END\r\n", "{r}");
        assert!(Instant::now() < deadline, "never marked down");
    }
}

#[test]
fn a_stopped_backend_never_serves_what_changed_while_it_was_away() {
    let a = common::proxy::backend(Kind::Kura);
    let b = common::proxy::backend(Kind::Kura);
    let servers = vec![addr(&a), addr(&b)];
    let dir = common::tempdir("proxy-rejoin-stop");
    let cfg = config(&dir, &servers, HEALTH);
    let journal = dir.join("journal");
    let p = proxy_on(
        common::free_port(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--journal-dir",
            journal.to_str().unwrap(),
        ],
    );
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 2, "flap");
    for flap in 0..3 {
        let v1 = format!("v1-{flap}");
        set_when_up(&mut c, &keys[0], &v1);
        signal(&b, libc::SIGSTOP);
        until_down(&mut c, &servers[1], &keys[1]);
        // Never sent (the backend is down): journaled instead.
        assert!(
            reply(&mut c, format!("delete {}\r\n", keys[0]).as_bytes()).starts_with("SERVER_ERROR")
        );
        assert!(reply(
            &mut c,
            format!("set {} 0 0 2\r\nv2\r\n", keys[0]).as_bytes()
        )
        .starts_with("SERVER_ERROR"));
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
    let b = Server::start(&bdir, &[]);
    let bport = b.port;
    let servers = vec![addr(&a), addr(&b)];
    let dir = common::tempdir("proxy-rejoin-kill");
    let cfg = config(&dir, &servers, HEALTH);
    let journal = dir.join("journal");
    let p = proxy_on(
        common::free_port(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--journal-dir",
            journal.to_str().unwrap(),
        ],
    );
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
    let _b = Server::start_on_port(&bdir, bport, &[]);
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
    let b = Server::start(&bdir, &[]);
    let bport = b.port;
    let servers = vec![addr(&a), addr(&b)];
    let dir = common::tempdir("proxy-rejoin-restart");
    let cfg = config(&dir, &servers, HEALTH);
    let journal = dir.join("journal");
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "--journal-dir",
        journal.to_str().unwrap(),
    ];
    let pport = common::free_port();
    let p = proxy_on(pport, &args);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 1, "restart");
    set_when_up(&mut c, &keys[0], "v1");
    b.kill();
    assert!(reply(&mut c, format!("delete {}\r\n", keys[0]).as_bytes()).starts_with("SERVER_ERROR"));
    drop(c);
    p.kill();
    let b = Server::start_on_port(&bdir, bport, &[]);
    // The backend holds v1 again, as its data dir had it.
    let mut direct = b.connect();
    assert_eq!(
        reply(&mut direct, format!("get {}\r\n", keys[0]).as_bytes()),
        format!("VALUE {} 0 2\r\nv1\r\nEND\r\n", keys[0])
    );
    let p = proxy_on(pport, &args);
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
        let b = Server::start(&bdir, &[]);
        let bport = b.port;
        let servers = vec![addr(&a), addr(&b)];
        let dir = common::tempdir("proxy-overflow");
        let health = format!("{HEALTH}\njournal_max_keys = 2\njournal_overflow = \"{policy}\"");
        let cfg = config(&dir, &servers, &health);
        let journal = dir.join("journal");
        let p = proxy_on(
            common::free_port(),
            &[
                "--config",
                cfg.to_str().unwrap(),
                "--journal-dir",
                journal.to_str().unwrap(),
            ],
        );
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
        let _b = Server::start_on_port(&bdir, bport, &[]);
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
            for e in std::fs::read_dir(&journal).unwrap() {
                std::fs::remove_file(e.unwrap().path()).unwrap();
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
