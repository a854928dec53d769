//! Invalidation subscriptions (`mt`, docs/protocol-extensions.md): a
//! subscribed connection hears `IV <key>` for the keys it read when
//! another connection changes them, `IV *` on a flush, nothing for keys it
//! did not read; a subscriber that does not read is bounded.

mod common;

use std::time::Duration;

use common::{Client, TestServer};

const QUIET: Duration = Duration::from_millis(100);

/// The `stats` figure `name`.
fn stat(c: &mut Client, name: &str) -> u64 {
    c.send(b"stats\r\n");
    let text = String::from_utf8(c.read_until(b"END\r\n")).expect("utf-8");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no stat {name}"))
}

fn subscribed(s: &TestServer) -> Client {
    let mut c = s.connect();
    c.roundtrip(b"mt\r\n", b"HD\r\n");
    c
}

#[test]
fn a_reader_hears_of_changes_to_the_keys_it_read_and_only_those() {
    let s = TestServer::start();
    let mut w = s.connect();
    w.roundtrip(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n");
    w.roundtrip(b"set b 0 0 1\r\n2\r\n", b"STORED\r\n");
    let mut r = subscribed(&s);
    r.roundtrip(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    // b was never read here: its change is not heard.
    w.roundtrip(b"set b 0 0 1\r\n3\r\n", b"STORED\r\n");
    r.expect_silence(QUIET);
    w.roundtrip(b"set a 0 0 1\r\n4\r\n", b"STORED\r\n");
    assert_eq!(r.read_exact(6), b"IV a\r\n");
    r.expect_silence(QUIET);
    // Heard once: until read again, further changes are not sent.
    w.roundtrip(b"set a 0 0 1\r\n5\r\n", b"STORED\r\n");
    r.expect_silence(QUIET);
    // Meta reads track too, and every kind of change is heard.
    r.roundtrip(b"mg a v\r\n", b"VA 1\r\n5\r\n");
    w.roundtrip(b"incr a 1\r\n", b"6\r\n");
    assert_eq!(r.read_exact(6), b"IV a\r\n");
    r.roundtrip(b"get a\r\n", b"VALUE a 0 1\r\n6\r\nEND\r\n");
    w.roundtrip(b"touch a 100\r\n", b"TOUCHED\r\n");
    assert_eq!(r.read_exact(6), b"IV a\r\n");
    r.roundtrip(
        b"get a b\r\n",
        b"VALUE a 0 1\r\n6\r\nVALUE b 0 1\r\n3\r\nEND\r\n",
    );
    w.roundtrip(b"delete b\r\n", b"DELETED\r\n");
    assert_eq!(r.read_exact(6), b"IV b\r\n");
    w.roundtrip(b"append a 0 0 1\r\nx\r\n", b"STORED\r\n");
    assert_eq!(r.read_exact(6), b"IV a\r\n");
    r.expect_silence(QUIET);
}

#[test]
fn misses_are_not_tracked_and_a_connection_without_mt_hears_nothing() {
    let s = TestServer::start();
    let mut w = s.connect();
    let mut plain = s.connect();
    let mut r = subscribed(&s);
    r.roundtrip(b"get nothing\r\n", b"END\r\n");
    r.roundtrip(b"mg nothing v\r\n", b"EN\r\n");
    w.roundtrip(b"set nothing 0 0 1\r\n1\r\n", b"STORED\r\n");
    r.expect_silence(QUIET);
    plain.roundtrip(b"get nothing\r\n", b"VALUE nothing 0 1\r\n1\r\nEND\r\n");
    w.roundtrip(b"delete nothing\r\n", b"DELETED\r\n");
    plain.expect_silence(QUIET);
    assert_eq!(stat(&mut w, "tracking_keys"), 0);
}

#[test]
fn a_flush_is_iv_star_and_mt_off_stops_the_stream() {
    let s = TestServer::start();
    let mut w = s.connect();
    w.roundtrip(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n");
    let mut r = subscribed(&s);
    let mut idle = subscribed(&s);
    r.roundtrip(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    w.roundtrip(b"flush_all\r\n", b"OK\r\n");
    assert_eq!(r.read_exact(6), b"IV *\r\n");
    // Every subscriber hears a flush, whatever it read.
    assert_eq!(idle.read_exact(6), b"IV *\r\n");
    w.roundtrip(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n");
    r.expect_silence(QUIET);
    r.roundtrip(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
    r.roundtrip(b"mt off\r\n", b"HD\r\n");
    w.roundtrip(b"set a 0 0 1\r\n2\r\n", b"STORED\r\n");
    r.expect_silence(QUIET);
    assert_eq!(stat(&mut w, "tracking_clients"), 1);
    drop(idle);
    r.roundtrip(b"mt bogus\r\n", b"CLIENT_ERROR bad command line format\r\n");
}

#[test]
fn binary_keys_come_back_in_base64() {
    let s = TestServer::start();
    let mut w = s.connect();
    // "a b" is not a text key; meta carries it in base64.
    w.roundtrip(b"ms YSBi 1 b\r\nx\r\n", b"HD\r\n");
    let mut r = subscribed(&s);
    r.roundtrip(b"mg YSBi b v\r\n", b"VA 1\r\nx\r\n");
    w.roundtrip(b"md YSBi b\r\n", b"HD\r\n");
    assert_eq!(r.read_exact(11), b"IV YSBi b\r\n");
}

/// A subscriber that stops reading while the keys it read change: its
/// queue stops at its bound, and when it reads again it gets `IV *` and no
/// individual lines; its keys are forgotten.
#[test]
fn a_subscriber_that_does_not_read_is_bounded_and_gets_iv_star() {
    let s = TestServer::start();
    let mut w = s.connect();
    let key = |i: usize| format!("{i:0>200}");
    let n = 2000; // 2000 lines of 207 bytes: past the 256 KiB queue
    let mut sets = Vec::new();
    for i in 0..n {
        sets.extend_from_slice(format!("set {} 0 0 1 noreply\r\nv\r\n", key(i)).as_bytes());
    }
    let mut batch = sets.clone();
    let big = vec![b'x'; 1_000_000];
    batch.extend_from_slice(b"set big 0 0 1000000\r\n");
    batch.extend_from_slice(&big);
    batch.extend_from_slice(b"\r\n");
    w.send(&batch);
    assert_eq!(w.read_exact(8), b"STORED\r\n");

    let mut r = subscribed(&s);
    for i in 0..n {
        r.send(format!("mg {} q\r\n", key(i)).as_bytes());
    }
    r.send(b"mn\r\n");
    let hits = r.read_until(b"MN\r\n");
    assert_eq!(hits.len(), n * 4 + 4);
    assert_eq!(stat(&mut w, "tracking_keys"), n as u64);
    // Forty 1 MB replies, far more than the sockets can hold: once the
    // first get has run, the subscriber's connection is inside a batch of
    // requests it cannot finish before the test reads, so invalidations
    // queue until then.
    let gets = 40;
    let hits = stat(&mut w, "get_hits");
    for _ in 0..gets {
        r.send(b"get big\r\n");
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stat(&mut w, "get_hits") == hits {
        assert!(std::time::Instant::now() < deadline, "the gets never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Every key it read changes (but `big`, which the gets after the
    // `IV *` may track again).
    sets.extend_from_slice(b"mn\r\n");
    w.send(&sets);
    assert_eq!(w.read_exact(4), b"MN\r\n");
    // Now it reads: all its replies, then one `IV *` and nothing else.
    let one = [b"VALUE big 0 1000000\r\n", &big[..], b"\r\nEND\r\n"].concat();
    // (`IV *` goes between two replies, wherever the connection was.)
    let (mut replies, mut stars) = (0, 0);
    while replies < gets || stars == 0 {
        let head = r.read_exact(6);
        if head == b"IV *\r\n" {
            stars += 1;
            continue;
        }
        assert_eq!(String::from_utf8_lossy(&head), "VALUE ");
        assert!(
            r.read_exact(one.len() - 6) == one[6..],
            "a reply was garbled"
        );
        replies += 1;
    }
    assert_eq!(stars, 1);
    r.expect_silence(QUIET);
    assert_eq!(stat(&mut w, "tracking_overflows"), 1);
    // The 2000 keys are forgotten; `big` may be tracked again by the gets
    // that came after the `IV *`.
    assert!(stat(&mut w, "tracking_keys") <= 1);
    // Still subscribed: what it reads now is heard again.
    r.roundtrip(b"get big\r\n", &one);
    w.roundtrip(b"delete big\r\n", b"DELETED\r\n");
    assert_eq!(r.read_exact(8), b"IV big\r\n");
}

/// Reading more than 100,000 keys forgets them all and says `IV *`.
#[test]
fn past_the_key_bound_the_reader_gets_iv_star() {
    let s = TestServer::start();
    let mut w = s.connect();
    let n = 100_001;
    let mut batch = Vec::new();
    for i in 0..n {
        batch.extend_from_slice(format!("ms k{i} 1 q\r\nv\r\n").as_bytes());
    }
    batch.extend_from_slice(b"mn\r\n");
    w.send(&batch);
    assert_eq!(w.read_exact(4), b"MN\r\n");
    let mut r = subscribed(&s);
    let mut reads = Vec::new();
    for i in 0..n {
        reads.extend_from_slice(format!("mg k{i} q\r\n").as_bytes());
    }
    reads.extend_from_slice(b"mn\r\n");
    r.send(&reads);
    // Every hit's `HD`, the `MN`, and one `IV *` somewhere between replies.
    let got = r.read_exact(n * 4 + 4 + 6);
    let star = got.windows(6).filter(|w| w == b"IV *\r\n").count();
    assert_eq!(star, 1);
    let hd = got.windows(4).filter(|w| w == b"HD\r\n").count();
    assert_eq!(hd, n);
    r.expect_silence(QUIET);
    let tracked = stat(&mut w, "tracking_keys");
    assert!(tracked <= 100_000, "{tracked} keys tracked");
    // What it read after the bound is tracked: k100000 was the last.
    w.roundtrip(b"md k100000 q\r\nmn\r\n", b"MN\r\n");
    assert_eq!(r.read_exact(12), b"IV k100000\r\n");
}

/// With `--data-dir` the update log's sink is attached first; the
/// subscription's observer hears the same changes beside it, and the log
/// still records them (the value survives a restart).
#[test]
fn subscriptions_work_beside_the_update_log() {
    let dir = std::env::temp_dir().join(format!("kura-tracking-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let s = TestServer::with(|c| c.data_dir = Some(dir.clone()));
        let mut w = s.connect();
        w.roundtrip(b"set a 0 0 1\r\n1\r\n", b"STORED\r\n");
        let mut r = subscribed(&s);
        r.roundtrip(b"get a\r\n", b"VALUE a 0 1\r\n1\r\nEND\r\n");
        w.roundtrip(b"set a 0 0 1\r\n2\r\n", b"STORED\r\n");
        assert_eq!(r.read_exact(6), b"IV a\r\n");
    }
    let s = TestServer::with(|c| c.data_dir = Some(dir.clone()));
    s.connect()
        .roundtrip(b"get a\r\n", b"VALUE a 0 1\r\n2\r\nEND\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
