//! Differential test of memcached's ASCII authentication (`-Y`): the same
//! requests, one at a time on fresh connections, go to Debian's memcached
//! 1.6.18 and to kura, both started with the same auth file, and the
//! replies must be equal byte for byte.
//!
//! Every request before authentication gets exactly one reply line (or a
//! close): memcached keeps only the last reply of what it read in one go
//! before authentication (each reply overwrites the one before), so
//! pipelined requests would compare its quirk, not the protocol. After
//! authentication each request is followed by `mn`, whose `MN` ends the
//! read. kura's intended difference, closing a connection after three
//! failures, is not exercised: no connection fails three times.
//!
//! Run: `cargo test -p kura-server --test ascii_auth_differential`

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{Memcached, TestServer};

const USERS: &str = "alice:s3cret\nbob:pw\n";

/// One request and how its reply ends.
#[derive(Clone, Copy)]
enum Req {
    /// Before authentication: one line, or the connection closes.
    Line(&'static [u8]),
    /// After: any reply, ended by the `mn` sent after it.
    Then(&'static [u8]),
}

fn exchange(s: &mut TcpStream, req: Req) -> Vec<u8> {
    let (bytes, end): (Vec<u8>, &[u8]) = match req {
        Req::Line(b) => (b.to_vec(), b"\r\n"),
        Req::Then(b) => ([b, b"mn\r\n"].concat(), b"MN\r\n"),
    };
    s.write_all(&bytes).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !got.ends_with(end) {
        if Instant::now() > deadline {
            got.extend_from_slice(b"<no reply>");
            break;
        }
        match s.read(&mut buf) {
            Ok(0) => {
                got.extend_from_slice(b"<closed>");
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => {
                got.extend_from_slice(b"<closed>");
                break;
            }
        }
    }
    got
}

fn run(addr: SocketAddr, script: &[Req]) -> Vec<Vec<u8>> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(50))).ok();
    let mut replies = Vec::new();
    for &req in script {
        let got = exchange(&mut s, req);
        let closed = got.ends_with(b"<closed>");
        replies.push(got);
        if closed {
            break;
        }
    }
    replies
}

fn scripts() -> Vec<(&'static str, Vec<Req>)> {
    use Req::{Line, Then};
    vec![
        (
            "emcache's handshake",
            vec![
                Line(b"set _ _ _ 12\r\nalice s3cret\r\n"),
                Then(b"version\r\n"),
                Then(b"set a 0 0 1\r\nx\r\nget a\r\n"),
                Then(b"set _ _ _ 12\r\nalice s3cret\r\n"),
            ],
        ),
        (
            "a normal set line",
            vec![
                Line(b"set k 5 100 6 noreply\r\nbob pw\r\n"),
                Then(b"get k\r\n"),
            ],
        ),
        (
            "a wrong password, then the right one",
            vec![
                Line(b"set _ _ _ 12\r\nalice wrong1\r\n"),
                Line(b"set _ _ _ 6\r\nbob PW\r\n"),
                Line(b"set _ _ _ 6\r\nbob pw\r\n"),
                Then(b"version\r\n"),
            ],
        ),
        (
            "requests before authenticating",
            vec![
                Line(b"get a\r\n"),
                Line(b"version\r\n"),
                Line(b"mn\r\n"),
                Line(b"GET / HTTP/1.1\r\n"),
                Line(b"\r\n"),
                Line(b"set\r\n"),
                Line(b"set _ _ _\r\n"),
                Line(b"set _ _ _ x\r\n"),
                Line(b"set _ _ _ -1\r\n"),
                Line(b"set _ _ _ 6x\r\n"),
                Line(b"SET _ _ _ 6\r\n"),
                Line(b"add _ _ _ 6\r\n"),
                Line(b"bob pw\r\n"),
                Line(b"set _\x00 _ _ 6\r\n"),
            ],
        ),
        (
            "tokens of the wrong shape",
            vec![
                Line(b"set _ _ _ 5\r\nalice\r\n"),
                Line(b"set _ _ _ 6\r\nalice \r\n"),
                Line(b"set _ _ _ 0\r\n\r\n"),
                Line(b"set _ _ _ 6\r\nbob pwXY"),
                Line(b"set _ _ _ 6\r\nbob pw\n\n"),
                Line(b"set _ _ _ 12\r\nalice\ts3cret\r\n"),
                Line(b"set _ _ _ 6\r\nbob\x00pw\r\n"),
            ],
        ),
        (
            "lengths memcached reads its own way",
            vec![Line(b"set _ _ _ +6\r\nbob pw\r\n"), Then(b"version\r\n")],
        ),
        (
            "a length past 2^32",
            vec![
                Line(b"set _ _ _ 4294967302\r\nbob pw\r\n"),
                Then(b"version\r\n"),
            ],
        ),
        (
            "extra tokens",
            vec![
                Line(b"set _ _ _ 12 a b c\r\nbob pw extra\r\n"),
                Then(b"version\r\n"),
            ],
        ),
        (
            "spaces",
            vec![
                Line(b"set  _ _ _  15 \r\n  alice  s3cret\r\n"),
                Then(b"get a\r\n"),
            ],
        ),
    ]
}

#[test]
fn ascii_authentication_matches_memcached() {
    let Some(bin) = common::memcached_bin() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("kura-auth-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let users = dir.join("users");
    std::fs::write(&users, USERS).unwrap();
    let memcached = Memcached::start_with(&bin, &["-Y", users.to_str().unwrap()]);
    let kura = TestServer::with(|c| c.auth_file = Some(users.clone()));
    let show = |r: &[Vec<u8>]| {
        r.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect::<Vec<_>>()
    };
    let mut failures = Vec::new();
    for (name, script) in scripts() {
        let theirs = run(memcached.addr, &script);
        let ours = run(kura.addr, &script);
        if theirs != ours {
            failures.push(format!(
                "{name}:\n  memcached: {:?}\n  kura:      {:?}",
                show(&theirs),
                show(&ours)
            ));
        }
    }
    // Both counted the same attempts and failures.
    let auth_stats = |addr| {
        let r = run(
            addr,
            &[
                Req::Line(b"set _ _ _ 6\r\nbob pw\r\n"),
                Req::Then(b"stats\r\n"),
            ],
        );
        let text = String::from_utf8_lossy(&r[1]).into_owned();
        text.lines()
            .filter(|l| l.starts_with("STAT auth_"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (theirs, ours) = (auth_stats(memcached.addr), auth_stats(kura.addr));
    assert_eq!(theirs.len(), 2, "{theirs:?}");
    if theirs != ours {
        failures.push(format!("stats: memcached {theirs:?}, kura {ours:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
