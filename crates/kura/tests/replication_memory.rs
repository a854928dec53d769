//! Replication without data dirs: a primary in memory keeps a backlog
//! (`--repl-backlog-size`) that its replicas resume from; a replica that was
//! away for longer than the backlog resyncs whole while writes go on; a
//! replica that stops reading costs the primary no more than its backlog;
//! replicas of replicas and promotion work in memory too.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::cluster::{caught_up, contents, fill_mb, load, replicaof, same, wait_for, wait_stat};
use common::{ask, stat, stat_str, Server};

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

/// The metrics page of a server started with `--metrics-listen` on `port`.
fn metrics(port: u16) -> String {
    let page = common::http_exchange(port, "GET /metrics HTTP/1.0", "");
    String::from_utf8(page).unwrap()
}

/// The server's resident memory, from /proc.
fn rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

#[test]
fn a_primary_without_a_data_dir_serves_replicas_and_they_resume_from_its_backlog() {
    let (pm, am) = (common::free_port(), common::free_port());
    let primary = Server::start_in_memory(&["--metrics-listen", &format!("127.0.0.1:{pm}")]);
    load(&primary, 0, 1500);
    // One from a snapshot of what is there, made in memory, one from the
    // start, and one of that one.
    let a = Server::start_in_memory(&[
        "--replica-of",
        &addr(&primary),
        "--metrics-listen",
        &format!("127.0.0.1:{am}"),
    ]);
    load(&primary, 1, 1500);
    let b = Server::start_in_memory(&["--replica-of", &addr(&primary)]);
    let c = Server::start_in_memory(&["--replica-of", &addr(&b)]);
    for round in 2..5 {
        load(&primary, round, 1500);
    }
    caught_up(&primary, &a);
    caught_up(&primary, &b);
    caught_up(&b, &c);
    let want = contents(&primary, 1500);
    assert!(want.iter().filter(|l| *l != "EN").count() > 1000);
    same(&contents(&a, 1500), &want, "replica a");
    same(&contents(&b, 1500), &want, "replica b");
    same(&contents(&c, 1500), &want, "b's replica");
    let mut p = primary.connect();
    assert!(stat(&mut p, "repl_backlog_bytes") > 0);
    assert_eq!(stat(&mut p, "repl_replicas"), 2);
    // Acknowledgements nobody waits for come up to ten times a second:
    // once the replica's has come, the primary sees it owes nothing.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = common::stat_str(&mut p, "repl_replica_0");
        if line.contains(",lag_bytes=0") {
            break;
        }
        assert!(Instant::now() < deadline, "{line}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The same on the metrics page, by label.
    let page = metrics(pm);
    let history = stat_str(&mut p, "repl_history");
    assert!(
        page.contains(&format!(
            "kura_repl_info{{role=\"primary\",history=\"{history}\",primary=\"\"}} 1\n"
        )),
        "{page}"
    );
    assert_eq!(
        page.matches("kura_repl_replica_acked_seq{").count(),
        2,
        "{page}"
    );
    assert!(page.contains(",addr=\"tcp:127.0.0.1:"), "{page}");
    assert!(
        page.contains("kura_repl_replica_lag_bytes{replica=\"0\","),
        "{page}"
    );
    let page = metrics(am);
    assert!(
        page.contains(&format!(
            "role=\"replica\",history=\"{history}\",primary=\"{}\"}} 1\n",
            addr(&primary)
        )),
        "{page}"
    );
    assert!(page.contains("kura_repl_link_up 1\n"), "{page}");

    // A link that breaks and comes back goes on from the backlog.
    let mut ca = a.connect();
    let full = stat(&mut ca, "repl_full_resyncs");
    let partial = stat(&mut ca, "repl_partial_resyncs");
    replicaof(&a, "127.0.0.1:1");
    wait_stat(&a, "repl_link", "down");
    assert!(metrics(am).contains("kura_repl_link_up 0\n"));
    load(&primary, 5, 1500);
    replicaof(&a, &addr(&primary));
    wait_stat(&a, "repl_link", "up");
    caught_up(&primary, &a);
    assert_eq!(stat(&mut ca, "repl_full_resyncs"), full);
    assert_eq!(stat(&mut ca, "repl_partial_resyncs"), partial + 1);
    same(
        &contents(&a, 1500),
        &contents(&primary, 1500),
        "replica a after a break",
    );

    // Promote b: its replica c goes on from it, and it takes writes.
    assert_eq!(
        ask(&mut b.connect(), b"replicaof no one\r\n", b"\r\n"),
        b"OK\r\n"
    );
    let mut cc = c.connect();
    let full = stat(&mut cc, "repl_full_resyncs");
    load(&b, 6, 1500);
    caught_up(&b, &c);
    same(
        &contents(&c, 1500),
        &contents(&b, 1500),
        "c after b's promotion",
    );
    assert_eq!(stat(&mut cc, "repl_full_resyncs"), full);
    drop((p, ca, cc));
    for s in [c, b, a, primary] {
        s.stop();
    }
}

#[test]
fn a_replica_away_longer_than_the_backlog_resyncs_whole_while_writes_go_on() {
    // A round of `load` is about 55 KB of records: fifteen while the
    // replica is away are more than the backlog holds, the three written
    // during its resync are less (so that, however late its stream starts
    // reading, they are still there: one full resync, not a second).
    let primary = Server::start_in_memory(&["--repl-backlog-size", "512k"]);
    let a = Server::start_in_memory(&["--replica-of", &addr(&primary)]);
    load(&primary, 0, 1000);
    caught_up(&primary, &a);
    replicaof(&a, "127.0.0.1:1");
    wait_stat(&a, "repl_link", "down");
    let mut p = primary.connect();
    let away = stat(&mut p, "repl_written_seq");
    for round in 1..16 {
        load(&primary, round, 1000);
    }
    let behind = stat(&mut p, "repl_written_seq");
    let mut ca = a.connect();
    let full = stat(&mut ca, "repl_full_resyncs");
    std::thread::scope(|s| {
        s.spawn(|| {
            for round in 16..19 {
                load(&primary, round, 1000);
            }
        });
        replicaof(&a, &addr(&primary));
    });
    caught_up(&primary, &a);
    assert_eq!(stat(&mut ca, "repl_full_resyncs"), full + 1);
    same(
        &contents(&a, 1000),
        &contents(&primary, 1000),
        "after a full resync",
    );
    let during = stat(&mut p, "repl_written_seq") - behind;
    assert!(
        behind - away > 2 * during,
        "{} records while away, {during} during the resync",
        behind - away
    );
    assert!(stat(&mut p, "repl_backlog_bytes") <= 512 * 1024 + 256 * 1024);
    drop((p, ca));
    a.stop();
    primary.stop();
}

#[test]
fn a_replica_that_stops_reading_costs_the_primary_no_more_than_its_backlog() {
    let primary = Server::start_in_memory(&["-m", "32", "--repl-backlog-size", "1m"]);
    // A replica that asks for the stream and never reads it.
    let mut stuck = primary.connect();
    stuck.write_all(b"replicate - 0\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_kib(&primary);
    // 120 MB of writes through a 32 MB cache.
    fill_mb(&primary, "k", 120);
    let after = rss_kib(&primary);
    // The cache fills its 32 MB; what the stuck replica holds back is the
    // backlog (1 MB) and one frame, not the 120 MB written.
    assert!(
        after < before + 64 * 1024,
        "RSS grew from {before} to {after} KiB"
    );
    let mut p = primary.connect();
    assert!(stat(&mut p, "repl_backlog_bytes") <= 1024 * 1024 + 256 * 1024);
    // And the primary still answers.
    ask(&mut p, b"set last 0 0 1\r\nx\r\n", b"STORED\r\n");
    drop(stuck);
    primary.stop();
}

#[test]
fn tables_replicate_from_a_primary_without_a_data_dir() {
    let table = "t:width=64:max=5000";
    let primary = Server::start_in_memory(&["--table", table]);
    let mut p = primary.connect();
    // Some before any replica (they come in the full resync), some after.
    for i in 1..=300 {
        ask(
            &mut p,
            format!("set t:{i} {i} 0 4\r\nr{:03}\r\n", i % 1000).as_bytes(),
            b"STORED\r\n",
        );
    }
    let a = Server::start_in_memory(&["--replica-of", &addr(&primary), "--table", table]);
    for i in 200..=500 {
        ask(
            &mut p,
            format!("append t:{i} 0 0 2\r\n+a\r\n").as_bytes(),
            b"\r\n",
        );
    }
    for i in (1..=500).step_by(7) {
        ask(&mut p, format!("delete t:{i}\r\n").as_bytes(), b"\r\n");
    }
    caught_up(&primary, &a);
    let range = |s: &Server| ask(&mut s.connect(), b"get t:[min,max]\r\n", b"END\r\n");
    let want = range(&primary);
    assert!(want.len() > 2000, "{}", want.len());
    assert_eq!(range(&a), want);
    let refused = ask(&mut a.connect(), b"set t:1 0 0 1\r\nx\r\n", b"\r\n");
    assert!(refused.starts_with(b"SERVER_ERROR this server is a read-only replica"));
    drop(p);
    a.stop();
    primary.stop();
}

#[test]
fn a_primary_restarted_empty_is_followed_whole_and_the_replica_says_so() {
    let primary = Server::start_in_memory(&[]);
    let port = primary.port;
    load(&primary, 0, 500);
    let log = std::env::temp_dir().join(format!("kura-replica-empty-{}.log", std::process::id()));
    let rport = common::free_port();
    let child = common::kura()
        .args(["server", "-t", "2", "-p", &rport.to_string()])
        .args(["--replica-of", &addr(&primary)])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let replica = Server::adopt(child, "127.0.0.1", rport);
    // (An in-memory primary numbers nothing before its first replica
    // connects: wait for the resync itself, then for what came after.)
    resyncs_reach(&replica, 1);
    caught_up(&primary, &replica);
    let mut r = replica.connect();
    let full = stat(&mut r, "repl_full_resyncs");
    assert!(common::get(&mut r, "k0").is_some() || common::get(&mut r, "k1").is_some());

    // The primary comes back on the same port with nothing: a new history.
    primary.kill();
    wait_stat(&replica, "repl_link", "down");
    let primary = Server::spawn(port, &[]);
    let mut p = primary.connect();
    ask(&mut p, b"set fresh 0 0 3\r\nnew\r\n", b"\r\n");
    resyncs_reach(&replica, full + 1);
    caught_up(&primary, &replica);
    // The replica followed it whole, dropping what the old history had,
    // and said so in its log.
    assert_eq!(stat(&mut r, "repl_full_resyncs"), full + 1);
    assert_eq!(
        stat_str(&mut r, "repl_history"),
        stat_str(&mut p, "repl_history")
    );
    same(
        &contents(&replica, 500),
        &contents(&primary, 500),
        "after the primary came back empty",
    );
    assert_eq!(common::get(&mut r, "fresh").as_deref(), Some("new"));
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("full resync, replacing everything this replica holds"),
        "{said}"
    );
    drop((r, p));
    replica.stop();
    primary.stop();
    let _ = std::fs::remove_file(&log);
}

/// Waits until `replica` has been through `n` full resyncs.
fn resyncs_reach(replica: &Server, n: u64) {
    let mut c = replica.connect();
    wait_for(&format!("{n} full resyncs"), 30, || {
        stat(&mut c, "repl_full_resyncs") >= n
    });
}

/// Waits until `server` holds `key` with `value`.
fn holds(server: &Server, key: &str, value: &str, what: &str) {
    let mut c = server.connect();
    wait_for(&format!("{what}: {key}"), 20, || {
        common::get(&mut c, key).as_deref() == Some(value)
    });
}

/// A write whose reply the client never reads, a `noreply` write that
/// has no reply at all, and a write over UDP (served on another thread)
/// each reach the replica with nothing after them to carry them along
/// (workers send at the end of each batch of requests, before its
/// replies; the stream's heartbeat is the backstop).
#[test]
fn every_write_reaches_the_replica_however_its_client_behaves() {
    let udp = common::free_port();
    let primary = Server::start_in_memory(&["-U", &udp.to_string()]);
    let replica = Server::start_in_memory(&["--replica-of", &addr(&primary)]);
    wait_stat(&replica, "repl_link", "up");
    let mut p = primary.connect();
    let big = "x".repeat(512 * 1024);
    ask(
        &mut p,
        format!("set big 0 0 {}\r\n{big}\r\n", big.len()).as_bytes(),
        b"STORED\r\n",
    );
    caught_up(&primary, &replica);

    // A client that writes, then asks for far more than the sockets'
    // buffers hold, and never reads: its connection waits on it for good.
    let mut stuck = primary.connect();
    let mut req = b"set first 0 0 1\r\na\r\n".to_vec();
    for _ in 0..64 {
        req.extend_from_slice(b"get big\r\n");
    }
    req.extend_from_slice(b"set second 0 0 1\r\nb\r\n");
    stuck.write_all(&req).unwrap();
    holds(&replica, "first", "a", "behind a client that does not read");
    assert_eq!(common::get(&mut p, "second"), None, "the client was read");

    // A lone write without a reply.
    p.write_all(b"set quiet 0 0 1 noreply\r\nq\r\n").unwrap();
    holds(&replica, "quiet", "q", "a noreply write");

    // A lone write over UDP: memcached's frame header, then the request.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut dgram = vec![0, 7, 0, 0, 0, 1, 0, 0];
    dgram.extend_from_slice(b"set udp 0 0 1\r\nu\r\n");
    sock.send_to(&dgram, ("127.0.0.1", udp)).unwrap();
    let mut reply = [0u8; 64];
    let n = sock.recv(&mut reply).unwrap();
    assert_eq!(&reply[8..n], b"STORED\r\n");
    holds(&replica, "udp", "u", "a write over UDP");

    drop((stuck, p));
    replica.stop();
    primary.stop();
}
