//! The replication link across a network of the test's own: the replica
//! runs in a network namespace made here, reached by two veth pairs (one
//! carries the replication stream, the other the test's questions, so the
//! replica can be asked while its link is cut). The stream survives a slow
//! link (a token bucket), and `tc netem` delay and loss where the kernel
//! has netem; a partition (the link's veth pair down) makes the replica
//! say its link is down and how long it has not heard from the primary,
//! keep serving what it has, and resume with a partial resync once healed.
//!
//! Needs root (network namespaces); without the capability it says so and
//! does nothing. CI runs as root.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{caught_up, contents, load, same};
use common::{free_port, must, run, stat, stat_str, Server};

/// The namespace and its links; removed when dropped.
struct Net {
    ns: String,
    /// Root-side ends of the stream link and the management link.
    link: String,
    mgmt: String,
    /// Addresses: the primary's on the stream link, the replica's on the
    /// management link.
    primary_ip: String,
    replica_ip: String,
}

impl Net {
    /// Builds it, or says why it cannot.
    fn build() -> Result<Net, String> {
        let id = std::process::id() % 200 + 20;
        let ns = format!("kura-repl-{}", std::process::id());
        if !run("ip", &["netns", "add", &ns]) {
            return Err("cannot make a network namespace (`ip netns add`): not root?".into());
        }
        let net = Net {
            link: format!("krl{id}a"),
            mgmt: format!("krm{id}a"),
            primary_ip: format!("10.231.{id}.1"),
            replica_ip: format!("10.232.{id}.2"),
            ns,
        };
        for (root, peer, subnet) in [
            (&net.link, format!("krl{id}b"), format!("10.231.{id}")),
            (&net.mgmt, format!("krm{id}b"), format!("10.232.{id}")),
        ] {
            must(
                "ip",
                &["link", "add", root, "type", "veth", "peer", "name", &peer],
            );
            must("ip", &["link", "set", &peer, "netns", &net.ns]);
            must(
                "ip",
                &["addr", "add", &format!("{subnet}.1/24"), "dev", root],
            );
            must("ip", &["link", "set", root, "up"]);
            let inside = |args: &[&str]| {
                let mut all = vec!["netns", "exec", &net.ns, "ip"];
                all.extend_from_slice(args);
                must("ip", &all);
            };
            inside(&["addr", "add", &format!("{subnet}.2/24"), "dev", &peer]);
            inside(&["link", "set", &peer, "up"]);
        }
        must(
            "ip",
            &["netns", "exec", &net.ns, "ip", "link", "set", "lo", "up"],
        );
        Ok(net)
    }

    /// Cuts (false) or heals (true) the stream link.
    fn set_link(&self, up: bool) {
        must(
            "ip",
            &["link", "set", &self.link, if up { "up" } else { "down" }],
        );
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both.
        run("ip", &["link", "del", &self.link]);
        run("ip", &["link", "del", &self.mgmt]);
        run("ip", &["netns", "del", &self.ns]);
    }
}

/// A kura server inside the namespace, reached on the management link.
fn replica_in(net: &Net, primary_port: u16) -> Server {
    let port = free_port();
    let child = Command::new("ip")
        .args(["netns", "exec", &net.ns])
        .arg(common::kura().get_program())
        .args(["server", "-t", "2", "-p", &port.to_string()])
        .args(["-l", &net.replica_ip])
        .args([
            "--replica-of",
            &format!("{}:{primary_port}", net.primary_ip),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server::adopt(child, &net.replica_ip, port)
}

fn wait_for(server: &Server, name: &str, want: &str) {
    let mut c = server.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while stat_str(&mut c, name) != want {
        assert!(Instant::now() < deadline, "{name} never became {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_stream_crosses_a_slow_lossy_network_and_a_partition() {
    let net = match Net::build() {
        Ok(net) => net,
        Err(why) => {
            eprintln!("SKIPPED the_stream_crosses_a_slow_lossy_network_and_a_partition: {why}");
            return;
        }
    };
    let primary = Server::start_in_memory(&["-l", &format!("127.0.0.1,{}", net.primary_ip)]);
    let replica = replica_in(&net, primary.port);
    load(&primary, 0, 1000);
    caught_up(&primary, &replica);

    // A slow link: a token bucket of 2 Mbit/s on the primary's side.
    must(
        "tc",
        &[
            "qdisc", "add", "dev", &net.link, "root", "tbf", "rate", "2mbit", "burst", "16kb",
            "latency", "400ms",
        ],
    );
    for round in 1..4 {
        load(&primary, round, 1000);
    }
    caught_up(&primary, &replica);
    same(
        &contents(&replica, 1000),
        &contents(&primary, 1000),
        "over a slow link",
    );
    must("tc", &["qdisc", "del", "dev", &net.link, "root"]);

    // Delay and loss, where the kernel has netem.
    let netem = run(
        "tc",
        &[
            "qdisc", "add", "dev", &net.link, "root", "netem", "delay", "30ms", "10ms", "loss",
            "3%",
        ],
    );
    if netem {
        for round in 4..7 {
            load(&primary, round, 1000);
        }
        caught_up(&primary, &replica);
        same(
            &contents(&replica, 1000),
            &contents(&primary, 1000),
            "with delay and loss",
        );
        must("tc", &["qdisc", "del", "dev", &net.link, "root"]);
    } else {
        eprintln!("netem is not in this kernel (`tc qdisc add ... netem` refused): delay and loss not tested");
    }

    // A partition: the stream's link goes down while the primary takes
    // writes; the replica, still asked over the other link, says its link
    // is down and how long it has not heard, and serves what it has.
    let mut r = replica.connect();
    let partial = stat(&mut r, "repl_partial_resyncs");
    let full = stat(&mut r, "repl_full_resyncs");
    let applied = stat(&mut r, "repl_applied_seq");
    net.set_link(false);
    load(&primary, 7, 1000);
    wait_for(&replica, "repl_link", "down");
    let heard: f64 = stat_str(&mut r, "repl_last_heard_seconds").parse().unwrap();
    assert!(heard >= 5.0, "last heard {heard} s ago with the link cut");
    // How stale it may be: since it last had all the primary had said.
    let lag: f64 = stat_str(&mut r, "repl_lag_seconds").parse().unwrap();
    assert!(lag >= 5.0, "lag {lag} s with the link cut");
    assert_eq!(stat(&mut r, "repl_applied_seq"), applied);
    assert!(common::get(&mut r, "k1").is_some() || common::get(&mut r, "k0").is_some());
    net.set_link(true);
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
    drop(r);
    replica.stop();
    primary.stop();
}
