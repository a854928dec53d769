//! What the differential tests share: the third-party tools (found, or a
//! clear failure under CI), the test keys, child processes, and the check
//! of a placement. `memcached.rs` starts the servers and asks them which
//! keys they hold; `nutcracker.rs` runs twemproxy in front of them.

#![allow(dead_code, unused_imports)] // each test file uses its own part

mod memcached;
mod nutcracker;

pub use memcached::{connect, Cluster};
pub use nutcracker::Nutcracker;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kura_ring::Ring;

pub use kura_testkit::tools::{have, memcached_bin, required as tools_required};

/// Python with pylibmc: `$PYTHON` or python3.
pub fn python() -> Option<String> {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    have("pylibmc", Command::new(&py).args(["-c", "import pylibmc"])).then_some(py)
}

/// Ruby with Dalli.
pub fn ruby() -> Option<String> {
    have(
        "ruby-dalli",
        Command::new("ruby").args(["-e", "require 'dalli'"]),
    )
    .then(|| "ruby".to_string())
}

/// twemproxy's nutcracker: `$KURA_NUTCRACKER`, /usr/sbin/nutcracker, or on
/// the PATH.
pub fn nutcracker() -> Option<PathBuf> {
    let bin = std::env::var_os("KURA_NUTCRACKER")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/usr/sbin/nutcracker")).filter(|p| p.exists()))
        .unwrap_or_else(|| PathBuf::from("nutcracker"));
    have("nutcracker", Command::new(&bin).arg("-V")).then_some(bin)
}

/// A scratch directory of this test, emptied first.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("kura-ring")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// A client script of tests/clients/.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients")
        .join(name)
}

/// `n` distinct keys: a quarter short ASCII, a quarter short UTF-8, a
/// quarter long ASCII and a quarter long UTF-8, the long ones 150 to 250
/// bytes (every 7th exactly 250). None has a space or a control byte.
pub fn keys(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let len = if i % 7 == 0 {
                250
            } else {
                150 + (i * 37) % 101
            };
            match i % 4 {
                0 => format!("user:{i}:profile"),
                1 => format!("ключ-{i}-日本語-ü"),
                2 => pad(format!("long-{i}-"), "abcdefghij", len),
                _ => pad(format!("長い鍵-{i}-"), "é鍵", len),
            }
        })
        .collect()
}

/// `head` followed by repeats of `fill`, cut to at most `len` bytes on a
/// character boundary, then ASCII to exactly `len`.
fn pad(mut key: String, fill: &str, len: usize) -> String {
    'outer: while key.len() < len {
        for c in fill.chars() {
            if key.len() + c.len_utf8() > len {
                break 'outer;
            }
            key.push(c);
        }
    }
    while key.len() < len {
        key.push('z');
    }
    key
}

/// Writes the keys one per line.
pub fn write_keys(dir: &Path, keys: &[String]) -> PathBuf {
    let path = dir.join("keys.txt");
    let mut text = keys.join("\n");
    text.push('\n');
    std::fs::write(&path, text).expect("write the keys");
    path
}

pub use kura_testkit::free_port;

/// A child process killed when dropped.
pub use kura_testkit::ChildGuard as Process;

/// Asserts that each key sits on the server `ring` names for it, listing
/// the first disagreements otherwise.
pub fn assert_placed(ring: &Ring, keys: &[String], holders: &[Option<usize>], what: &str) {
    let mut wrong = Vec::new();
    let mut missing = 0;
    for (key, held) in keys.iter().zip(holders) {
        let want = ring.index_for(key.as_bytes());
        match held {
            None => missing += 1,
            Some(h) if *h != want => wrong.push((key, *h, want)),
            Some(_) => {}
        }
    }
    assert_eq!(missing, 0, "{what}: {missing} keys are on no server");
    let shown: Vec<String> = wrong
        .iter()
        .take(5)
        .map(|(k, h, w)| format!("{k:?} on {h}, kura-ring says {w}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: {} of {} keys placed differently: {shown:#?}",
        wrong.len(),
        keys.len()
    );
    let mut per_server = vec![0; ring.servers().len()];
    for h in holders.iter().flatten() {
        per_server[*h] += 1;
    }
    println!(
        "{what}: all {} keys match ({per_server:?} per server)",
        keys.len()
    );
}

/// Runs a client script to completion, failing the test on an error exit.
pub fn run_client(cmd: &mut Command, what: &str) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{}", String::from_utf8_lossy(&out.stdout));
}
