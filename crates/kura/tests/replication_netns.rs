//! The replication link across a network of the test's own (kura-testkit's netns):
//! the replica runs on a host in a network namespace, reached by two links
//! (one carries the replication stream, the other the test's questions, so
//! the replica can be asked while its stream is cut). The stream survives
//! a slow link (a token bucket's queue) and packet loss (nftables dropping
//! 5% of the link's packets both ways); a partition (every packet of the
//! stream's link dropped silently) makes the replica say its link is down
//! and how long it has not heard from the primary, and the primary say how
//! far behind the replica is, while the replica keeps serving what it has;
//! healed, it resumes with a partial resync and ends identical. A replica
//! that resyncs whole across a slow link while writes go on gets there in
//! one full resync: what is written while the store is sent is held for
//! it beyond the backlog (backlog/hold.rs).
//!
//! Needs root, iproute2 and nftables: without them it says so and does
//! nothing, except under CI, where it fails (.ci/run installs them).

mod common;

use common::cluster::{caught_up, contents, fill_mb, load, resynced_once, same, wait_stat};
use common::{stat, stat_str, Server};
use kura_testkit::netns::Host;

const TEST: &str = "the_stream_crosses_a_slow_lossy_network_and_a_partition";

/// A field of the primary's `repl_replica_0` line
/// (`addr=...,acked_seq=...,sent_seq=...,lag_records=...,lag_bytes=...`).
fn replica_field(primary: &Server, field: &str) -> u64 {
    let line = stat_str(&mut primary.connect(), "repl_replica_0");
    line.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("no {field} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn the_stream_crosses_a_slow_lossy_network_and_a_partition() {
    let Some(host) = Host::or_skip(TEST, "repl", 2) else {
        return;
    };
    const STREAM: usize = 0;
    let (stream, mgmt) = (&host.links[STREAM], &host.links[1]);
    let primary = Server::start_in_memory(&["-l", &format!("127.0.0.1,{}", stream.outer_ip)]);
    let replica = common::server_in(
        &host,
        &mgmt.inner_ip,
        &[
            "--replica-of",
            &format!("{}:{}", stream.outer_ip, primary.port),
        ],
    );
    load(&primary, 0, 1000);
    caught_up(&primary, &replica);

    // A slow link: a token bucket of 2 Mbit/s on the primary's side.
    host.rate(STREAM, Some("2mbit"));
    for round in 1..4 {
        load(&primary, round, 1000);
    }
    caught_up(&primary, &replica);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "over a slow link",
    );
    host.rate(STREAM, None);

    // Loss: 5% of the stream's packets dropped, both ways; TCP resends.
    // (Written until the rules have dropped some: the kernel may carry a
    // round in a few large packets, and 5% of a few is often none.)
    host.loss(STREAM, 50);
    for round in 4..44 {
        load(&primary, round, 1000);
        if round >= 7 && host.dropped() > 0 {
            break;
        }
    }
    caught_up(&primary, &replica);
    assert!(
        host.dropped() > 0,
        "the lossy link dropped nothing in 40 rounds"
    );
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "over a lossy link",
    );
    host.loss(STREAM, 0);

    // A partition: every packet of the stream's link dropped while the
    // primary takes writes. The replica, still asked over the other link,
    // says its link is down and how long it has not heard, and serves what
    // it has; the primary counts what the replica has not acknowledged.
    let mut r = replica.connect();
    let mut p = primary.connect();
    let partial = stat(&mut r, "repl_partial_resyncs");
    let full = stat(&mut r, "repl_full_resyncs");
    let applied = stat(&mut r, "repl_applied_seq");
    let written = stat(&mut p, "repl_written_seq");
    host.cut(STREAM, true);
    load(&primary, 8, 1000);
    let written_after = stat(&mut p, "repl_written_seq");
    assert!(written_after > written);
    wait_stat(&replica, "repl_link", "down");
    let heard: f64 = stat_str(&mut r, "repl_last_heard_seconds").parse().unwrap();
    assert!(heard >= 5.0, "last heard {heard} s ago with the link cut");
    // How stale it may be: since it last had all the primary had said.
    let lag: f64 = stat_str(&mut r, "repl_lag_seconds").parse().unwrap();
    assert!(lag >= 5.0, "lag {lag} s with the link cut");
    assert_eq!(stat(&mut r, "repl_applied_seq"), applied);
    assert!(common::get(&mut r, "k1").is_some() || common::get(&mut r, "k0").is_some());
    // The primary still holds the silent stream (TCP has not given up; the
    // replica's new connections are dropped) and says the replica is behind
    // by at least what was written during the cut.
    assert_eq!(stat(&mut p, "repl_replicas"), 1);
    let acked = replica_field(&primary, "acked_seq");
    assert!(acked <= applied, "acknowledged {acked}, applied {applied}");
    let behind = replica_field(&primary, "lag_records");
    assert!(
        behind >= written_after - written,
        "the primary says the replica is {behind} records behind; {} were written during the cut",
        written_after - written
    );
    assert!(host.dropped() > 0);
    host.cut(STREAM, false);
    caught_up(&primary, &replica);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "after the partition",
    );
    assert_eq!(stat(&mut r, "repl_full_resyncs"), full);
    assert!(stat(&mut r, "repl_partial_resyncs") > partial);
    let lag: f64 = stat_str(&mut r, "repl_lag_seconds").parse().unwrap();
    assert!(lag < 5.0, "lag {lag} s once caught up");
    drop((r, p));
    replica.stop();
    primary.stop();
}

#[test]
fn a_full_resync_across_a_slow_link_while_writes_go_on_happens_once() {
    let Some(host) = Host::or_skip(
        "a_full_resync_across_a_slow_link_while_writes_go_on_happens_once",
        "resync",
        2,
    ) else {
        return;
    };
    const STREAM: usize = 0;
    let (stream, mgmt) = (&host.links[STREAM], &host.links[1]);
    // A 512 KB backlog and a 4 MB store sent at 8 Mbit/s: some four
    // seconds of sending, during which twice the backlog is written.
    let primary = Server::start_in_memory(&[
        "-l",
        &format!("127.0.0.1,{}", stream.outer_ip),
        "--repl-backlog-size",
        "512k",
    ]);
    fill_mb(&primary, "big", 4);
    host.rate(STREAM, Some("8mbit"));
    let replica = common::server_in(
        &host,
        &mgmt.inner_ip,
        &[
            "--replica-of",
            &format!("{}:{}", stream.outer_ip, primary.port),
        ],
    );
    let mut p = primary.connect();
    // Twenty rounds (about 1.1 MB of records), begun as the resync is.
    // Were they written for longer than the four seconds of sending, they
    // would be written at under a quarter of the link's rate: a follower
    // let go within half the backlog of the last record keeps up (what is
    // written while it sends a frame is a quarter of the frame).
    common::cluster::wait_for("the full resync to begin", 30, || {
        stat(&mut p, "repl_full_resyncs") == 1
    });
    for round in 0..20 {
        load(&primary, round, 1000);
    }
    resynced_once(
        &primary,
        &replica,
        "big3-999",
        "a full resync across a slow link",
    );
    host.rate(STREAM, None);
    drop(p);
    replica.stop();
    primary.stop();
}
