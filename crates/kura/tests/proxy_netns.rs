//! The rejoin scenario with a backend made unreachable by the network, not
//! stopped or killed: it runs on a host in a network namespace of the
//! test's own (kura-testkit's netns), whose link drops every packet while cut
//! (no RST, no ICMP: the proxy sees only silence, as across a partition).
//! Set v1, cut, delete, set v2, heal: the proxy never serves v1, over two
//! flaps.
//!
//! Needs root, iproute2 and nftables: without them it says so and does
//! nothing, except under CI, where it fails (.ci/run installs them).

mod common;

use common::proxy::{
    change_while_away, config, keys_on, never_stale, proxy, set_when_up, until_down, Kind,
};
use kura_testkit::netns::Host;

const TEST: &str = "a_backend_cut_off_by_the_network_never_serves_a_stale_value_on_its_return";

#[test]
fn a_backend_cut_off_by_the_network_never_serves_a_stale_value_on_its_return() {
    let Some(host) = Host::or_skip(TEST, "proxy", 1) else {
        return;
    };
    let inside_ip = host.links[0].inner_ip.clone();
    let b = common::server_in(&host, &inside_ip, &[]);
    let a = common::proxy::backend(Kind::Kura);
    let servers = vec![
        format!("127.0.0.1:{}", a.port),
        format!("{inside_ip}:{}", b.port),
    ];
    let dir = common::tempdir("proxy-netns");
    let health = "request_timeout_ms = 300\nconnect_timeout_ms = 300\nfailure_limit = 2\nprobe_backoff_min_ms = 50\nprobe_backoff_max_ms = 300";
    let cfg = config(&dir, &servers, health);
    let journal = dir.join("journal");
    let p = proxy(&[
        "--config",
        cfg.to_str().unwrap(),
        "--journal-dir",
        journal.to_str().unwrap(),
    ]);
    let mut c = p.connect();
    let keys = keys_on(&servers, 1, 2, "net");
    for flap in 0..2 {
        let v1 = format!("v1-{flap}");
        set_when_up(&mut c, &keys[0], &v1);
        host.cut(0, true);
        until_down(&mut c, &servers[1], &keys[1]);
        assert!(host.dropped() > 0, "the cut dropped nothing");
        change_while_away(&mut c, &keys[0]);
        host.cut(0, false);
        never_stale(&mut c, &keys[0], &v1);
    }
}
