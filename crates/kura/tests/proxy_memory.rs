//! Clients that send many requests and never read their replies: the
//! proxy stops reading from each once what its requests in flight may
//! return reaches its bound (`[limits]`, limits.rs: bytes as well as
//! requests), so the proxy's memory stays bounded, another client served
//! by the same worker thread and the same backend connection is answered
//! meanwhile, and the backend, which answers everything at once, is never
//! taken for down (issue 43).

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use common::proxy::{backends, proxy_for, reply, stat, Kind};
use common::Server;

/// Requests routed and unanswered per client connection at most
/// (`client_max_requests`).
const INFLIGHT: u64 = 1024;
/// The value of the clients that hold big replies: 900 KiB.
const BIG: usize = 900 * 1024;
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

/// A backend, a proxy with one worker in front (every client shares its
/// event loop and backend connection), and a client that stored `big`,
/// a value of `len` bytes.
fn with_big(len: usize) -> (Vec<Server>, Server, TcpStream) {
    let servers = backends(Kind::Kura, 1);
    let p = proxy_for(&servers, &["-t", "1"]);
    let mut c = p.connect();
    let value = "v".repeat(len);
    let set = format!("set big 0 0 {len}\r\n{value}\r\n");
    assert_eq!(reply(&mut c, set.as_bytes()), "STORED\r\n");
    (servers, p, c)
}

#[test]
fn a_client_that_never_reads_stalls_only_itself_within_bounded_memory() {
    let (servers, p, mut c) = with_big(VALUE);
    let backend = format!("backend:127.0.0.1:{}:requests", servers[0].port);
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
    // Wait until the stalled connection's requests stop being routed.
    let last = routed_settles(&mut c, &backend);
    let by_stalled = last.saturating_sub(routed_before + 400);
    // Routed: the window in flight (4 MiB of 50 KB replies), plus the
    // replies the sockets' buffers took before the writes stopped.
    assert!(
        by_stalled < INFLIGHT,
        "{by_stalled} requests routed for a client that reads nothing"
    );
    let grown_mb = rss_kb(p.child.id()).saturating_sub(rss_before) / 1024;
    // At most 1,024 replies of 50 KB (50 MB); all 20,000 would be 1 GB.
    assert!(grown_mb < 250, "the proxy grew by {grown_mb} MB");
    // And it still answers.
    assert_eq!(
        reply(&mut c, b"get k0\r\n"),
        "VALUE k0 0 2\r\nok\r\nEND\r\n"
    );
    drop(p);
    let _ = writer.join();
}

/// Routed requests to the backend: unchanged over ten looks 100 ms apart
/// (at most 20 s), once the stalled clients' requests stopped.
fn routed_settles(c: &mut TcpStream, name: &str) -> u64 {
    let (mut last, mut same) = (0, 0);
    for _ in 0..200 {
        let now = stat(c, name);
        same = if now == last { same + 1 } else { 0 };
        last = now;
        if same >= 10 {
            return last;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the stalled clients' requests kept being routed");
}

/// Two clients each send 1,100 gets of a 900 KiB value and never read:
/// 1.9 GB were they all held (before the byte bound, each held 1,024
/// replies, some 900 MB, and the tail of them timed out in the proxy,
/// marking the healthy backend down). The proxy grows by little, another
/// client's every request is answered, and the backend is never down.
#[test]
fn clients_that_never_read_big_values_hold_a_bounded_share_and_mark_no_backend_down() {
    let (servers, p, mut c) = with_big(BIG);
    let addr = format!("127.0.0.1:{}", servers[0].port);
    let rss_before = rss_kb(p.child.id());
    let stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            // 9.9 KB of requests: one write the proxy takes whole.
            s.write_all("get big\r\n".repeat(1100).as_bytes()).unwrap();
            s
        })
        .collect();
    // Another client, meanwhile and after: every request answered.
    let ask_all = |c: &mut TcpStream, round: usize| {
        for i in 0..100 {
            let k = format!("k{round}-{i}");
            let r = reply(c, format!("set {k} 0 0 2\r\nok\r\n").as_bytes());
            assert_eq!(r, "STORED\r\n", "another client was refused");
            let r = reply(c, format!("get {k}\r\n").as_bytes());
            assert_eq!(r, format!("VALUE {k} 0 2\r\nok\r\nEND\r\n"));
        }
    };
    ask_all(&mut c, 0);
    routed_settles(&mut c, &format!("backend:{addr}:requests"));
    ask_all(&mut c, 1);
    let grown_mb = rss_kb(p.child.id()).saturating_sub(rss_before) / 1024;
    // The windows: 16 replies each before the first came, then 4 MiB.
    assert!(grown_mb < 200, "the proxy grew by {grown_mb} MB");
    assert_eq!(stat(&mut c, &format!("backend:{addr}:down_transitions")), 0);
    assert_eq!(stat(&mut c, &format!("backend:{addr}:timeouts")), 0);
    drop(stalled);
}

/// `[limits]` is reloadable: a reload to `client_max_requests = 2` bounds
/// a connection opened before it. The connection's window opened to 1,024
/// on small replies first; then the backend is stopped (SIGSTOP) so
/// whatever the proxy routes stays in flight, and the client's 300
/// pipelined gets are routed two at a time (before limits were
/// reloadable, all 300), and all are answered once the backend runs again.
#[test]
fn a_reload_applies_new_limits_to_open_connections() {
    let s = common::proxy::backends(Kind::Kura, 1);
    let metrics = common::free_port();
    let toml = |requests: u32| {
        format!(
            "metrics_listen = \"127.0.0.1:{metrics}\"\n[pools.main]\nservers = [{}]\n\
             [health]\nrequest_timeout_ms = 60000\n\
             [limits]\nclient_max_requests = {requests}\n",
            common::proxy::quoted(&s[0])
        )
    };
    let (p, path) = common::proxy::proxy_with("proxy-limits-reload", &toml(1024));
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 2\r\nhi\r\n"), "STORED\r\n");
    let hit = "VALUE k 0 2\r\nhi\r\nEND\r\n";
    // Small replies read: the connection's window opens to the count
    // bound (it starts at 16 whatever the bounds, limits.rs).
    let warm = common::proxy::ask_n(
        &mut c,
        "get k\r\n".repeat(1000).as_bytes(),
        hit.len() * 1000,
    );
    assert_eq!(String::from_utf8_lossy(&warm), hit.repeat(1000));
    std::fs::write(&path, toml(2)).unwrap();
    let raw = common::http_exchange(
        metrics,
        "POST /reload HTTP/1.1",
        "Host: x\r\nContent-Length: 0\r\nConnection: close\r\n",
    );
    assert!(String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 200"));
    let routed = || -> u64 {
        let raw = common::http_exchange(
            metrics,
            "GET /metrics HTTP/1.1",
            "Host: x\r\nConnection: close\r\n",
        );
        let page = String::from_utf8_lossy(&raw).into_owned();
        page.lines()
            .find_map(|l| l.strip_prefix("kura_proxy_backend_requests_total{"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no requests count: {page}"))
    };
    let before = routed();
    common::proxy::signal(&s[0], libc::SIGSTOP);
    c.write_all("get k\r\n".repeat(300).as_bytes()).unwrap();
    // Unchanged over ten looks 100 ms apart, once two are in flight.
    let (mut last, mut same) = (0, 0);
    for _ in 0..200 {
        let now = routed() - before;
        same = if now == last && now >= 2 { same + 1 } else { 0 };
        last = now;
        if same >= 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    common::proxy::signal(&s[0], libc::SIGCONT);
    assert!(
        last < 100,
        "{last} of 300 requests in flight with a bound of 2"
    );
    let want = hit.repeat(300);
    let all = common::proxy::ask_n(&mut c, b"", want.len());
    assert_eq!(String::from_utf8_lossy(&all), want);
}
