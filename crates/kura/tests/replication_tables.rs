//! Fixed-length tables (`--table`) in the update log: a durable primary's
//! table writes of every kind, over text and meta, reach its replicas (in
//! memory and durable, restarted, resynced whole) record for record; a
//! replica that cannot hold a table's records says so and applies none of
//! them; a primary killed with SIGKILL recovers its tables from its log.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{caught_up, contents, load, replicaof, same};
use common::{ask, stat, stat_str, tempdir, Server};

const TABLE: &str = "t:width=64:max=1000";

/// Table writes of every kind on ids 1..=n of table `t`, over text and meta.
fn table_load(server: &Server, round: usize, n: u64) {
    let mut c = server.connect();
    let mut req = Vec::new();
    for id in 1..=n {
        let k = format!("t:{id}");
        let v = format!("r{round}i{id}");
        let line = match (id as usize + round) % 10 {
            0 => format!("set {k} {round} 0 {}\r\n{v}\r\n", v.len()),
            1 => format!("add {k} 7 0 {}\r\n{v}\r\n", v.len()),
            2 => format!("replace {k} 8 0 {}\r\n{v}\r\n", v.len()),
            3 => format!("append {k} 0 0 2\r\n+a\r\n"),
            4 => format!("prepend {k} 0 0 2\r\nb-\r\n"),
            5 => format!("rotate {k} 3 0 {} 20\r\n{v}\r\n", v.len()),
            6 => format!("delete {k}\r\n"),
            7 => format!("ms {k} {} F{round} MA\r\n{v}\r\n", v.len()),
            8 => format!("ms {k} {} MW w12 q\r\n{v}\r\n", v.len()),
            _ => format!("md {k} q\r\nms {k} {} F9 ME\r\n{v}\r\n", v.len()),
        };
        req.extend_from_slice(line.as_bytes());
    }
    // An append that would not fit changes nothing (NOT_STORED).
    req.extend_from_slice(format!("append t:1 0 0 64\r\n{}\r\n", "x".repeat(64)).as_bytes());
    req.extend_from_slice(b"mn\r\n");
    ask(&mut c, &req, b"MN\r\n");
}

/// Every record of table `t`, as `get t:[min,max]` answers.
fn table(server: &Server) -> String {
    let mut c = server.connect();
    String::from_utf8(ask(&mut c, b"get t:[min,max]\r\n", b"END\r\n")).unwrap()
}

fn records(table: &str) -> usize {
    table.matches("VALUE ").count()
}

fn replica(primary: &Server, dir: Option<&std::path::Path>, table: &str) -> Server {
    let of = format!("127.0.0.1:{}", primary.port);
    let args = ["--replica-of", of.as_str(), "--table", table];
    match dir {
        Some(d) => Server::start(d, &args),
        None => Server::start_in_memory(&args),
    }
}

/// Waits until `replica`'s link is down and its last error says `what`.
fn link_broken(replica: &Server, what: &str) -> String {
    let mut c = replica.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let error = stat_str(&mut c, "repl_last_error");
        if error.contains(what) {
            assert_eq!(stat_str(&mut c, "repl_link"), "down");
            return error;
        }
        assert!(Instant::now() < deadline, "no error about {what}: {error}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tables_replicate_record_for_record_through_restarts_and_resyncs() {
    let dir = tempdir("repl-tables");
    let (pdir, bdir) = (dir.join("primary"), dir.join("b"));
    let primary = Server::start(&pdir, &["--table", TABLE, "--snapshot-log-size", "0"]);
    load(&primary, 0, 500);
    table_load(&primary, 0, 300);
    // One replica from a full resync (a snapshot with table records), in
    // memory; one with a data dir of its own.
    let a = replica(&primary, None, TABLE);
    let b = replica(&primary, Some(&bdir), TABLE);
    for round in 1..12 {
        load(&primary, round, 500);
        table_load(&primary, round, 300);
    }
    caught_up(&primary, &a);
    caught_up(&primary, &b);
    let want = table(&primary);
    assert!(records(&want) > 150, "{want}");
    assert_eq!(table(&a), want, "replica a");
    assert_eq!(table(&b), want, "replica b");
    same(
        &contents(&a, 500),
        &contents(&primary, 500),
        "replica a's keys",
    );

    // Replicas refuse table writes, as any write.
    let mut c = a.connect();
    for req in [
        &b"set t:1 0 0 1\r\nx\r\n"[..],
        b"delete t:2\r\n",
        b"ms t:3 1 MA\r\nx\r\n",
        b"md t:4\r\n",
    ] {
        let r = ask(&mut c, req, b"\r\n");
        assert!(
            String::from_utf8_lossy(&r).starts_with("SERVER_ERROR this server is a read-only"),
            "{}",
            String::from_utf8_lossy(&r)
        );
    }
    assert_eq!(table(&a), want, "after refused writes");

    // The durable replica killed mid-stream comes back from its own log and
    // goes on with a partial resync; the in-memory one resyncs whole.
    b.kill();
    a.kill();
    table_load(&primary, 20, 300);
    let b = replica(&primary, Some(&bdir), TABLE);
    table_load(&primary, 21, 300);
    let a = replica(&primary, None, TABLE);
    load(&primary, 22, 500);
    table_load(&primary, 22, 300);
    caught_up(&primary, &a);
    caught_up(&primary, &b);
    let want = table(&primary);
    assert_eq!(table(&a), want, "replica a, resynced whole");
    assert_eq!(table(&b), want, "replica b, restarted");
    let mut bc = b.connect();
    assert!(stat(&mut bc, "repl_partial_resyncs") >= 1);
    assert_eq!(stat(&mut bc, "repl_full_resyncs"), 0);
    same(
        &contents(&b, 500),
        &contents(&primary, 500),
        "replica b's keys",
    );
    a.stop();
    b.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replica_that_cannot_hold_a_table_says_so_and_applies_none_of_it() {
    let dir = tempdir("repl-tables-misfit");
    let primary = Server::start(&dir, &["--table", TABLE]);
    let mut p = primary.connect();
    ask(&mut p, b"set t:1 0 0 5\r\nfirst\r\n", b"STORED\r\n");
    // A full resync: the primary's snapshot holds t:1, which a replica with
    // a narrower table cannot hold.
    let narrow = replica(&primary, None, "t:width=4:max=1000");
    let error = link_broken(&narrow, "does not fit");
    assert!(error.contains("table \"t\""), "{error}");
    // A replica without the table at all.
    let of = format!("127.0.0.1:{}", primary.port);
    let none = Server::start_in_memory(&["--replica-of", &of]);
    let error = link_broken(&none, "does not declare");
    assert!(error.contains("\"t\""), "{error}");
    let mut n = none.connect();
    assert_eq!(stat(&mut n, "repl_applied_seq"), 0);

    // In the stream: a replica whose table is too short for a later record
    // takes the records before it, and not it.
    let short = replica(&primary, None, "t:width=64:max=5");
    let mut s = short.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut s, "repl_applied_seq") < 1 {
        assert!(Instant::now() < deadline, "never applied record 1");
        std::thread::sleep(Duration::from_millis(20));
    }
    ask(&mut p, b"set t:2 0 0 6\r\nsecond\r\n", b"STORED\r\n");
    ask(&mut p, b"set t:900 0 0 3\r\nfar\r\n", b"STORED\r\n");
    ask(&mut p, b"set t:3 0 0 5\r\nthird\r\n", b"STORED\r\n");
    let error = link_broken(&short, "does not fit");
    assert!(error.contains("record 900"), "{error}");
    assert_eq!(stat(&mut s, "repl_applied_seq"), 2);
    assert_eq!(
        String::from_utf8(ask(&mut s, b"get t:[min,max]\r\n", b"END\r\n")).unwrap(),
        "VALUE t:1 0 5\r\nfirst\r\nVALUE t:2 0 6\r\nsecond\r\nEND\r\n"
    );
    narrow.stop();
    none.stop();
    short.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tables through a failover: a promoted replica's table is followed on by
/// the other replica; the old primary, which took table writes nobody else
/// saw before it died, rejoins as a replica and its table ends as the new
/// primary's, with none of those writes, in memory and after a restart
/// from its own data dir.
#[test]
fn tables_follow_a_promotion_and_the_old_primary_drops_table_writes_only_it_had() {
    let dir = tempdir("repl-tables-promo");
    let dirs = [dir.join("old"), dir.join("a"), dir.join("b")];
    let old = Server::start(&dirs[0], &["--table", TABLE, "--snapshot-log-size", "0"]);
    let a = replica(&old, Some(&dirs[1]), TABLE);
    let b = replica(&old, Some(&dirs[2]), TABLE);
    for round in 0..3 {
        table_load(&old, round, 300);
    }
    caught_up(&old, &a);
    caught_up(&old, &b);
    assert_eq!(table(&a), table(&old));

    // Promote a; b follows it by a partial resync.
    let (mut ca, mut cb) = (a.connect(), b.connect());
    assert_eq!(ask(&mut ca, b"replicaof no one\r\n", b"\r\n"), b"OK\r\n");
    let full = stat(&mut cb, "repl_full_resyncs");
    replicaof(&b, &format!("127.0.0.1:{}", a.port));

    // The old primary, cut off, writes table records of its own (new ids
    // and changes to shared ones), then dies.
    let mut co = old.connect();
    let mut req = Vec::new();
    for id in 400..450 {
        req.extend_from_slice(format!("set t:{id} 0 0 3 noreply\r\nold\r\n").as_bytes());
    }
    for id in 1..50 {
        req.extend_from_slice(format!("set t:{id} 0 0 3 noreply\r\nold\r\n").as_bytes());
    }
    req.extend_from_slice(b"mn\r\n");
    ask(&mut co, &req, b"MN\r\n");
    drop(co);
    old.kill();

    // The new primary writes on; its replica keeps up.
    for round in 3..5 {
        table_load(&a, round, 300);
    }
    caught_up(&a, &b);
    let want = table(&a);
    assert!(!want.contains("\r\nold\r\n"), "{want}");
    assert_eq!(table(&b), want, "b following the new primary");
    assert_eq!(stat(&mut cb, "repl_full_resyncs"), full);

    // The old primary rejoins: its table is the new primary's.
    let old = replica(&a, Some(&dirs[0]), TABLE);
    caught_up(&a, &old);
    assert_eq!(table(&old), want, "the old primary rejoined");
    let mut co = old.connect();
    assert_eq!(stat(&mut co, "repl_full_resyncs"), 0);
    drop(co);
    old.stop();
    // And its data dir holds the new history's table.
    let back = Server::start(&dirs[0], &["--table", TABLE]);
    assert_eq!(table(&back), want, "the old primary restarted alone");
    drop((ca, cb));
    for s in [back, a, b] {
        s.stop();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
