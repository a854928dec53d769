//! twemproxy's nutcracker in front of the test servers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use std::time::Duration;

use kura_testkit::process::await_listen;

use super::{connect, free_port, Process};

/// nutcracker started on a config, killed when dropped.
pub struct Nutcracker {
    _proc: Process,
    pub addr: SocketAddr,
}

impl Nutcracker {
    /// Starts `bin` with one pool listening on a free port, distribution
    /// ketama, `hash`, over `servers` (twemproxy's `host:port:weight
    /// [name]` lines).
    pub fn start(bin: &Path, dir: &Path, hash: &str, servers: &[String]) -> Nutcracker {
        let settings = format!("hash: {hash}\n  distribution: ketama");
        Nutcracker::start_with(bin, dir, &settings, servers)
    }

    /// As [`Nutcracker::start`], with the pool's `settings` lines (hash,
    /// distribution, hash_tag) given whole.
    pub fn start_with(bin: &Path, dir: &Path, settings: &str, servers: &[String]) -> Nutcracker {
        for attempt in 0..5 {
            let port = free_port();
            let stats = free_port();
            let conf = dir.join(format!("nutcracker-{attempt}.yml"));
            let mut yml = format!(
                "pool:\n  listen: 127.0.0.1:{port}\n  {settings}\n  \
                 timeout: 5000\n  auto_eject_hosts: false\n  servers:\n"
            );
            for s in servers {
                yml.push_str(&format!("   - {s}\n"));
            }
            std::fs::write(&conf, yml).expect("write nutcracker's config");
            let child = Command::new(bin)
                .arg("-c")
                .arg(&conf)
                .arg("-o")
                .arg(dir.join("nutcracker.log"))
                .args(["-s", &stats.to_string(), "-a", "127.0.0.1"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            if let Some(child) = await_listen(child, addr, "nutcracker", Duration::from_secs(10)) {
                return Nutcracker { _proc: child, addr };
            }
        }
        let log = std::fs::read_to_string(dir.join("nutcracker.log")).unwrap_or_default();
        panic!("nutcracker failed to start 5 times; its log:\n{log}");
    }

    /// Sets every key to "1" through the proxy (pipelined text sets).
    pub fn set_all(&self, keys: &[String]) {
        let c = connect(self.addr);
        let mut w = c.try_clone().expect("clone the connection");
        let mut r = BufReader::new(c);
        for batch in keys.chunks(100) {
            let mut req = Vec::new();
            for k in batch {
                req.extend_from_slice(b"set ");
                req.extend_from_slice(k.as_bytes());
                req.extend_from_slice(b" 0 0 1\r\n1\r\n");
            }
            w.write_all(&req).expect("send sets");
            for k in batch {
                let mut line = Vec::new();
                r.read_until(b'\n', &mut line).expect("read a set reply");
                assert_eq!(
                    line,
                    b"STORED\r\n",
                    "nutcracker: set {k:?}: {:?}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
        let mut rest = Vec::new();
        let _ = w.shutdown(std::net::Shutdown::Write);
        let _ = r.read_to_end(&mut rest);
    }
}
