//! The rejoin scenario with a backend made unreachable by the network, not
//! stopped or killed: it runs in a network namespace of the test's own,
//! and a blackhole route in that namespace silently drops everything it
//! would send back to the proxy (no RST, no ICMP: the proxy sees only
//! silence, as across a partition). Set v1, cut, delete, set v2, heal:
//! the proxy never serves v1, over two flaps.
//!
//! Needs root (network namespaces); without it the test says so and does
//! nothing. CI runs as root.

mod common;

use std::process::{Command, Stdio};

use common::proxy::{
    change_while_away, config, keys_on, never_stale, proxy, set_when_up, until_down, Kind,
};
use common::{free_port, must, run, Server};

/// A namespace reached over one veth pair; removed when dropped.
struct Net {
    ns: String,
    link: String,
    root_ip: String,
    inside_ip: String,
}

impl Net {
    fn build() -> Result<Net, String> {
        let id = std::process::id() % 200 + 20;
        let ns = format!("kura-proxy-{}", std::process::id());
        if !run("ip", &["netns", "add", &ns]) {
            return Err("cannot make a network namespace (`ip netns add`): not root?".into());
        }
        let net = Net {
            ns,
            link: format!("kpx{id}a"),
            root_ip: format!("10.233.{id}.1"),
            inside_ip: format!("10.233.{id}.2"),
        };
        let peer = format!("kpx{id}b");
        must(
            "ip",
            &[
                "link", "add", &net.link, "type", "veth", "peer", "name", &peer,
            ],
        );
        must("ip", &["link", "set", &peer, "netns", &net.ns]);
        must(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/24", net.root_ip),
                "dev",
                &net.link,
            ],
        );
        must("ip", &["link", "set", &net.link, "up"]);
        net.inside(&[
            "addr",
            "add",
            &format!("{}/24", net.inside_ip),
            "dev",
            &peer,
        ]);
        net.inside(&["link", "set", &peer, "up"]);
        net.inside(&["link", "set", "lo", "up"]);
        Ok(net)
    }

    fn inside(&self, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.ns, "ip"];
        all.extend_from_slice(args);
        must("ip", &all);
    }

    /// Drops (true) or lets through (false) everything sent to the proxy.
    fn cut(&self, on: bool) {
        let route = format!("{}/32", self.root_ip);
        self.inside(&["route", if on { "add" } else { "del" }, "blackhole", &route]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        run("ip", &["link", "del", &self.link]);
        run("ip", &["netns", "del", &self.ns]);
    }
}

#[test]
fn a_backend_cut_off_by_the_network_never_serves_a_stale_value_on_its_return() {
    let net = match Net::build() {
        Ok(n) => n,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let port = free_port();
    let child = Command::new("ip")
        .args(["netns", "exec", &net.ns])
        .arg(common::kura().get_program())
        .args([
            "server",
            "-t",
            "2",
            "-p",
            &port.to_string(),
            "-l",
            &net.inside_ip,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let b = Server::adopt(child, &net.inside_ip, port);
    let a = common::proxy::backend(Kind::Kura);
    let servers = vec![
        format!("127.0.0.1:{}", a.port),
        format!("{}:{}", net.inside_ip, b.port),
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
        net.cut(true);
        until_down(&mut c, &servers[1], &keys[1]);
        change_while_away(&mut c, &keys[0]);
        net.cut(false);
        never_stale(&mut c, &keys[0], &v1);
    }
}
