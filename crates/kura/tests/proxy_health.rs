//! The proxy's health handling: a blackholed backend (accepts, never
//! answers) is bounded by the request timeout and does not slow the other
//! backends' keys; a backend answering garbage or another request's reply
//! is failed and its connection replaced, and its waiting clients get an
//! error, never someone else's value; a down backend's reads answer a miss
//! under `down_reply = "miss"`.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::proxy::{backends, config, keys_on, proxy, reply, stat, Kind};

/// (A second for a request: short enough for the blackhole's keys, long
/// enough that the live backend's never time out on a loaded machine.)
const HEALTH: &str = "request_timeout_ms = 1000\nconnect_timeout_ms = 1000\nfailure_limit = 3\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 200";

/// A listener that accepts connections and holds them without a byte.
fn blackhole() -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            a.fetch_add(1, Ordering::Relaxed);
            held.push(s);
        }
    });
    (addr, accepted)
}

/// A backend that answers every read with `answer(request bytes)`.
fn liar(answer: fn(&[u8]) -> Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            a.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || {
                let mut s = s;
                let mut b = [0u8; 4096];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&answer(&b[..n])).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

#[test]
fn a_blackholed_backend_is_bounded_by_the_timeout_and_slows_no_other() {
    let good = backends(Kind::Kura, 1);
    let (hole, accepted) = blackhole();
    let servers = vec![format!("127.0.0.1:{}", good[0].port), hole];
    let dir = common::tempdir("proxy-blackhole");
    let cfg = config(&dir, &servers, HEALTH);
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let bad_keys = keys_on(&servers, 1, 10, "bh");
    let good_keys = keys_on(&servers, 0, 200, "ok");
    // The good backend's keys, on their own connection, meanwhile.
    let port = p.port;
    let goods = good_keys.clone();
    let other = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        for k in &goods {
            assert_eq!(
                reply(&mut c, format!("set {k} 0 0 2\r\nok\r\n").as_bytes()),
                "STORED\r\n"
            );
            assert_eq!(
                reply(&mut c, format!("get {k}\r\n").as_bytes()),
                format!("VALUE {k} 0 2\r\nok\r\nEND\r\n")
            );
        }
    });
    let mut c = p.connect();
    for k in &bad_keys {
        let t = Instant::now();
        let r = reply(&mut c, format!("get {k}\r\n").as_bytes());
        assert!(r.starts_with("SERVER_ERROR "), "{r}");
        // 1 s configured; generous for a loaded CI machine.
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }
    other.join().unwrap();
    assert!(accepted.load(Ordering::Relaxed) >= 1);
    let servers_down = stat(&mut c, &format!("backend:{}:down_transitions", servers[1]));
    assert!(servers_down >= 1, "never marked down");
    assert_eq!(stat(&mut c, &format!("backend:{}:errors", servers[0])), 0);
}

#[test]
fn a_backend_that_answers_garbage_or_out_of_step_fails_and_is_replaced() {
    let (garbage, accepted_g) = liar(|_| b"HELLO THERE\r\n".to_vec());
    // A well-formed value reply, but never carrying the request's opaque.
    let (stepper, accepted_s) = liar(|_| b"VA 6 f0 O4000000000\r\nSECRET\r\n".to_vec());
    for (addr, accepted) in [(garbage, accepted_g), (stepper, accepted_s)] {
        let dir = common::tempdir("proxy-liar");
        let cfg = config(
            &dir,
            std::slice::from_ref(&addr),
            "request_timeout_ms = 500\nfailure_limit = 100",
        );
        let p = proxy(&["--config", cfg.to_str().unwrap()]);
        let mut c = p.connect();
        for i in 0..5 {
            let r = reply(&mut c, format!("get k{i}\r\n").as_bytes());
            assert!(r.starts_with("SERVER_ERROR "), "{r}");
            assert!(!r.contains("SECRET"));
        }
        // Every failure closed the connection: new ones were made.
        assert!(
            accepted.load(Ordering::Relaxed) >= 5,
            "{}",
            accepted.load(Ordering::Relaxed)
        );
        // A write it may or may not have applied: the key is journaled and
        // the backend serves nothing until it has been deleted there.
        let r = reply(&mut c, b"set k 0 0 1\r\nx\r\n");
        assert!(r.starts_with("SERVER_ERROR "), "{r}");
        let r = reply(&mut c, b"get k0\r\n");
        assert!(r.contains("rejoining"), "{r}");
        assert_eq!(stat(&mut c, &format!("backend:{addr}:journal_keys")), 1);
    }
}

#[test]
fn a_multi_get_answered_with_a_key_it_did_not_ask_gets_an_error() {
    // Multi-gets go to a backend as one text `get`: a `VALUE` for a key
    // not in it must not reach the client as one of its keys.
    let (addr, _) = liar(|_| b"VALUE other 0 6\r\nSECRET\r\nEND\r\n".to_vec());
    let dir = common::tempdir("proxy-unasked");
    let cfg = config(
        &dir,
        std::slice::from_ref(&addr),
        "request_timeout_ms = 500",
    );
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    for keys in ["a b", "a other", "x y z"] {
        let r = reply(&mut c, format!("get {keys}\r\n").as_bytes());
        if keys.contains("other") {
            assert_eq!(r, "VALUE other 0 6\r\nSECRET\r\nEND\r\n");
        } else {
            assert!(r.starts_with("SERVER_ERROR "), "{keys}: {r}");
            assert!(!r.contains("SECRET"), "{keys}: {r}");
        }
    }
}

#[test]
fn down_reply_miss_answers_reads_of_a_dead_backend_with_a_miss() {
    let good = backends(Kind::Kura, 1);
    let dead = format!("127.0.0.1:{}", common::free_port());
    let servers = vec![format!("127.0.0.1:{}", good[0].port), dead];
    let dir = common::tempdir("proxy-downmiss");
    let cfg = config(&dir, &servers, &format!("{HEALTH}\ndown_reply = \"miss\""));
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    let bad = keys_on(&servers, 1, 5, "d");
    let ok = keys_on(&servers, 0, 1, "o");
    assert_eq!(
        reply(&mut c, format!("set {} 0 0 1\r\nx\r\n", ok[0]).as_bytes()),
        "STORED\r\n"
    );
    for k in &bad {
        assert_eq!(
            reply(&mut c, format!("get {k} {}\r\n", ok[0]).as_bytes()),
            format!("VALUE {} 0 1\r\nx\r\nEND\r\n", ok[0])
        );
        assert_eq!(reply(&mut c, format!("mg {k} v\r\n").as_bytes()), "EN\r\n");
        // Writes still fail.
        assert!(
            reply(&mut c, format!("set {k} 0 0 1\r\nx\r\n").as_bytes()).starts_with("SERVER_ERROR")
        );
    }
}

#[test]
fn a_gutter_pool_takes_a_dead_backends_keys_with_a_short_ttl() {
    let s = backends(Kind::Kura, 2);
    let dead = format!("127.0.0.1:{}", common::free_port());
    let servers = vec![format!("127.0.0.1:{}", s[0].port), dead.clone()];
    let dir = common::tempdir("proxy-gutter");
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [\"{}\", \"{dead}\"]\ngutter = \"g\"\ngutter_ttl = 5\n\
         [pools.g]\nservers = [\"127.0.0.1:{}\"]\n[health]\n{HEALTH}\n",
        servers[0], s[1].port
    );
    let cfg = dir.join("proxy.toml");
    std::fs::write(&cfg, toml).unwrap();
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    let k = &keys_on(&servers, 1, 1, "g")[0];
    // Until the dead backend is marked down its writes fail; then the
    // gutter takes them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while reply(&mut c, format!("set {k} 0 0 1\r\nx\r\n").as_bytes()) != "STORED\r\n" {
        assert!(Instant::now() < deadline, "the gutter never took the write");
    }
    assert_eq!(
        reply(&mut c, format!("get {k}\r\n").as_bytes()),
        format!("VALUE {k} 0 1\r\nx\r\nEND\r\n")
    );
    let mut g = s[1].connect();
    let ttl: i64 = reply(&mut g, format!("mg {k} t\r\n").as_bytes())
        .trim()
        .strip_prefix("HD t")
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=5).contains(&ttl), "{ttl}");
    // Journaled for the dead backend all the same.
    assert!(stat(&mut c, &format!("backend:{dead}:journal_keys")) >= 1);
}
