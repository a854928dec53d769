//! Test hosts of the test's own, in network namespaces: a namespace reached
//! over veth pairs, whose links can be made lossy or cut by nftables rules
//! inside it (packets dropped silently, in both directions: no RST, no
//! ICMP, so a peer sees only silence, as across a real partition), or slow
//! by a token bucket on the outer end. Everything is removed when the
//! `Host` is dropped, failed test or not.
//!
//! This kernel has no netem qdisc (`CONFIG_NET_SCH_NETEM` is not set), so
//! loss is nftables' `numgen random` and delay is a token bucket's queue
//! (or, for a fixed delay, the userspace relay of replication_faults.rs).
//!
//! Needs root, `ip` and `tc` (iproute2) and `nft` (nftables). Without them
//! a test skips with a message; under CI (`CI` set), where .ci/run installs
//! them and runs as root, a missing capability fails the test instead.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// One veth pair between the test's namespace and the host.
pub struct Link {
    /// The end in the test's (root) namespace and its address.
    pub outer: String,
    pub outer_ip: String,
    /// The end inside the host and its address.
    pub inner: String,
    pub inner_ip: String,
}

/// What the host's nftables rules do to a link's packets.
#[derive(Clone, Copy, Default)]
struct Fault {
    /// Packets dropped at random, per thousand.
    loss_per_mille: u32,
    /// Every packet dropped.
    cut: bool,
}

/// A network namespace and its links; see the module documentation.
pub struct Host {
    pub ns: String,
    pub links: Vec<Link>,
    faults: RefCell<Vec<Fault>>,
}

/// Hosts made by this test process so far (tests of one binary run in
/// parallel and must not share names or subnets).
static MADE: AtomicU32 = AtomicU32::new(0);

impl Host {
    /// A host with `links` veth pairs, or why it cannot be made here.
    pub fn build(tag: &str, links: usize) -> Result<Host, String> {
        for tool in ["ip", "tc", "nft"] {
            if !run(tool, &["-V"]) && !run(tool, &["--version"]) {
                return Err(format!("`{tool}` is not installed (iproute2, nftables)"));
            }
        }
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let id = (std::process::id() % 50) * 5 + n % 5;
        let ns = format!("kura-{tag}-{}-{n}", std::process::id());
        // Left behind by a run that was killed: gone before we begin.
        run("ip", &["netns", "del", &ns]);
        if !run("ip", &["netns", "add", &ns]) {
            return Err("cannot make a network namespace (`ip netns add`): not root?".into());
        }
        let mut host = Host {
            ns,
            links: Vec::new(),
            faults: RefCell::new(vec![Fault::default(); links]),
        };
        host.ip(&["link", "set", "lo", "up"]);
        for l in 0..links {
            // Listed before it is made, so a step that fails below leaves
            // nothing behind (the drop deletes what was listed).
            host.links.push(Link {
                outer: format!("kn{id}l{l}a"),
                outer_ip: format!("10.{}.{id}.1", 230 + l),
                inner: format!("kn{id}l{l}b"),
                inner_ip: format!("10.{}.{id}.2", 230 + l),
            });
            let link = &host.links[l];
            run("ip", &["link", "del", &link.outer]);
            must(
                "ip",
                &[
                    "link",
                    "add",
                    &link.outer,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &link.inner,
                ],
            );
            must("ip", &["link", "set", &link.inner, "netns", &host.ns]);
            must(
                "ip",
                &[
                    "addr",
                    "add",
                    &format!("{}/24", link.outer_ip),
                    "dev",
                    &link.outer,
                ],
            );
            must("ip", &["link", "set", &link.outer, "up"]);
            host.ip(&[
                "addr",
                "add",
                &format!("{}/24", link.inner_ip),
                "dev",
                &link.inner,
            ]);
            host.ip(&["link", "set", &link.inner, "up"]);
        }
        host.apply();
        Ok(host)
    }

    /// [`Host::build`], or `None` after saying why the test is skipped;
    /// under CI a host that cannot be made fails the test.
    pub fn or_skip(test: &str, tag: &str, links: usize) -> Option<Host> {
        match Host::build(tag, links) {
            Ok(h) => Some(h),
            Err(why) if std::env::var_os("CI").is_some() => {
                panic!("{test}: CI must run this test, but {why}")
            }
            Err(why) => {
                eprintln!("SKIPPED {test}: {why}");
                None
            }
        }
    }

    /// Runs `ip ARGS` inside the host.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.ns, "ip"];
        all.extend_from_slice(args);
        must("ip", &all);
    }

    /// A command that runs `program` inside the host (`ip netns exec`).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns]).arg(program);
        cmd
    }

    /// Drops `per_mille` of link `l`'s packets at random, both ways (0: none).
    pub fn loss(&self, l: usize, per_mille: u32) {
        self.faults.borrow_mut()[l].loss_per_mille = per_mille;
        self.apply();
    }

    /// Cuts link `l` (every packet dropped, both ways) or heals it.
    pub fn cut(&self, l: usize, on: bool) {
        self.faults.borrow_mut()[l].cut = on;
        self.apply();
    }

    /// Packets the host's rules have dropped so far.
    pub fn dropped(&self) -> u64 {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns,
                "nft",
                "list",
                "table",
                "inet",
                "kura_fault",
            ])
            .output()
            .expect("nft list");
        String::from_utf8_lossy(&out.stdout)
            .split("counter packets ")
            .skip(1)
            .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    /// Makes link `l` a slow one: a token bucket of `rate` (tc's units) on
    /// its outer end, so what the test's side sends queues (up to 400 ms)
    /// and arrives late; `None` takes it off.
    pub fn rate(&self, l: usize, rate: Option<&str>) {
        let dev = self.links[l].outer.as_str();
        match rate {
            Some(r) => must(
                "tc",
                &[
                    "qdisc", "add", "dev", dev, "root", "tbf", "rate", r, "burst", "16kb",
                    "latency", "400ms",
                ],
            ),
            None => must("tc", &["qdisc", "del", "dev", dev, "root"]),
        }
    }

    /// Writes the host's nftables table anew from the links' faults (its
    /// counters start over).
    fn apply(&self) {
        let mut rules = String::new();
        for (link, f) in self.links.iter().zip(self.faults.borrow().iter()) {
            for (chain, dir) in [("input", "iifname"), ("output", "oifname")] {
                if f.cut {
                    rules += &format!(
                        "add rule inet kura_fault {chain} {dir} \"{}\" counter drop\n",
                        link.inner
                    );
                } else if f.loss_per_mille > 0 {
                    rules += &format!(
                        "add rule inet kura_fault {chain} {dir} \"{}\" numgen random mod 1000 < {} counter drop\n",
                        link.inner, f.loss_per_mille
                    );
                }
            }
        }
        let script = format!(
            "table inet kura_fault {{}}\ndelete table inet kura_fault\n\
             table inet kura_fault {{\n\
             chain input {{ type filter hook input priority 0; policy accept; }}\n\
             chain output {{ type filter hook output priority 0; policy accept; }}\n}}\n{rules}"
        );
        let mut nft = Command::new("ip")
            .args(["netns", "exec", &self.ns, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("nft");
        nft.stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("nft script");
        assert!(nft.wait().is_ok_and(|s| s.success()), "nft -f:\n{script}");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Deleting one end of a veth pair deletes both.
        for link in &self.links {
            run("ip", &["link", "del", &link.outer]);
        }
        run("ip", &["netns", "del", &self.ns]);
    }
}

/// Runs a command (`ip`, `tc`) with `args`; whether it succeeded.
pub fn run(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a command that must succeed.
pub fn must(cmd: &str, args: &[&str]) {
    assert!(run(cmd, args), "{cmd} {}", args.join(" "));
}
