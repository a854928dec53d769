//! A client that sends many requests and never reads its replies: the
//! proxy stops reading from it once its requests in flight reach the
//! per-connection bound, so the proxy's memory stays bounded, and another
//! client served by the same worker thread and the same backend
//! connection is answered meanwhile.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::proxy::{backends, proxy_for, reply, stat, Kind};

/// Requests routed and unanswered per client connection (conn.rs).
const INFLIGHT: u64 = 1024;
/// The value each stalled `get` asks for.
const VALUE: usize = 50_000;
/// Gets the stalled client sends: 1 GB of replies were they all held.
const SENT: usize = 20_000;

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[test]
fn a_client_that_never_reads_stalls_only_itself_within_bounded_memory() {
    let servers = backends(Kind::Kura, 1);
    // One worker: both clients share its event loop and backend connection.
    let p = proxy_for(&servers, &["-t", "1"]);
    let backend = format!("backend:127.0.0.1:{}:requests", servers[0].port);
    let mut c = p.connect();
    let value = "v".repeat(VALUE);
    assert_eq!(
        reply(
            &mut c,
            format!("set big 0 0 {VALUE}\r\n{value}\r\n").as_bytes()
        ),
        "STORED\r\n"
    );
    let rss_before = rss_kb(p.child.id());
    let routed_before = stat(&mut c, &backend);

    let mut stalled = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
    stalled
        .set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let writer = std::thread::spawn(move || {
        let batch = "get big\r\n".repeat(1000);
        for _ in 0..SENT / 1000 {
            // Blocks once the proxy stops reading; the test ends it by
            // stopping the proxy (or the timeout does).
            if stalled.write_all(batch.as_bytes()).is_err() {
                break;
            }
        }
        stalled
    });

    // Another client on the same worker and backend is answered.
    for i in 0..200 {
        assert_eq!(
            reply(&mut c, format!("set k{i} 0 0 2\r\nok\r\n").as_bytes()),
            "STORED\r\n"
        );
        assert_eq!(
            reply(&mut c, format!("get k{i}\r\n").as_bytes()),
            format!("VALUE k{i} 0 2\r\nok\r\nEND\r\n")
        );
    }
    // Wait until the stalled connection's requests stop being routed
    // (unchanged over ten looks), at most 20 s.
    let (mut last, mut same) = (0, 0);
    for _ in 0..200 {
        let now = stat(&mut c, &backend);
        same = if now == last { same + 1 } else { 0 };
        last = now;
        if same >= 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        same >= 10,
        "the stalled client's requests kept being routed"
    );
    let by_stalled = last.saturating_sub(routed_before + 400);
    // Routed: the bound in flight, plus the replies the sockets' buffers
    // took before the writes stopped (a few MB of 50 KB replies).
    assert!(
        (INFLIGHT..INFLIGHT + 1000).contains(&by_stalled),
        "{by_stalled} requests routed for a client that reads nothing"
    );
    let grown_mb = rss_kb(p.child.id()).saturating_sub(rss_before) / 1024;
    // The bound holds 1,024 replies of 50 KB (50 MB); all 20,000 would be 1 GB.
    assert!(grown_mb < 250, "the proxy grew by {grown_mb} MB");
    // And it still answers.
    assert_eq!(
        reply(&mut c, b"get k0\r\n"),
        "VALUE k0 0 2\r\nok\r\nEND\r\n"
    );
    drop(p);
    let _ = writer.join();
}
