//! Fixed-length tables under `--data-dir`: their writes are in the update
//! log, so a server killed with SIGKILL recovers them from snapshot and
//! log; a table file a crash left with writes the log never got is made to
//! hold what the log says; a table file the log has never seen is kept and
//! taken into a snapshot.

mod common;

use std::time::{Duration, Instant};

use common::{ask, get, stat, tempdir, Server};
use kura_table::{Durability, Table, TableOptions};

const TABLE: &str = "t:width=64:max=1000";

/// Table writes of every kind on ids 1..=n, text and meta, each answered.
fn table_load(server: &Server, round: usize, n: u64) {
    let mut c = server.connect();
    for id in 1..=n {
        let k = format!("t:{id}");
        let v = format!("r{round}i{id}");
        let (req, until): (String, &[u8]) = match (id as usize + round) % 8 {
            0 => (format!("set {k} {round} 0 {}\r\n{v}\r\n", v.len()), b"\r\n"),
            1 => (format!("add {k} 7 0 {}\r\n{v}\r\n", v.len()), b"\r\n"),
            2 => (format!("append {k} 0 0 2\r\n+a\r\n"), b"\r\n"),
            3 => (format!("prepend {k} 0 0 2\r\nb-\r\n"), b"\r\n"),
            4 => (format!("rotate {k} 3 0 {} 20\r\n{v}\r\n", v.len()), b"\r\n"),
            5 => (format!("delete {k}\r\n"), b"\r\n"),
            6 => (format!("ms {k} {} MW w12\r\n{v}\r\n", v.len()), b"\r\n"),
            _ => (
                format!("md {k}\r\nms {k} {} F{round}\r\n{v}\r\n", v.len()),
                b"HD\r\n",
            ),
        };
        ask(&mut c, req.as_bytes(), until);
    }
}

fn table(server: &Server) -> String {
    let mut c = server.connect();
    String::from_utf8(ask(&mut c, b"get t:[min,max]\r\n", b"END\r\n")).unwrap()
}

#[test]
fn table_writes_survive_sigkill_through_snapshots_and_the_log() {
    let dir = tempdir("tables-kill");
    let args = [
        "--fsync",
        "always",
        "--table",
        TABLE,
        "--snapshot-log-size",
        "4000",
    ];
    let mut server = Server::start(&dir, &args);
    for round in 0..3 {
        table_load(&server, round, 200);
        let mut c = server.connect();
        ask(
            &mut c,
            format!("set k{round} 0 0 2\r\nok\r\n").as_bytes(),
            b"STORED\r\n",
        );
        let want = table(&server);
        assert!(want.matches("VALUE ").count() > 100, "{want}");
        server.kill();
        server = Server::start(&dir, &args);
        assert_eq!(table(&server), want, "round {round}, after SIGKILL");
        let mut c = server.connect();
        assert_eq!(get(&mut c, &format!("k{round}")).as_deref(), Some("ok"));
    }
    // The snapshots taken on the way held table records.
    let mut c = server.connect();
    ask(&mut c, b"set x 0 0 1\r\nx\r\n", b"STORED\r\n");
    assert!(
        std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "ksnap"))
            .count()
            >= 1
    );
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

fn options() -> TableOptions {
    TableOptions {
        width: 64,
        max: 1000,
        durability: Durability::No,
    }
}

#[test]
fn a_table_file_ahead_of_the_log_is_cut_back_to_it() {
    let dir = tempdir("tables-ahead");
    let server = Server::start(&dir, &["--table", TABLE]);
    let mut c = server.connect();
    ask(
        &mut c,
        b"set t:5 1 0 6\r\nlogged\r\nset t:6 2 0 4\r\nkept\r\n",
        b"STORED\r\nSTORED\r\n",
    );
    server.stop();
    // What a crash can leave: writes in the table's file that the log
    // thread never wrote, and a file not closed cleanly.
    let t = Table::open(Some(&dir.join("t.ktbl")), options()).unwrap();
    t.put(5, b"unlogged", 9).unwrap();
    t.put(7, b"ghost", 0).unwrap();
    std::mem::forget(t);
    let server = Server::start(&dir, &["--table", TABLE]);
    assert_eq!(
        table(&server),
        "VALUE t:5 1 6\r\nlogged\r\nVALUE t:6 2 4\r\nkept\r\nEND\r\n"
    );
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_table_the_log_has_never_seen_is_kept_and_snapshotted() {
    let dir = tempdir("tables-unseen");
    std::fs::create_dir_all(&dir).unwrap();
    // A table written before its server logged tables, left unclean.
    let t = Table::open(Some(&dir.join("t.ktbl")), options()).unwrap();
    t.put(1, b"old", 4).unwrap();
    t.put(999, b"older", 5).unwrap();
    std::mem::forget(t);
    let server = Server::start(&dir, &["--table", TABLE, "--fsync", "always"]);
    let want = "VALUE t:1 4 3\r\nold\r\nVALUE t:999 5 5\r\nolder\r\nEND\r\n";
    assert_eq!(table(&server), want);
    let mut c = server.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "log_snapshots") < 1 {
        assert!(Instant::now() < deadline, "no snapshot took the table in");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Now the log knows them: a crash and a write after keep them.
    ask(&mut c, b"set t:2 0 0 3\r\nnew\r\n", b"STORED\r\n");
    server.kill();
    let server = Server::start(&dir, &["--table", TABLE, "--fsync", "always"]);
    assert_eq!(
        table(&server),
        "VALUE t:1 4 3\r\nold\r\nVALUE t:2 0 3\r\nnew\r\nVALUE t:999 5 5\r\nolder\r\nEND\r\n"
    );
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
