//! `kura proxy --from-nutcracker` and `--check-config` (issue 43): twemproxy's
//! own example configuration translates (its memcache pools kept, its redis
//! pools and the settings kura proxy has no equivalent for named), the
//! translation passes the check, and a translated pool places keys where
//! nutcracker does: keys set through nutcracker are all read back through
//! kura proxy in front of the same backends (ketama with a hash tag, and
//! modula over weights).

mod common;

use std::process::{Command, Output, Stdio};

use common::proxy::{backends, have, proxy_on, reply, Kind};
use common::{kura, Server};

/// Debian's copy of twemproxy's conf/nutcracker.yml.
const EXAMPLE: &str = "/usr/share/doc/nutcracker/examples/nutcracker.yml";
const NUTCRACKER: &str = "/usr/sbin/nutcracker";

fn run(args: &[&str]) -> Output {
    kura().args(args).output().unwrap()
}

/// Translates `yml`; the TOML and the notes.
fn translate(yml: &std::path::Path) -> (String, String) {
    let out = run(&["proxy", "--from-nutcracker", yml.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (text(out.stdout), text(out.stderr))
}

/// `kura proxy --check-config` on `toml`: whether it passed, and what it said.
fn check(dir: &std::path::Path, toml: &str) -> (bool, String) {
    let path = dir.join("translated.toml");
    std::fs::write(&path, toml).unwrap();
    let out = run(&[
        "proxy",
        "--check-config",
        "--config",
        path.to_str().unwrap(),
    ]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said)
}

#[test]
fn twemproxys_example_translates_and_passes_the_check() {
    if !have(EXAMPLE, "nutcracker") {
        return;
    }
    let (toml, notes) = translate(std::path::Path::new(EXAMPLE));
    for pool in ["gamma", "delta", "omega"] {
        assert!(toml.contains(&format!("[pools.{pool}]")), "{toml}");
    }
    assert!(!toml.contains("[pools.alpha]") && !toml.contains("[pools.beta]"));
    assert!(toml.contains("servers = [\"127.0.0.1:11212:1\", \"127.0.0.1:11213:1\"]"));
    assert!(toml.contains("hash = \"hsieh\""), "{toml}");
    assert!(toml.contains("listen = \"127.0.0.1:22123\"\ndefault_pool = \"gamma\""));
    for named in [
        "pool alpha: a redis pool",
        "pool beta: a redis pool",
        "pool gamma: backlog",
        "pool gamma: preconnect",
        "pool omega: listen: /tmp/gamma",
        "auto_eject_hosts",
    ] {
        assert!(notes.contains(named), "{named} not named:\n{notes}");
    }
    let dir = common::tempdir("proxy-nutcracker-example");
    let (ok, said) = check(&dir, &toml);
    assert!(ok && said.contains("configuration OK: 3 pools"), "{said}");
    // And a broken one fails, saying why.
    let (ok, said) = check(
        &dir,
        "[pools.a]\nservers = [\"h:1\"]\nring = \"modula\"\nhash = \"nope\"\n",
    );
    assert!(!ok && said.contains("nope"), "{said}");
}

#[test]
fn a_translated_pool_reads_what_nutcracker_wrote() {
    if !have(NUTCRACKER, "nutcracker") {
        return;
    }
    let s = backends(Kind::Kura, 3);
    let list: Vec<String> = s
        .iter()
        .zip([2, 1, 1])
        .map(|(b, w)| format!("   - 127.0.0.1:{}:{w}\n", b.port))
        .collect();
    let cases = [
        "hash: murmur\n  distribution: ketama\n  hash_tag: \"{}\"",
        "hash: fnv1a_64\n  distribution: modula",
    ];
    for (round, settings) in cases.into_iter().enumerate() {
        let dir = common::tempdir(&format!("proxy-nutcracker-{round}"));
        let port = common::free_port();
        let yml = format!(
            "pool:\n  listen: 127.0.0.1:{port}\n  {settings}\n  auto_eject_hosts: false\n  \
             timeout: 5000\n  servers:\n{}",
            list.concat()
        );
        let yml_path = dir.join("nutcracker.yml");
        std::fs::write(&yml_path, yml).unwrap();
        let child = Command::new(NUTCRACKER)
            .arg("-c")
            .arg(&yml_path)
            .args(["-s", &common::free_port().to_string(), "-a", "127.0.0.1"])
            .arg("-o")
            .arg(dir.join("nutcracker.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let nutcracker = Server::adopt(child, "127.0.0.1", port);
        let keys: Vec<String> = (0..300)
            .map(|i| format!("k{round}:{i}:{{{}}}", i % 7))
            .collect();
        let mut n = nutcracker.connect();
        for k in &keys {
            assert_eq!(
                reply(&mut n, format!("set {k} 0 0 2\r\nok\r\n").as_bytes()),
                "STORED\r\n"
            );
        }
        let (toml, _) = translate(&yml_path);
        let cfg = dir.join("kura.toml");
        std::fs::write(&cfg, &toml).unwrap();
        let p = proxy_on(common::free_port(), &["--config", cfg.to_str().unwrap()]);
        let mut c = p.connect();
        for k in &keys {
            let r = reply(&mut c, format!("get {k}\r\n").as_bytes());
            assert_eq!(r, format!("VALUE {k} 0 2\r\nok\r\nEND\r\n"), "{settings}");
        }
        // Each key on one backend, and more than one backend used.
        let held: Vec<usize> = s
            .iter()
            .map(|b| {
                let mut d = b.connect();
                let n = keys
                    .iter()
                    .filter(|k| reply(&mut d, format!("get {k}\r\n").as_bytes()) != "END\r\n")
                    .count();
                assert_eq!(reply(&mut d, b"flush_all\r\n"), "OK\r\n");
                n
            })
            .collect();
        assert_eq!(held.iter().sum::<usize>(), keys.len(), "{held:?}");
        assert!(held.iter().filter(|&&n| n > 0).count() > 1, "{held:?}");
    }
}
