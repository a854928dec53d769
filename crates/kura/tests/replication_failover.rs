//! Replication with data dirs on the replicas, chains, and failover on
//! loopback: a replica killed in the middle of the stream resumes from its
//! own log (no record missing, none twice); a replica of a replica ends
//! identical; a replica promoted with `replicaof no one` is followed on by
//! the other with a partial resync, and the old primary, restarted as a
//! replica of the new one, drops the writes only it had and ends identical.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cluster::{caught_up, contents, load, same, wait_stat};
use common::{ask, get, kura, stat, stat_str, tempdir, Server};
use kura_log::{LogReader, Record};

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

/// Waits until `server`'s stat `name` is `want`.
/// Every record of the log in `dir`.
fn records(dir: &Path) -> Vec<Record> {
    LogReader::from_seq(dir, 1)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn log_check(dir: &Path) {
    let out = kura()
        .args(["log", "check", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kura log check {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_durable_replica_killed_mid_stream_resumes_from_its_own_log() {
    let (pdir, rdir) = (tempdir("fo-kill-p"), tempdir("fo-kill-r"));
    let primary = Server::start(&pdir, &["--snapshot-log-size", "0"]);
    let first = Server::start(&rdir, &["--replica-of", &addr(&primary)]);
    let replica = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for round in 0..10 {
                load(&primary, round, 1500);
            }
        });
        // Killed once it has applied a good part of the load, while the
        // primary goes on writing.
        let mut c = first.connect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while stat(&mut c, "repl_applied_seq") < 4000 {
            assert!(Instant::now() < deadline, "the replica never got going");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(c);
        first.kill();
        let replica = Server::start(&rdir, &["--replica-of", &addr(&primary)]);
        writer.join().unwrap();
        replica
    });
    caught_up(&primary, &replica);
    same(
        &contents(&replica, 1500),
        &contents(&primary, 1500),
        "the replica restarted",
    );
    let mut c = replica.connect();
    // It went on from its own last record: no full resync in this life.
    assert_eq!(stat(&mut c, "repl_full_resyncs"), 0);
    assert!(stat(&mut c, "repl_partial_resyncs") >= 1);
    drop(c);
    replica.stop();
    primary.stop();
    // Its log is the primary's, record for record: none missing, none twice.
    log_check(&rdir);
    let (ours, theirs) = (records(&rdir), records(&pdir));
    assert!(theirs.len() > 10_000, "{} records", theirs.len());
    assert_eq!(ours.len(), theirs.len());
    let first_diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "the logs differ");
    for d in [pdir, rdir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_replica_of_a_replica_ends_identical_and_a_durable_replica_restarts_from_its_dir() {
    let (pdir, adir) = (tempdir("fo-chain-p"), tempdir("fo-chain-a"));
    let primary = Server::start(&pdir, &["--snapshot-log-size", "0"]);
    load(&primary, 0, 1000);
    let a = Server::start(&adir, &["--replica-of", &addr(&primary)]);
    let b = Server::start_in_memory(&["--replica-of", &addr(&a)]);
    for round in 1..4 {
        load(&primary, round, 1000);
    }
    caught_up(&primary, &a);
    caught_up(&a, &b);
    let want = contents(&primary, 1000);
    same(&contents(&a, 1000), &want, "the replica");
    same(&contents(&b, 1000), &want, "the replica's replica");
    // A replica is read-only to its own replicas' clients too, and says
    // who it streams to.
    let mut c = a.connect();
    assert!(stat_str(&mut c, "repl_replica_0").contains("acked_seq="));
    drop(c);
    // The middle replica restarted on its dir holds everything before it
    // hears from the primary, and goes on from its own last record.
    let port = a.port;
    a.stop();
    load(&primary, 4, 1000);
    let a = Server::start_on_port(&adir, port, &["--replica-of", &addr(&primary)]);
    caught_up(&primary, &a);
    let mut c = a.connect();
    assert_eq!(stat(&mut c, "repl_full_resyncs"), 0);
    drop(c);
    caught_up(&a, &b);
    let want = contents(&primary, 1000);
    same(
        &contents(&b, 1000),
        &want,
        "the replica's replica after a restart",
    );
    b.stop();
    a.stop();
    primary.stop();
    for d in [pdir, adir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_promoted_replica_is_followed_on_and_the_old_primary_drops_what_only_it_had() {
    let dirs = [
        tempdir("fo-promo-p"),
        tempdir("fo-promo-a"),
        tempdir("fo-promo-b"),
    ];
    let flags = ["--snapshot-log-size", "0"];
    let old = Server::start(&dirs[0], &flags);
    let replica = |dir: &Path, of: &Server| {
        Server::start(
            dir,
            &["--snapshot-log-size", "0", "--replica-of", &addr(of)],
        )
    };
    let a = replica(&dirs[1], &old);
    let b = replica(&dirs[2], &old);
    for round in 0..3 {
        load(&old, round, 1000);
    }
    caught_up(&old, &a);
    caught_up(&old, &b);

    // Promote a; b follows it.
    let (mut ca, mut cb) = (a.connect(), b.connect());
    let old_history = stat_str(&mut ca, "repl_history");
    ask(&mut ca, b"replicaof no one\r\n", b"\r\n");
    assert_eq!(stat_str(&mut ca, "repl_role"), "primary");
    assert_ne!(stat_str(&mut ca, "repl_history"), old_history);
    let full_before = stat(&mut cb, "repl_full_resyncs");
    let partial_before = stat(&mut cb, "repl_partial_resyncs");
    let r = ask(
        &mut cb,
        format!("replicaof 127.0.0.1 {}\r\n", a.port).as_bytes(),
        b"\r\n",
    );
    assert_eq!(r, b"OK\r\n");
    wait_stat(&b, "repl_link", "up");
    assert_eq!(stat(&mut cb, "repl_full_resyncs"), full_before);
    assert_eq!(stat(&mut cb, "repl_partial_resyncs"), partial_before + 1);
    assert_eq!(stat_str(&mut cb, "repl_primary"), addr(&a));

    // The old primary, cut off from both, takes writes nobody else sees,
    // then dies.
    let mut co = old.connect();
    for i in 0..50 {
        ask(
            &mut co,
            format!("set only-old-{i} 0 0 3\r\nold\r\nset k{i} 0 0 3\r\nold\r\n").as_bytes(),
            b"STORED\r\nSTORED\r\n",
        );
    }
    drop(co);
    old.kill();

    // The new primary goes on; its replica keeps up.
    ask(&mut ca, b"set after 0 0 3\r\nnew\r\n", b"\r\n");
    load(&a, 3, 1000);
    caught_up(&a, &b);
    let want = contents(&a, 1000);
    same(&contents(&b, 1000), &want, "b following the new primary");

    // The old primary rejoins as a replica of the new one: it cuts its log
    // back to where the histories forked and goes on from there.
    let old = replica(&dirs[0], &a);
    caught_up(&a, &old);
    let mut co = old.connect();
    assert_eq!(stat(&mut co, "repl_full_resyncs"), 0);
    same(&contents(&old, 1000), &want, "the old primary rejoined");
    for i in 0..50 {
        assert_eq!(get(&mut co, &format!("only-old-{i}")), None);
    }
    assert_eq!(get(&mut co, "after").as_deref(), Some("new"));
    drop((co, ca, cb));
    old.stop();
    // And what it keeps on disk is the new history, not its own writes.
    log_check(&dirs[0]);
    let back = Server::start(&dirs[0], &flags);
    let mut c = back.connect();
    assert_eq!(get(&mut c, "only-old-0"), None);
    assert_eq!(get(&mut c, "after").as_deref(), Some("new"));
    drop(c);
    for s in [back, a, b] {
        s.stop();
    }
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn replicaof_at_run_time_turns_servers_around_and_refuses_nonsense() {
    let dir = tempdir("fo-runtime");
    let primary = Server::start(&dir, &["--snapshot-log-size", "0"]);
    load(&primary, 0, 500);
    // A server in memory becomes a replica at run time: what it held is
    // replaced by the primary's.
    let r = Server::start_in_memory(&[]);
    let mut c = r.connect();
    ask(&mut c, b"set mine 0 0 2\r\nme\r\n", b"STORED\r\n");
    let reply = ask(
        &mut c,
        format!("replicaof 127.0.0.1 {}\r\n", primary.port).as_bytes(),
        b"\r\n",
    );
    assert_eq!(reply, b"OK\r\n");
    caught_up(&primary, &r);
    same(
        &contents(&r, 500),
        &contents(&primary, 500),
        "the new replica",
    );
    assert_eq!(get(&mut c, "mine"), None);
    let refused = ask(&mut c, b"set x 0 0 1\r\nx\r\n", b"\r\n");
    assert!(String::from_utf8_lossy(&refused)
        .starts_with("SERVER_ERROR this server is a read-only replica"));
    // Promoted, it takes writes again and says so.
    assert_eq!(ask(&mut c, b"replicaof no one\r\n", b"\r\n"), b"OK\r\n");
    assert_eq!(stat_str(&mut c, "repl_role"), "primary");
    ask(&mut c, b"set x 0 0 1\r\nx\r\n", b"STORED\r\n");
    // Promoting a primary is nothing.
    assert_eq!(ask(&mut c, b"replicaof no one\r\n", b"\r\n"), b"OK\r\n");
    // Nonsense is refused with the usage, and changes nothing.
    for bad in [
        "replicaof 127.0.0.1 0\r\n",
        "replicaof 127.0.0.1 70000\r\n",
        "replicaof 127.0.0.1 port\r\n",
    ] {
        let got = ask(&mut c, bad.as_bytes(), b"\r\n");
        assert!(
            got.starts_with(b"CLIENT_ERROR usage: replicaof"),
            "{bad:?}: {}",
            String::from_utf8_lossy(&got)
        );
    }
    assert_eq!(ask(&mut c, b"replicaof\r\n", b"\r\n"), b"ERROR\r\n");
    assert_eq!(stat_str(&mut c, "repl_role"), "primary");
    // Following a server that is not there: the link stays down, reads
    // are served, and the server says so.
    let gone = common::free_port();
    let reply = ask(
        &mut c,
        format!("replicaof 127.0.0.1 {gone}\r\n").as_bytes(),
        b"\r\n",
    );
    assert_eq!(reply, b"OK\r\n");
    assert_eq!(stat_str(&mut c, "repl_role"), "replica");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(stat_str(&mut c, "repl_link"), "down");
    assert_eq!(get(&mut c, "x").as_deref(), Some("x"));
    drop(c);
    r.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(dir);
}

/// Asks to replicate after record `at` of `history`; returns the answer's
/// line alone (the stream that may follow it is not read).
fn handshake(s: &mut std::net::TcpStream, history: &str, at: u64) -> Vec<u8> {
    use std::io::{Read, Write};
    s.write_all(format!("replicate {history} {at}\r\n").as_bytes())
        .unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1, "the primary closed");
        line.push(b[0]);
    }
    line
}

/// The first record of the oldest log segment in `dir`.
fn oldest_segment(dir: &Path) -> u64 {
    let mut firsts: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            name.strip_suffix(".klog")?.parse().ok()
        })
        .collect();
    firsts.sort_unstable();
    firsts[0]
}

/// Writes at least `bytes` of 100-byte values, and on, slowly, until
/// `snapshots` more snapshots were taken; returns the bytes of values
/// written.
fn write_and_snapshot(server: &Server, tag: &str, bytes: usize, snapshots: u64) -> usize {
    let mut c = server.connect();
    let value = "v".repeat(100);
    let mut i = 0;
    let batch = |c: &mut std::net::TcpStream, i: &mut usize| {
        let mut req = Vec::new();
        for _ in 0..50 {
            req.extend_from_slice(
                format!("set {tag}{i} 0 0 100 noreply\r\n{value}\r\n").as_bytes(),
            );
            *i += 1;
        }
        req.extend_from_slice(b"mn\r\n");
        ask(c, &req, b"MN\r\n");
    };
    while i * 100 < bytes {
        batch(&mut c, &mut i);
    }
    // Snapshots taken after all of it (each begins once the one before is
    // done, so write on slowly).
    let before = stat(&mut c, "log_snapshots");
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "log_snapshots") < before + snapshots {
        assert!(Instant::now() < deadline, "no snapshots taken");
        std::thread::sleep(Duration::from_millis(50));
        batch(&mut c, &mut i);
    }
    i * 100
}

#[test]
fn a_connected_replica_keeps_the_log_it_needs_within_the_backlog_size() {
    let dir = tempdir("fo-retain");
    let primary = Server::start(
        &dir,
        &[
            "--log-file-size",
            "4k",
            "--snapshot-log-size",
            "16k",
            "--repl-backlog-size",
            "1m",
        ],
    );
    write_and_snapshot(&primary, "a", 40_000, 2);
    // A replica that asks from where the primary is now, then reads
    // nothing and acknowledges nothing.
    let mut c = primary.connect();
    let history = stat_str(&mut c, "repl_history");
    let at = stat(&mut c, "repl_written_seq");
    let mut replica = primary.connect();
    let line = handshake(&mut replica, &history, at);
    assert!(
        line.starts_with(b"CONTINUE "),
        "{}",
        String::from_utf8_lossy(&line)
    );
    // Snapshots after it keep the segments it needs...
    let wrote = write_and_snapshot(&primary, "b", 30_000, 2);
    assert!(wrote < 500_000);
    assert!(
        oldest_segment(&dir) <= at + 1,
        "the log starts at {}, the replica needs {}",
        oldest_segment(&dir),
        at + 1
    );
    // ...until they come to more than the backlog's size. (Three
    // snapshots: one under way when the writes ended may finish first and
    // be the older of the two kept; the next two begin after the writes.)
    write_and_snapshot(&primary, "c", 1_500_000, 3);
    assert!(oldest_segment(&dir) > at + 1);
    drop(replica);
    // Asked again from there, the primary resyncs it whole.
    let mut again = primary.connect();
    let line = handshake(&mut again, &history, at);
    assert!(
        line.starts_with(b"FULLRESYNC "),
        "{}",
        String::from_utf8_lossy(&line)
    );
    drop((c, again));
    primary.stop();
    let _ = std::fs::remove_dir_all(dir);
}

/// A durable replica killed and away while its durable primary writes more
/// than its backlog and prunes its log past where the replica stopped:
/// restarted on its own dir, it asks to go on from its last record, is
/// resynced whole while writes go on, and ends identical to the primary.
#[test]
fn a_durable_replica_away_longer_than_the_backlog_resyncs_whole_and_ends_identical() {
    let dir = tempdir("fo-away");
    let (pdir, rdir) = (dir.join("primary"), dir.join("replica"));
    let primary = Server::start(
        &pdir,
        &[
            "--log-file-size",
            "4k",
            "--snapshot-log-size",
            "16k",
            "--repl-backlog-size",
            "64k",
        ],
    );
    let target = format!("127.0.0.1:{}", primary.port);
    let replica = Server::start(&rdir, &["--replica-of", &target]);
    let rport = replica.port;
    load(&primary, 0, 1000);
    caught_up(&primary, &replica);
    replica.kill();
    // Far more than the backlog while it is away, and snapshots that prune
    // the log past its last record.
    let mut p = primary.connect();
    let stopped_at = stat(&mut p, "repl_written_seq");
    for round in 1..4 {
        load(&primary, round, 1000);
    }
    write_and_snapshot(&primary, "away", 400_000, 2);
    // Pruning goes up to the older of the two snapshots kept. One that began
    // before the bulk of these writes (snapshots run slowly on a loaded
    // machine) can be that older one and keep the log from where the replica
    // stopped: take more until the log is pruned past it (the setup this test
    // needs, not what it checks).
    for more in 0.. {
        if oldest_segment(&pdir) > stopped_at + 1 {
            break;
        }
        assert!(
            more < 10,
            "the log was not pruned past where the replica stopped after 10 more snapshots"
        );
        write_and_snapshot(&primary, &format!("more{more}-"), 20_000, 1);
    }
    let full = stat(&mut p, "repl_full_resyncs");
    // Back on its dir while the primary takes writes: about 11 KB of
    // records, less than a snapshot's worth (16k), so that at most one
    // snapshot is taken during the resync and the one sent stays the older
    // of the two kept, with the log after it (two would prune it, however
    // late the stream starts: a second full resync).
    let replica = std::thread::scope(|s| {
        s.spawn(|| {
            load(&primary, 4, 200);
        });
        Server::start_on_port(&rdir, rport, &["--replica-of", &target])
    });
    caught_up(&primary, &replica);
    assert_eq!(stat(&mut p, "repl_full_resyncs"), full + 1);
    let mut r = replica.connect();
    assert_eq!(stat(&mut r, "repl_full_resyncs"), 1);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "a durable replica after a full resync",
    );
    let got = get(&mut r, "away0");
    assert_eq!(got.as_deref(), Some("v".repeat(100).as_str()));
    drop((p, r));
    replica.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(dir);
}
