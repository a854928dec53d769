//! Debian's memcached as the differential tests run it: on a free loopback port, 64 MB, two
//! workers, no UDP; [`Memcached::start_with`] also turns off its LRU maintainer and crawler,
//! whose moves make some replies differ at random.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::process::await_listen;
use crate::{free_port, ChildGuard};

/// A memcached child process, killed when dropped.
pub struct Memcached {
    _child: ChildGuard,
    pub addr: SocketAddr,
}

impl Memcached {
    pub fn start(bin: &Path) -> Memcached {
        Memcached::start_with(bin, &[])
    }

    /// Starts `bin` with the differential tests' settings plus `extra` args.
    pub fn start_with(bin: &Path, extra: &[&str]) -> Memcached {
        let mut args = extra.to_vec();
        // memcached's LRU maintainer and crawler threads briefly hold
        // references to items, and an item someone else holds is not
        // rewritten in place: an incr then makes a new item (no space
        // padding, not fetched, token and stale marks gone) at random.
        // Without them the replies are deterministic; the protocol is the
        // same.
        args.extend(["-o", "no_lru_crawler,no_lru_maintainer"]);
        Memcached::start_default(bin, &args)
    }

    /// Starts `bin` with the common settings (port, `-m 64 -t 2`) plus
    /// `extra`, its LRU maintainer and crawler left on as by default.
    pub fn start_default(bin: &Path, extra: &[&str]) -> Memcached {
        for _ in 0..5 {
            let port = free_port();
            let child = Command::new(bin)
                .args([
                    "-u",
                    "root",
                    "-U",
                    "0",
                    "-l",
                    "127.0.0.1",
                    "-m",
                    "64",
                    "-t",
                    "2",
                ])
                .args(["-p", &port.to_string()])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            // None: it exited, most likely because the port was taken meanwhile; try another.
            if let Some(child) = await_listen(child, addr, "memcached", Duration::from_secs(10)) {
                return Memcached {
                    _child: child,
                    addr,
                };
            }
        }
        panic!("memcached failed to start 5 times");
    }
}
