//! Replication on loopback: a durable primary and in-memory replicas
//! (`--replica-of`) under a mixed load of text, meta and binary writes end
//! holding exactly what the primary holds; a replica restarted gets a full
//! resync, a replica whose primary was killed and restarted goes on with a
//! partial one, and replicas refuse writes.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::cluster::{caught_up, contents, load, replica_of, replicaof, same, wait_for};
use common::{ask, stat, stat_str, tempdir, Server};

#[test]
fn replicas_of_a_durable_primary_end_identical_and_refuse_writes() {
    let dir = tempdir("repl-primary");
    let primary = Server::start(&dir, &["--snapshot-log-size", "0"]);
    load(&primary, 0, 2000);
    // One replica from a full resync of what is there, one from the start.
    let a = replica_of(&primary);
    load(&primary, 1, 2000);
    let b = replica_of(&primary);
    for round in 2..6 {
        load(&primary, round, 2000);
    }
    caught_up(&primary, &a);
    caught_up(&primary, &b);
    let want = contents(&primary, 2000);
    assert!(want.iter().filter(|l| *l != "EN").count() > 1000);
    same(&contents(&a, 2000), &want, "replica a");
    same(&contents(&b, 2000), &want, "replica b");

    // Replicas are read-only, on every protocol.
    let mut c = a.connect();
    let r = ask(&mut c, b"set x 0 0 1\r\nx\r\n", b"\r\n");
    assert!(
        String::from_utf8_lossy(&r).starts_with("SERVER_ERROR this server is a read-only replica"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert_eq!(stat_str(&mut c, "repl_role"), "replica");
    assert_eq!(stat_str(&mut c, "repl_link"), "up");
    let mut p = primary.connect();
    assert_eq!(stat(&mut p, "repl_replicas"), 2);
    assert_eq!(
        stat_str(&mut p, "repl_history"),
        stat_str(&mut c, "repl_history")
    );

    // A flush on the primary reaches the replicas too.
    ask(&mut p, b"flush_all\r\n", b"OK\r\n");
    load(&primary, 7, 500);
    caught_up(&primary, &a);
    same(
        &contents(&a, 2000),
        &contents(&primary, 2000),
        "after a flush",
    );
    a.stop();
    b.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_restarted_replica_resyncs_whole_and_a_restarted_primary_is_followed_on() {
    let dir = tempdir("repl-restart");
    let primary = Server::start(&dir, &["--snapshot-log-size", "0"]);
    load(&primary, 0, 1000);
    let replica = replica_of(&primary);
    caught_up(&primary, &replica);
    // The replica (in memory) comes back empty: a full resync.
    replica.kill();
    load(&primary, 1, 1000);
    let replica = replica_of(&primary);
    caught_up(&primary, &replica);
    let mut r = replica.connect();
    assert_eq!(stat(&mut r, "repl_full_resyncs"), 1);
    // Both full resyncs were sent the one snapshot the first one took.
    let mut p = primary.connect();
    assert_eq!(stat(&mut p, "log_snapshots"), 1);
    assert_eq!(stat(&mut p, "repl_full_resyncs"), 2);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "after a full resync",
    );

    // The primary is killed and started again on its data dir: the replica
    // reconnects and goes on from its last record (a partial resync): no
    // record missing, none applied twice.
    let port = primary.port;
    primary.kill();
    let primary = Server::start_on_port(&dir, port, &["--snapshot-log-size", "0"]);
    load(&primary, 2, 1000);
    caught_up(&primary, &replica);
    let mut r = replica.connect();
    assert_eq!(stat(&mut r, "repl_partial_resyncs"), 1);
    assert_eq!(stat(&mut r, "repl_full_resyncs"), 1);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "after a full resync",
    );
    replica.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_replicate_is_refused() {
    let primary = Server::start_in_memory(&[]);
    let r = ask(&mut primary.connect(), b"replicate - x\r\n", b"\r\n");
    assert_eq!(r, b"CLIENT_ERROR bad command line format\r\n");
    primary.stop();
}

/// A fake primary on a listener: answers `replicate` with CONTINUE, sends
/// `frames`, holds the connection until the replica drops it if `hold`,
/// and returns the line the replica asked with.
fn fake_primary(listener: &std::net::TcpListener, frames: &[u8], hold: bool) -> String {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut asked = Vec::new();
    let mut b = [0u8; 1];
    while !asked.ends_with(b"\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1);
        asked.push(b[0]);
    }
    let asked = String::from_utf8(asked).unwrap();
    let history = "ab".repeat(20);
    let after: u64 = asked
        .trim_end()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    s.write_all(format!("CONTINUE {history} {after}\r\n").as_bytes())
        .unwrap();
    s.write_all(frames).unwrap();
    let mut rest = [0u8; 256];
    while hold && matches!(s.read(&mut rest), Ok(n) if n > 0) {}
    asked
}

/// A log record's bytes (length, CRC, number, a set of `key`).
fn record(seq: u64, key: &str, value: &str) -> Vec<u8> {
    // The log's own encoding, through a scratch log directory.
    let dir = tempdir(&format!("fake-record-{seq}"));
    let mut w = kura_log::LogWriter::open_after(&dir, Default::default(), seq - 1).unwrap();
    w.append(&kura_log::Mutation::Set {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        flags: 0,
        exptime: 0,
        cas: seq,
        stale: false,
        binary_key: false,
    })
    .unwrap();
    w.sync().unwrap();
    let seg = kura_log::segment_files(&dir).unwrap().pop().unwrap().path;
    let bytes = std::fs::read(seg).unwrap()[kura_log::FILE_HEADER_LEN..].to_vec();
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

fn frame(records: &[u8]) -> Vec<u8> {
    let mut f = vec![b'R'];
    f.extend_from_slice(&(records.len() as u32).to_le_bytes());
    f.extend_from_slice(records);
    f
}

/// Waits until the replica's `repl_last_error` says `what`.
fn last_error_says(c: &mut std::net::TcpStream, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let why = stat_str(c, "repl_last_error");
        if why.contains(what) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "repl_last_error {why:?}, not {what:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_damaged_or_out_of_order_record_is_never_applied_and_the_replica_asks_again() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let replica = Server::start_in_memory(&["--replica-of", &format!("127.0.0.1:{port}")]);
    // Record 1 sound, record 2 with a flipped bit in its value.
    let mut two = record(2, "second", "bad");
    let last = two.len() - 1;
    two[last] ^= 0x01;
    let mut first = record(1, "first", "ok");
    first.extend_from_slice(&two);
    assert_eq!(
        fake_primary(&listener, &frame(&first), true),
        "replicate - 0\r\n"
    );
    // The replica applied 1, refused 2, dropped the link and asks again
    // from 1, having the primary's history now.
    // It says why in stats (before it asks again, which waits on us).
    let mut c = replica.connect();
    last_error_says(&mut c, "a damaged record after 1");
    let again = fake_primary(&listener, &frame(&record(3, "third", "gap")), true);
    assert_eq!(again, format!("replicate {} 1\r\n", "ab".repeat(20)));
    last_error_says(&mut c, "record 3 where 2 was next");
    // Record 3 where 2 was next: refused too; asked again from 1.
    let again = fake_primary(&listener, &frame(&record(2, "second", "good")), false);
    assert_eq!(again, format!("replicate {} 1\r\n", "ab".repeat(20)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(&mut c, "repl_applied_seq") < 2 {
        assert!(Instant::now() < deadline, "record 2 never applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = ask(&mut c, b"get first second third\r\n", b"END\r\n");
    assert_eq!(
        String::from_utf8(got).unwrap(),
        "VALUE first 0 2\r\nok\r\nVALUE second 0 4\r\ngood\r\nEND\r\n"
    );
    replica.stop();
}

#[test]
fn a_replica_authenticates_to_a_primary_that_asks_for_it() {
    let dir = tempdir("repl-auth");
    let creds = dir.join("users");
    std::fs::write(&creds, "replicator:s3cret\n").unwrap();
    let data = dir.join("data");
    let creds_arg = creds.to_str().unwrap();
    let primary = Server::start(&data, &["-Y", creds_arg]);
    let mut c = primary.connect();
    ask(
        &mut c,
        b"set a 0 0 17\r\nreplicator s3cret\r\n",
        b"STORED\r\n",
    );
    ask(&mut c, b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    let target = format!("127.0.0.1:{}", primary.port);
    let good =
        Server::start_in_memory(&["--replica-of", &target, "--replica-auth-file", creds_arg]);
    let bad = Server::start_in_memory(&["--replica-of", &target]);
    let mut g = good.connect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(&mut g, "repl_applied_seq") < 1 {
        assert!(Instant::now() < deadline, "the replica never applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        ask(&mut g, b"get k\r\n", b"END\r\n"),
        b"VALUE k 0 1\r\nv\r\nEND\r\n"
    );
    // Without credentials: never linked, nothing applied.
    std::thread::sleep(Duration::from_millis(500));
    let mut b = bad.connect();
    assert_eq!(stat_str(&mut b, "repl_link"), "down");
    assert_eq!(stat(&mut b, "repl_applied_seq"), 0);
    good.stop();
    bad.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replica_that_sends_garbage_is_cut_off_and_the_primary_goes_on() {
    let dir = tempdir("repl-garbage");
    let primary = Server::start(&dir, &[]);
    let mut c = primary.connect();
    ask(&mut c, b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    let mut s = primary.connect();
    s.write_all(b"replicate - 0\r\n").unwrap();
    // Not an ack line: a megabyte without a newline.
    let junk = vec![b'x'; 1 << 20];
    let _ = s.write_all(&junk);
    let mut got = Vec::new();
    let mut b = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
        assert!(Instant::now() < deadline, "the primary kept the connection");
    }
    assert!(
        got.starts_with(b"FULLRESYNC "),
        "{:?}",
        &got[..got.len().min(40)]
    );
    // Unharmed: it serves, and a real replica follows it.
    let mut p = primary.connect();
    assert_eq!(stat(&mut p, "repl_replicas"), 0);
    let replica = replica_of(&primary);
    caught_up(&primary, &replica);
    assert_eq!(
        ask(&mut replica.connect(), b"get k\r\n", b"END\r\n"),
        b"VALUE k 0 1\r\nv\r\nEND\r\n"
    );
    replica.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A primary that is not there, that hangs up on every replica, or that
/// never answers is retried with a growing wait (100 ms, doubling, 10 s at
/// most), never in a tight loop, and the replica says why in
/// `repl_last_error`; once a primary is there, the replica follows it.
#[test]
fn a_primary_that_is_gone_hangs_up_or_is_silent_is_retried_with_backoff() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    // Nothing listening: the connection is refused.
    let gone = common::free_port();
    let replica = Server::start_in_memory(&["--replica-of", &format!("127.0.0.1:{gone}")]);
    let mut r = replica.connect();
    last_error_says(&mut r, "cannot connect to");
    assert_eq!(stat_str(&mut r, "repl_link"), "down");

    // A listener that hangs up on whoever connects, counting them: over
    // four seconds, waits of 0.1, 0.2, 0.4, 0.8 and 1.6 s make about six
    // attempts; a replica that did not back off would make thousands.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let (attempts, done) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let hangs_up = {
        let (attempts, done) = (attempts.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        attempts.fetch_add(1, Ordering::Relaxed);
                        drop(s);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        })
    };
    replicaof(&replica, &format!("127.0.0.1:{port}"));
    std::thread::sleep(Duration::from_secs(4));
    let n = attempts.load(Ordering::Relaxed);
    assert!((3..=12).contains(&n), "{n} attempts in 4 s: no backoff");
    last_error_says(&mut r, "closed the connection before it answered");
    done.store(true, Ordering::Relaxed);
    hangs_up.join().unwrap();

    // A listener that takes the connection and says nothing.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    replicaof(&replica, &format!("127.0.0.1:{port}"));
    let (_held, _) = silent.accept().unwrap();
    last_error_says(&mut r, "no answer from the primary within 5s");
    assert_eq!(stat_str(&mut r, "repl_link"), "down");

    // A real primary: followed.
    let primary = Server::start_in_memory(&[]);
    ask(&mut primary.connect(), b"set k 0 0 1\r\nv\r\n", b"\r\n");
    replicaof(&replica, &format!("127.0.0.1:{}", primary.port));
    // (An in-memory primary numbers nothing before its first replica:
    // wait for the key itself.)
    wait_for("the replica following", 30, || {
        common::get(&mut r, "k").as_deref() == Some("v")
    });
    assert_eq!(stat_str(&mut r, "repl_link"), "up");
    drop(r);
    replica.stop();
    primary.stop();
}

/// A replica says its link is up only once its primary has told it how far
/// it has written (the first heartbeat, sent right after the answer), so
/// `repl_link up` with `repl_lag_records 0` always means caught up: kura
/// proxy's `rejoin = "caught-up"` relies on it. A stand-in primary answers
/// the handshake, waits, then sends that heartbeat.
#[test]
fn a_replica_says_its_link_is_up_only_once_it_knows_how_far_behind_it_is() {
    let fake = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = fake.local_addr().unwrap().port();
    let replica = Server::start_in_memory(&["--replica-of", &format!("127.0.0.1:{port}")]);
    let (mut link, _) = fake.accept().unwrap();
    let mut asked = Vec::new();
    let mut b = [0u8; 64];
    while !asked.ends_with(b"\r\n") {
        let n = link.read(&mut b).unwrap();
        assert!(n > 0, "the replica hung up before asking");
        asked.extend_from_slice(&b[..n]);
    }
    assert!(
        asked.starts_with(b"replicate "),
        "{:?}",
        String::from_utf8_lossy(&asked)
    );
    link.write_all(b"CONTINUE 5eed 0\r\n").unwrap();
    // Answered, but how far the primary is, unknown: not up.
    let mut r = replica.connect();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(stat_str(&mut r, "repl_link"), "down");
    // The heartbeat: 7 records written, none applied.
    let mut hb = vec![b'H'];
    hb.extend_from_slice(&7u64.to_le_bytes());
    hb.extend_from_slice(&0u64.to_le_bytes());
    link.write_all(&hb).unwrap();
    wait_for("the link up", 5, || stat_str(&mut r, "repl_link") == "up");
    assert_eq!(stat(&mut r, "repl_lag_records"), 7);
    drop(link);
}
