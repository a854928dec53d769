//! Third-party programs the tests compare with or drive (memcached, redis-server, client
//! libraries): located, and when missing skipped with a message, or a failure where CI
//! requires them (`CI=true`, or `KURA_REQUIRE_MEMCACHED=1`; `.ci/run` installs them all).

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Whether a missing tool fails the test rather than skipping it.
pub fn required() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
        || std::env::var("KURA_REQUIRE_MEMCACHED").as_deref() == Ok("1")
}

/// Runs `probe`; when it fails, panics where tools are [`required`] and otherwise prints
/// "skipped" and returns false.
pub fn have(what: &str, probe: &mut Command) -> bool {
    let ok = probe
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !required(),
            "{what} is not installed, and CI requires it (.ci/run installs it); probe: {probe:?}"
        );
        println!("skipped: {what} is not installed");
    }
    ok
}

/// The program at `$var`, else `default`, when it exists; otherwise `None` after printing
/// that the test is skipped (a panic where tools are [`required`]).
pub fn program(what: &str, var: &str, default: &str) -> Option<PathBuf> {
    let bin = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    if bin.exists() {
        return Some(bin);
    }
    assert!(
        !required(),
        "{what} is not installed at {} and CI requires it (.ci/run installs Debian's; or set {var})",
        bin.display()
    );
    println!("skipped: {what} is not installed (apt-get install {what}, or set {var})");
    None
}

/// Debian's memcached, the anchor of the differential tests: `$KURA_MEMCACHED` or
/// /usr/bin/memcached.
pub fn memcached_bin() -> Option<PathBuf> {
    program("memcached", "KURA_MEMCACHED", "/usr/bin/memcached")
}

/// Debian's redis-server: `$KURA_REDIS_SERVER` or /usr/bin/redis-server.
pub fn redis_server_bin() -> Option<PathBuf> {
    program("redis-server", "KURA_REDIS_SERVER", "/usr/bin/redis-server")
}
