//! memcached's port file: with `MEMCACHED_PORT_FILENAME` set, the ports the
//! server bound are written there once it listens, one line per socket in
//! memcached's format (`TCP INET: 11211`, `TCP INET6: ...`, `UDP INET: ...`),
//! TCP first. Test harnesses start a server on a free port and read it back.
//! As memcached does, the lines go to `<file>.lck` (appended to, if a stale
//! one is there), which is then renamed to `<file>`, so a reader never sees
//! half a file.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The environment variable memcached reads the file's name from.
pub const ENV: &str = "MEMCACHED_PORT_FILENAME";

/// The file's contents for these listeners.
pub fn contents(tcp: &[SocketAddr], udp: &[SocketAddr]) -> String {
    let mut text = String::new();
    for (proto, addrs) in [("TCP", tcp), ("UDP", udp)] {
        for a in addrs {
            let family = if a.is_ipv4() { "INET" } else { "INET6" };
            let _ = writeln!(text, "{proto} {family}: {}", a.port());
        }
    }
    text
}

/// Writes `contents` to `path` through `<path>.lck`.
///
/// # Errors
/// The `.lck` file cannot be written or renamed.
pub fn write(path: &Path, contents: &str) -> std::io::Result<()> {
    let mut lck = OsString::from(path.as_os_str());
    lck.push(".lck");
    let lck = PathBuf::from(lck);
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&lck)?
        .write_all(contents.as_bytes())?;
    std::fs::rename(&lck, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_format_tcp_first() {
        let tcp: Vec<SocketAddr> = vec![
            "127.0.0.1:4000".parse().unwrap(),
            "[::1]:4001".parse().unwrap(),
        ];
        let udp: Vec<SocketAddr> = vec!["127.0.0.1:4002".parse().unwrap()];
        assert_eq!(
            contents(&tcp, &udp),
            "TCP INET: 4000\nTCP INET6: 4001\nUDP INET: 4002\n"
        );
        assert_eq!(contents(&[], &[]), "");
    }

    #[test]
    fn written_through_a_lck_file() {
        let dir = std::env::temp_dir().join(format!("kura-portfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ports");
        std::fs::write(dir.join("ports.lck"), "stale\n").unwrap();
        write(&path, "TCP INET: 1\n").unwrap();
        // Appended to a stale .lck, as memcached's fopen(.., "a") does.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "stale\nTCP INET: 1\n"
        );
        assert!(!dir.join("ports.lck").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
