//! `--min-replicas-ack N`: a write is acknowledged only once N replicas
//! have it (a replica under `--fsync always` once it is on its disk), and
//! a write they do not acknowledge in time gets an error.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::cluster::wait_stat;
use common::{ask, get, stat, tempdir, Server};

fn addr(s: &Server) -> String {
    format!("127.0.0.1:{}", s.port)
}

/// Waits until `primary` streams to `n` replicas.
fn streaming(primary: &Server, n: u64) {
    let mut c = primary.connect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stat(&mut c, "repl_replicas") < n {
        assert!(std::time::Instant::now() < deadline, "no replicas");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_write_is_acknowledged_once_its_replica_has_it() {
    let (pdir, rdir) = (tempdir("acks-p"), tempdir("acks-r"));
    let primary = Server::start(
        &pdir,
        &["--min-replicas-ack", "1", "--min-replicas-timeout", "5000"],
    );
    let replica = Server::start(
        &rdir,
        &["--replica-of", &addr(&primary), "--fsync", "always"],
    );
    streaming(&primary, 1);
    let (mut p, mut r) = (primary.connect(), replica.connect());
    for i in 0..300 {
        let req = match i % 3 {
            0 => format!("set k{i} 0 0 3\r\nv{:02}\r\n", i % 100),
            1 => format!("ms k{i} 3\r\nv{:02}\r\n", i % 100),
            _ => format!("set k{i} 0 0 3 noreply\r\nv{:02}\r\nmn\r\n", i % 100),
        };
        let want: &[u8] = match i % 3 {
            0 => b"STORED\r\n",
            1 => b"HD\r\n",
            _ => b"MN\r\n",
        };
        assert_eq!(ask(&mut p, req.as_bytes(), b"\r\n"), want, "write {i}");
        // Acknowledged: the replica has the record on its disk (its log
        // numbers records as the primary's does) and holds it already.
        let seq = stat(&mut p, "log_next_seq") - 1;
        let synced = stat(&mut r, "log_synced_seq");
        assert!(
            synced >= seq,
            "write {i} (record {seq}) acknowledged, the replica synced to {synced} only"
        );
        assert_eq!(
            get(&mut r, &format!("k{i}")).as_deref(),
            Some(format!("v{:02}", i % 100).as_str()),
            "k{i} acknowledged by the primary, not on the replica"
        );
    }
    assert_eq!(stat(&mut p, "repl_ack_timeouts"), 0);
    assert!(stat(&mut p, "repl_ack_waits") >= 300);
    drop((p, r));
    replica.stop();
    primary.stop();
    for d in [pdir, rdir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_write_its_replicas_do_not_acknowledge_in_time_gets_an_error() {
    // In memory: the primary's journal is what its replicas follow.
    // (2 s for an acknowledgement: the first write's must come in time
    // from replicas whose links are up, on a loaded machine too.)
    let primary =
        Server::start_in_memory(&["--min-replicas-ack", "2", "--min-replicas-timeout", "2000"]);
    let a = Server::start_in_memory(&["--replica-of", &addr(&primary)]);
    let b = Server::start_in_memory(&["--replica-of", &addr(&primary)]);
    streaming(&primary, 2);
    wait_stat(&a, "repl_link", "up");
    wait_stat(&b, "repl_link", "up");
    let mut p = primary.connect();
    assert_eq!(ask(&mut p, b"set k 0 0 1\r\nx\r\n", b"\r\n"), b"STORED\r\n");
    assert_eq!(get(&mut a.connect(), "k").as_deref(), Some("x"));
    assert_eq!(get(&mut b.connect(), "k").as_deref(), Some("x"));
    // One replica gone: two acknowledgements can no longer come.
    b.kill();
    let mut deadline = 0;
    while stat(&mut p, "repl_replicas") > 1 {
        deadline += 1;
        assert!(deadline < 1500, "the stream to the dead replica stays");
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = ask(&mut p, b"set k 0 0 1\r\ny\r\n", b"\r\n");
    assert!(
        got.starts_with(b"SERVER_ERROR not acknowledged by 2 replicas"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    // Meta hears the error too; a classic noreply write hears nothing.
    let got = ask(&mut p, b"ms m 1 q\r\nz\r\nmn\r\n", b"MN\r\n");
    assert!(
        got.starts_with(b"SERVER_ERROR not acknowledged"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(
        ask(&mut p, b"set n 0 0 1 noreply\r\nz\r\nmn\r\n", b"MN\r\n"),
        b"MN\r\n"
    );
    // The write was applied here (and reached the replica that is left):
    // the error says it is not known to be on enough replicas.
    assert_eq!(get(&mut p, "k").as_deref(), Some("y"));
    assert!(stat(&mut p, "repl_ack_timeouts") >= 3);
    // A binary write cannot be answered with the error: its connection is
    // closed.
    let mut bin = primary.connect();
    let key = b"bk";
    let mut req = vec![0x80, 0x01, 0, key.len() as u8, 8, 0, 0, 0];
    req.extend_from_slice(&((8 + key.len() + 1) as u32).to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.extend_from_slice(&[0; 8]);
    req.extend_from_slice(key);
    req.push(b'v');
    bin.write_all(&req).unwrap();
    bin.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 24];
    assert_eq!(bin.read(&mut buf).unwrap(), 0, "the connection is closed");
    drop(p);
    a.stop();
    primary.stop();
}
