//! A full resync from memory while writes go on: the records written while
//! a large store is sent are held for it beyond `--repl-backlog-size` (up
//! to `--repl-resync-buffer`), so that the replica goes on from them
//! instead of falling behind before its stream has begun and resyncing
//! whole again; past the buffer the primary cuts the resync off, its
//! backlog goes back to its size, and the replica tries again. A relay in
//! front of the primary holds its bytes back, as a slow link or a slow
//! replica would, for as long as the test writes.

mod common;

use common::cluster::{caught_up, contents, fill_mb, load, resynced_once, same, wait_for};
use common::{stat, Server};
use kura_testkit::relay::HoldingRelay as Relay;

/// A primary of 40 MB behind a relay holding its bytes back, and a replica
/// of it through the relay whose full resync has begun (its hold taken),
/// then about 550 KB of records written while the snapshot waits.
fn resync_held(primary_args: &[&str]) -> (Server, Relay, Server) {
    let mut args = vec!["-m", "256"];
    args.extend_from_slice(primary_args);
    let primary = Server::start_in_memory(&args);
    // 40 MB: more than the primary's socket and the relay can buffer, so
    // the snapshot's sending waits on the relay.
    fill_mb(&primary, "big", 40);
    let relay = Relay::start(&format!("127.0.0.1:{}", primary.port), true);
    let replica = Server::start_in_memory(&["-m", "256", "--replica-of", &relay.addr]);
    let mut p = primary.connect();
    wait_for("the full resync's hold", 30, || {
        stat(&mut p, "repl_resync_holds") == 1 || stat(&mut p, "repl_resync_holds_lost") > 0
    });
    for round in 0..10 {
        load(&primary, round, 1000);
    }
    (primary, relay, replica)
}

#[test]
fn what_is_written_while_a_large_store_is_sent_is_held_for_its_replica() {
    // The 550 KB written while the snapshot waits: far more than the
    // backlog's 64 KB.
    let (primary, relay, replica) = resync_held(&["--repl-backlog-size", "64k"]);
    let mut p = primary.connect();
    let held = stat(&mut p, "repl_backlog_bytes");
    assert!(held > 256 * 1024, "the backlog holds {held} bytes");
    assert_eq!(stat(&mut p, "repl_resync_holds"), 1);
    relay.open();
    resynced_once(&primary, &replica, "big39-999", "one full resync");
    // Caught up, the stream lets the hold go, and the backlog is back to
    // its size.
    assert_eq!(stat(&mut p, "repl_resync_holds"), 0);
    let after = stat(&mut p, "repl_backlog_bytes");
    assert!(after <= 64 * 1024 + 64 * 1024, "{after}");
    drop(p);
    replica.stop();
    primary.stop();
}

#[test]
fn a_resync_that_outgrows_the_resync_buffer_is_cut_off_and_tried_again() {
    let (primary, relay, replica) =
        resync_held(&["--repl-backlog-size", "64k", "--repl-resync-buffer", "128k"]);
    // The hold is given up: the primary keeps no more than its backlog
    // (and one open chunk) for a replica that does not read.
    let mut p = primary.connect();
    assert_eq!(stat(&mut p, "repl_resync_holds_lost"), 1);
    assert_eq!(stat(&mut p, "repl_resync_holds"), 0);
    let kept = stat(&mut p, "repl_backlog_bytes");
    assert!(kept <= 64 * 1024 + 64 * 1024, "{kept}");
    // Once the link lets bytes through, the replica starts over and, with
    // the writes stopped, gets there.
    relay.open();
    caught_up(&primary, &replica);
    assert!(stat(&mut p, "repl_full_resyncs") >= 2);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "after the resync was tried again",
    );
    drop(p);
    replica.stop();
    primary.stop();
}

#[test]
fn a_replica_killed_during_its_held_resync_leaves_nothing_held() {
    let (primary, relay, replica) = resync_held(&["--repl-backlog-size", "64k"]);
    let mut p = primary.connect();
    assert!(stat(&mut p, "repl_backlog_bytes") > 256 * 1024);
    // SIGKILL, then the link passes bytes again: the primary's next write
    // to the dead replica fails, its stream ends, and its hold goes.
    replica.kill();
    relay.open();
    wait_for("the dead replica's stream to end", 30, || {
        stat(&mut p, "repl_replicas") == 0
    });
    assert_eq!(stat(&mut p, "repl_resync_holds"), 0);
    assert_eq!(stat(&mut p, "repl_resync_holds_lost"), 0);
    let kept = stat(&mut p, "repl_backlog_bytes");
    assert!(kept <= 64 * 1024 + 64 * 1024, "{kept}");
    // And it goes on taking writes.
    load(&primary, 10, 1000);
    drop(p);
    primary.stop();
}

/// A primary with a data dir sends a snapshot file, and the stream goes on
/// from the log after it: while the file is sent, snapshots taken under
/// the writes would prune that log (beyond `--repl-backlog-size`), and the
/// replica would resync whole again. The log is kept for the resync up to
/// `--repl-resync-buffer` more.
#[test]
fn a_durable_primary_keeps_its_log_for_a_full_resync_while_snapshots_go_on() {
    let dir = common::tempdir("resync-durable");
    let args = [
        "-m",
        "256",
        "--repl-backlog-size",
        "64k",
        "--log-file-size",
        "64k",
    ];
    // Filled with the default snapshot size (one snapshot of 40 MB per
    // 256 KB of log would take a while), then started again on its dir
    // taking one each 256 KB.
    let primary = Server::start(&dir, &args);
    fill_mb(&primary, "big", 40);
    primary.stop();
    let mut again = args.to_vec();
    again.extend(["--snapshot-log-size", "256k"]);
    let primary = Server::start(&dir, &again);
    // A snapshot on disk before the replica asks, which the resync sends at
    // once (rather than writing one while the replica waits for its first
    // byte, five seconds at most).
    let mut p = primary.connect();
    for round in 100..160 {
        if stat(&mut p, "log_snapshots") >= 1 {
            break;
        }
        load(&primary, round, 1000);
    }
    wait_for("a first snapshot", 60, || {
        stat(&mut p, "log_snapshots") >= 1
    });
    let relay = Relay::start(&format!("127.0.0.1:{}", primary.port), true);
    let replica = Server::start_in_memory(&["-m", "256", "--replica-of", &relay.addr]);
    wait_for("the full resync's hold on the log", 30, || {
        stat(&mut p, "repl_resync_holds") == 1
    });
    assert_eq!(stat(&mut p, "repl_full_resyncs"), 1);
    // Two snapshots while the snapshot file waits on the relay: the one
    // sent is no longer among the two kept, nor its log with it.
    let snapshots = stat(&mut p, "log_snapshots");
    for round in 0..60 {
        load(&primary, round, 1000);
        if stat(&mut p, "log_snapshots") >= snapshots + 2 {
            break;
        }
    }
    wait_for("two snapshots", 60, || {
        stat(&mut p, "log_snapshots") >= snapshots + 2
    });
    relay.open();
    resynced_once(
        &primary,
        &replica,
        "big39-999",
        "a full resync from a data dir while snapshots prune its log",
    );
    // Near the end of the log, the stream lets it go.
    wait_for("the hold on the log to go", 30, || {
        stat(&mut p, "repl_resync_holds") == 0
    });
    drop(p);
    replica.stop();
    primary.stop();
    let _ = std::fs::remove_dir_all(dir);
}
