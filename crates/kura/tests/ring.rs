//! `kura ring` as an operator runs it: keys on stdin, `key<TAB>server` out,
//! the same placement as kura-ring's (whose differential tests check it
//! against the real clients), and clear errors for bad arguments.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use kura_ring::{Hash, Kind, Ring, Server};

fn kura_ring(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kura"))
        .arg("ring")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kura ring");
    let mut input = child.stdin.take().expect("stdin");
    // A bad command line ends kura before it reads: a closed pipe then.
    if let Err(e) = input.write_all(stdin) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write keys: {e}");
    }
    drop(input);
    child.wait_with_output().expect("kura ring's output")
}

fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..300).map(|i| format!("user:{i}").into_bytes()).collect();
    keys.push("ключ-日本語".as_bytes().to_vec());
    keys.push(vec![b'x'; 250]);
    keys.push(vec![0xff, 0xfe, b'k']); // not UTF-8: keys are bytes
    keys
}

/// Runs `kura ring` on `keys()` and checks every line against `ring`.
fn check(args: &[&str], ring: &Ring) {
    let keys = keys();
    let mut stdin = Vec::new();
    for k in &keys {
        stdin.extend_from_slice(k);
        stdin.push(b'\n');
    }
    let out = kura_ring(args, &stdin);
    assert!(
        out.status.success(),
        "kura ring {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&[u8]> = out.stdout.split(|&b| b == b'\n').collect();
    assert_eq!(
        lines.len(),
        keys.len() + 1,
        "one line per key, then the end"
    );
    for (key, line) in keys.iter().zip(&lines) {
        let mut want = key.clone();
        want.push(b'\t');
        want.extend_from_slice(ring.server_for(key).to_string().as_bytes());
        assert_eq!(
            *line,
            &want[..],
            "{args:?}: {:?}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn prints_each_keys_server_for_every_kind() {
    let servers = || {
        vec![
            Server::new("10.0.0.1", 11211).with_weight(3),
            Server::new("10.0.0.2", 11211),
            Server::new("10.0.0.3", 11212),
        ]
    };
    let args = ["10.0.0.1:11211:3", "10.0.0.2", "10.0.0.3:11212"];
    for (kind, ring) in [
        ("libmemcached", Ring::new(Kind::Libmemcached, servers())),
        ("dalli", Ring::new(Kind::Dalli, servers())),
        (
            "twemproxy",
            Ring::new(Kind::Twemproxy(Hash::Fnv1a64), servers()),
        ),
    ] {
        let mut a = vec!["--kind", kind];
        a.extend(args);
        check(&a, &ring.expect("ring"));
    }
    let equal = ["10.0.0.1", "10.0.0.2", "10.0.0.3:11212"];
    let plain: Vec<Server> = equal.iter().map(|s| s.parse().expect("server")).collect();
    for (kind, k) in [("ch3", Kind::Ch3), ("jump", Kind::Jump)] {
        let mut a = vec!["--kind", kind];
        a.extend(equal);
        check(&a, &Ring::new(k, plain.clone()).expect("ring"));
    }
}

#[test]
fn twemproxy_takes_a_hash_and_node_names() {
    let args = [
        "-k",
        "twemproxy",
        "--hash",
        "murmur",
        "10.0.0.1:11211:1 cache-a",
        "10.0.0.2:11211:1 cache-b",
    ];
    let servers = vec![
        Server::new("10.0.0.1", 11211).with_name("cache-a"),
        Server::new("10.0.0.2", 11211).with_name("cache-b"),
    ];
    let ring = Ring::new(Kind::Twemproxy(Hash::Murmur), servers).expect("ring");
    check(&args, &ring);
    // The name shows in the output.
    let out = kura_ring(&args, b"k\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("k\t10.0.0."), "{text}");
    assert!(text.trim_end().ends_with(" cache-a") || text.trim_end().ends_with(" cache-b"));
}

#[test]
fn line_ends_are_not_part_of_keys() {
    let args = ["--kind", "libmemcached", "a:1", "b:1", "c:1"];
    let plain = kura_ring(&args, b"k1\nk2\nk3\n");
    let crlf = kura_ring(&args, b"k1\r\nk2\r\n\nk3");
    assert!(plain.status.success() && crlf.status.success());
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout),
        String::from_utf8_lossy(&crlf.stdout),
        "CRLF, an empty line and a last line without newline change nothing"
    );
}

#[test]
fn bad_arguments_are_clear_errors() {
    for (args, says) in [
        (&["--kind", "ketama", "a"][..], "unknown ring kind"),
        (
            &["--kind", "dalli", "--hash", "md5", "a"],
            "--hash is twemproxy's",
        ),
        (
            &["--kind", "twemproxy", "--hash", "sha1", "a"],
            "unknown hash",
        ),
        (&["--kind", "dalli", "a:port"], "bad server"),
        (&["--kind", "dalli", "a:1:0"], "weight 0"),
        (&["--kind", "ch3", "a:1:2"], "has no weights"),
        (&["--kind", "libmemcached", "a:1:1 name"], "no node names"),
    ] {
        let out = kura_ring(args, b"k\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let none = kura_ring(&["--kind", "dalli"], b"");
    assert!(!none.status.success(), "no servers is a usage error");
}
