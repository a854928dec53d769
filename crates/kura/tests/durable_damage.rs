//! What an unlucky operator does to a data dir: a bit flipped in the last
//! record, the newest segment deleted, `kura log repair` run while the
//! server is up. None of it may silently lose an acknowledged write.

mod common;

use common::{fill, get, kura, log_repair, newest, start_fails, stat, tempdir, Server};

/// The offset of the last record in a segment's bytes.
fn last_record(bytes: &[u8]) -> usize {
    let len = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 16;
    while at + 8 + len(at) < bytes.len() {
        at += 8 + len(at);
    }
    at
}

fn log_check(dir: &std::path::Path) -> (Option<i32>, String) {
    let out = kura().args(["log", "check"]).arg(dir).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_flipped_bit_in_the_last_record_is_corruption_not_a_torn_tail() {
    for fsync in ["always", "everysec"] {
        let dir = tempdir(&format!("flip-last-{fsync}"));
        let server = Server::start(&dir, &["--fsync", fsync]);
        fill(&server, "k", 200);
        // A clean stop: every record acknowledged and on disk.
        server.stop();
        let seg = newest(&dir, "klog");
        let mut bytes = std::fs::read(&seg).unwrap();
        let at = last_record(&bytes);
        let end = bytes.len();
        bytes[end - 3] ^= 0x01;
        std::fs::write(&seg, &bytes).unwrap();
        let (code, report) = log_check(&dir);
        assert_eq!(code, Some(2), "{fsync}: {report}");
        assert!(report.contains(&format!("offset {at}")), "{report}");
        let err = start_fails(&dir);
        assert!(err.contains("corrupt update log"), "{fsync}: {err}");
        // Nothing was cut: the damaged record is still there to look at.
        assert_eq!(std::fs::read(&seg).unwrap(), bytes);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_deleted_newest_segment_stops_the_start_until_repair_gives_it_up() {
    let dir = tempdir("missing-segment");
    let args = ["--fsync", "always", "--log-file-size", "4096"];
    let server = Server::start(&dir, &args);
    fill(&server, "k", 400);
    server.kill();
    let seg = newest(&dir, "klog");
    std::fs::remove_file(&seg).unwrap();
    let (code, report) = log_check(&dir);
    assert_eq!(code, Some(2), "{report}");
    assert!(report.contains("missing"), "{report}");
    let err = start_fails(&dir);
    assert!(err.contains("missing"), "{err}");
    // The operator gives the records up knowingly; the rest comes back.
    log_repair(&dir, true);
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    assert_eq!(get(&mut c, "k0"), Some(format!("{:020}", 0)));
    assert_eq!(get(&mut c, "k399"), None);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repair_refuses_a_data_dir_a_server_is_using() {
    let dir = tempdir("repair-live");
    let server = Server::start(&dir, &["--fsync", "no"]);
    fill(&server, "k", 100);
    // Once the log thread has written everything, the segment must stay
    // as it is: repair must not touch it.
    let mut c = server.connect();
    for _ in 0..1000 {
        if stat(&mut c, "log_written_seq") + 1 == stat(&mut c, "log_next_seq") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let seg = newest(&dir, "klog");
    let before = std::fs::read(&seg).unwrap();
    for args in [
        &["log", "repair"][..],
        &["log", "repair", "--truncate-corrupt"],
    ] {
        let out = kura().args(args).arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("in use"), "{err}");
        assert!(
            err.contains(&server.child.id().to_string()),
            "names the server: {err}"
        );
    }
    assert_eq!(std::fs::read(&seg).unwrap(), before);
    // Checking only reads, and says the directory is live.
    let (_, report) = log_check(&dir);
    assert!(report.contains("in use by a running server"), "{report}");
    // The server is unharmed: it writes on and starts again after a stop.
    fill(&server, "after", 10);
    server.stop();
    let server = Server::start(&dir, &[]);
    let mut c = server.connect();
    assert_eq!(get(&mut c, "k99"), Some(format!("{:020}", 99)));
    assert_eq!(get(&mut c, "after9"), Some(format!("{:020}", 9)));
    server.stop();
    // Once the server is gone, repair may go ahead.
    log_repair(&dir, false);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_is_accepted_while_a_data_dir_loads_or_when_it_cannot() {
    let dir = tempdir("loading");
    let server = Server::start(&dir, &["--fsync", "no", "--snapshot-log-size", "0"]);
    for round in 0..4 {
        fill(&server, &format!("r{round}k"), 50_000);
    }
    server.stop();
    // Damage in the middle: found only after reading much of the log.
    let seg = newest(&dir, "klog");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() * 3 / 4;
    bytes[at] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();
    let port = common::free_port();
    let mut child = kura()
        .args(["server", "-p", &port.to_string(), "--data-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut attempts = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "never gave up");
        attempts += 1;
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "a connection was accepted while the data dir was still being checked"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    assert!(!status.success());
    assert!(attempts > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
